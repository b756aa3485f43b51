// Package contract holds the provider contract suite: the behaviour refundd
// relies on from any actors.Provider, run against the built-in WeChat Pay
// sandbox and, when credentials are given, against a real merchant account
// (see contract_test.go for the REFUNDD_CONTRACT_* variables), in direct and
// in service-provider (partner) mode.
package contract
