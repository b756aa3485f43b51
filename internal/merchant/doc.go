// Package merchant is the registry of WeChat Pay accounts and of the
// merchants that reservations belong to, read from a merchants file
// (--merchants-file, TOML) or built from today's single-merchant
// --wechatpay-* settings (NewDefault).
//
// An Account is one merchant id with its keys: a direct merchant, or a
// service provider that signs for its sub-merchants. A Merchant is whose
// orders are refunded: a direct merchant on a direct account, or a
// sub-merchant (sub_mchid) of a service-provider account. Each merchant has
// its own refund-number prefix, notify_url and policy overrides.
//
// The file never holds a secret: private keys, APIv3 and APIv2 keys are
// named as env:NAME or file:PATH, and anything else is refused. Parsing
// reads nothing but the file; LoadCredentials reads the secrets and keys
// through the getenv and file reader it is given, into the types
// internal/wechatpay takes.
//
// Every problem of a file is reported at once, each naming its setting by
// path (merchants[2].sub_mchid) and, for syntax and unknown keys, its line.
// docs/MERCHANTS.md is the operator's description of the format.
package merchant
