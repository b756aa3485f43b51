// Package api is refundd's HTTP interface (gorilla/mux, JSON). It decodes
// and validates requests strictly, hands them to the engine by reservation
// id, and maps domain outcomes to HTTP in one table (errors.go). It answers
// only after the engine has journaled what the request decided.
package api
