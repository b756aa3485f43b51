package merchant

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrSyntax is returned when the merchants file is not TOML, or a value
	// has the wrong TOML type (a number where a string belongs).
	ErrSyntax = errors.New("merchant: syntax")
	// ErrUnknownKey is returned when the file has a key the format does not
	// define (a typo would otherwise be ignored silently).
	ErrUnknownKey = errors.New("merchant: unknown key")
	// ErrInlineSecret is returned when a private key, APIv3 key or APIv2
	// key is written into the file instead of named as env:NAME or
	// file:PATH.
	ErrInlineSecret = errors.New("merchant: inline secret")
	// ErrMissing is returned when a required setting is absent or empty.
	ErrMissing = errors.New("merchant: missing")
	// ErrInvalid is returned when a setting's value is malformed or out of
	// range.
	ErrInvalid = errors.New("merchant: invalid")
	// ErrConflict is returned when two entries clash: a name, refund-number
	// prefix or merchant id used twice, or a prefix that starts another.
	ErrConflict = errors.New("merchant: conflict")
)

// FieldError is one problem with one setting.
type FieldError struct {
	// Path names the setting: "merchants[2].sub_mchid" in a merchants file
	// (indexes count from 0 in file order), a flag such as
	// "--wechatpay-serial" for the default merchant.
	Path string
	// Line is the 1-based line in the file; 0 when not known (validation
	// works on decoded values, which carry no positions).
	Line int
	// Err wraps one of the package's sentinels.
	Err error
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Errors is every problem found in one pass, in file order, so an operator
// fixes a file in one round rather than one error per start.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As see every problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// problems collects FieldErrors.
type problems struct{ list Errors }

func (p *problems) add(path string, sentinel error, format string, args ...any) {
	p.list = append(p.list, &FieldError{Path: path, Err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))})
}

func (p *problems) wrap(path string, err error) {
	p.list = append(p.list, &FieldError{Path: path, Err: err})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return p.list
}
