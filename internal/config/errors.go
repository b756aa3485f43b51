package config

import "errors"

// ErrSyntax is returned when a line of a configuration file is not
// "key = value", a comment or blank.
var ErrSyntax = errors.New("config: syntax error")

// ErrUnknownSetting is returned when a configuration file names a setting
// that is not a flag (a typo must not be silently ignored).
var ErrUnknownSetting = errors.New("config: unknown setting")

// ErrInvalidValue is returned when a configuration file gives a value its
// flag refuses.
var ErrInvalidValue = errors.New("config: invalid value")
