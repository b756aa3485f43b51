package wechatpay

// CheckBaseURL reports whether raw is acceptable as ClientConfig.BaseURL,
// so configuration can be checked before any client is built. Errors wrap
// ErrInvalidArgument.
func CheckBaseURL(raw string) error {
	_, err := checkBaseURL(raw)
	return err
}

// CheckNotifyURL reports whether raw is acceptable as
// ClientConfig.NotifyURL (WeChat Pay's rules: absolute http(s), no query or
// fragment, at most 256 bytes; empty is allowed). Errors wrap
// ErrInvalidArgument.
func CheckNotifyURL(raw string) error { return checkNotifyURL(raw) }
