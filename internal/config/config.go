// Package config reads refundd's optional configuration file and applies it
// beneath the command line and the environment, and renders the effective
// configuration with secrets masked.
//
// The file holds "key = value" lines whose keys are flag names; blank lines
// and lines starting with '#' are ignored, a '#' after a space starts a
// comment, and a value may be written as a Go string literal ("...") to keep
// surrounding spaces or a " #". Precedence is flag >
// environment variable > file > built-in default: a file entry is applied
// only when its flag is absent from the command line and its environment
// variable is empty.
package config

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Entry is one "key = value" line of a configuration file.
type Entry struct {
	Line  int
	Key   string
	Value string
}

// maxLine bounds one line; configuration lines are short.
const maxLine = 64 << 10

// Parse reads a configuration file. Errors wrap ErrSyntax and name the line.
func Parse(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff") // a BOM left by some editors
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" || strings.ContainsAny(key, " \t\"") {
			return nil, fmt.Errorf("%w: line %d: want key = value", ErrSyntax, n)
		}
		key = strings.TrimLeft(key, "-") // "--listen = x" is forgiven
		if strings.HasPrefix(value, `"`) {
			q, err := strconv.QuotedPrefix(value)
			rest := strings.TrimSpace(value[len(q):])
			if err != nil || (rest != "" && !strings.HasPrefix(rest, "#")) {
				return nil, fmt.Errorf("%w: line %d: malformed quoted value", ErrSyntax, n)
			}
			value, _ = strconv.Unquote(q)
		} else if i := strings.Index(value, " #"); i >= 0 {
			value = strings.TrimSpace(value[:i]) // a trailing comment
		} else if i := strings.Index(value, "\t#"); i >= 0 {
			value = strings.TrimSpace(value[:i])
		}
		out = append(out, Entry{Line: n, Key: key, Value: value})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, n+1, err)
	}
	return out, nil
}

// Source says where a setting's effective value came from.
type Source string

// Sources, from strongest to weakest.
const (
	SourceFlag    Source = "flag"
	SourceEnv     Source = "env"
	SourceFile    Source = "file"
	SourceDefault Source = "default"
)

// Options say how flags map to environment variables and which settings
// are secret.
type Options struct {
	// EnvPrefix starts every flag's environment variable: flag "idle-timeout"
	// is PREFIX + "IDLE_TIMEOUT". Empty means "REFUNDD_".
	EnvPrefix string
	// EnvNames overrides the variable of flags whose name does not follow
	// the rule (flag name -> variable); nil means none do.
	EnvNames map[string]string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Secret reports whether a setting's value must never be shown; nil
	// means names mentioning a password, secret, token or API key that are
	// not file names (logs.SecretKey's rule, repeated here so the two
	// packages stay independent).
	Secret func(name string) bool
	// Reserved names flags a file may not set (for example "config"
	// itself); nil means none.
	Reserved []string
}

func (o Options) withDefaults() Options {
	if o.EnvPrefix == "" {
		o.EnvPrefix = "REFUNDD_"
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Secret == nil {
		o.Secret = secretName
	}
	return o
}

// EnvName returns the environment variable of a flag.
func (o Options) EnvName(flagName string) string {
	o = o.withDefaults()
	if v, ok := o.EnvNames[flagName]; ok {
		return v
	}
	return o.EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Sources maps every flag name to where its value came from.
type Sources map[string]Source

// Load applies the configuration file at path (none when path is empty) to
// fs, beneath the command line and the environment, and reports where every
// flag's value came from. Call it after fs.Parse(args) with the same args.
// Errors wrap ErrSyntax, ErrUnknownSetting or ErrInvalidValue and name the
// file and line, or are the file's open error.
func Load(fs *flag.FlagSet, args []string, path string, opts Options) (Sources, error) {
	var entries []Entry
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		entries, err = Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return Apply(fs, args, entries, path, opts)
}

// Apply is Load with the file already parsed; name is used in errors.
func Apply(fs *flag.FlagSet, args []string, entries []Entry, name string, opts Options) (Sources, error) {
	opts = opts.withDefaults()
	onCommandLine := commandLine(fs, args)
	envSet := func(flagName string) bool { return opts.Getenv(opts.EnvName(flagName)) != "" }
	fromFile := map[string]bool{}
	for _, e := range entries {
		f := fs.Lookup(e.Key)
		if f == nil || slices.Contains(opts.Reserved, e.Key) {
			return nil, fmt.Errorf("%s:%d: %w %q", name, e.Line, ErrUnknownSetting, e.Key)
		}
		if onCommandLine[e.Key] || envSet(e.Key) {
			continue // the stronger source wins
		}
		if err := fs.Set(e.Key, e.Value); err != nil {
			// The flag's own message may quote the value: leave it out for
			// secrets.
			detail := err.Error()
			if opts.Secret(e.Key) {
				detail = "value refused"
			}
			return nil, fmt.Errorf("%s:%d: %w for %s: %s", name, e.Line, ErrInvalidValue, e.Key, detail)
		}
		fromFile[e.Key] = true
	}
	src := Sources{}
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case onCommandLine[f.Name]:
			src[f.Name] = SourceFlag
		case envSet(f.Name):
			src[f.Name] = SourceEnv
		case fromFile[f.Name]:
			src[f.Name] = SourceFile
		default:
			src[f.Name] = SourceDefault
		}
	})
	return src, nil
}

// placeholder stands in for a flag's value while finding which flags the
// command line names, without touching the real values.
type placeholder struct{ isBool bool }

func (p placeholder) String() string   { return "" }
func (p placeholder) Set(string) error { return nil }
func (p placeholder) IsBoolFlag() bool { return p.isBool }

// commandLine returns the flags named in args, parsed by the flag package's
// own rules on a twin FlagSet.
func commandLine(fs *flag.FlagSet, args []string) map[string]bool {
	twin := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	twin.SetOutput(io.Discard)
	twin.Usage = func() {}
	fs.VisitAll(func(f *flag.Flag) {
		bf, ok := f.Value.(interface{ IsBoolFlag() bool })
		twin.Var(placeholder{isBool: ok && bf.IsBoolFlag()}, f.Name, "")
	})
	_ = twin.Parse(args) // fs.Parse already accepted args
	set := map[string]bool{}
	twin.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// Setting is one flag's effective value.
type Setting struct {
	Name   string
	Value  string // masked when secret
	Source Source
}

// MaskedValue replaces a secret's value.
const MaskedValue = "********"

// Effective returns every flag of fs in name order with its value, secrets
// masked (an empty secret stays empty, so "not set" remains visible) and
// passwords inside URLs hidden. src may be nil.
func Effective(fs *flag.FlagSet, src Sources, opts Options) Settings {
	opts = opts.withDefaults()
	var out Settings
	fs.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		switch {
		case v != "" && opts.Secret(f.Name):
			v = MaskedValue
		case strings.Contains(v, "@"):
			v = maskURLPasswords(v)
		}
		s := src[f.Name]
		if s == "" {
			s = SourceDefault
		}
		out = append(out, Setting{Name: f.Name, Value: v, Source: s})
	})
	return out
}

// maskURLPasswords hides the password of URLs in a (possibly
// comma-separated) value.
func maskURLPasswords(v string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		u, err := url.Parse(p)
		if err != nil {
			// A password with a raw '/', '?' or '#' fails the parse: hide
			// everything after the user name up to the last '@' (more than
			// the password, never less).
			parts[i] = maskUnparsedUserinfo(p)
			continue
		}
		if u.User == nil {
			continue
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

func maskUnparsedUserinfo(p string) string {
	scheme, rest, ok := strings.Cut(p, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return p
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return p
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// Settings is an effective configuration.
type Settings []Setting

// LogValue logs every setting as name=value, and where the non-default
// ones came from under "from".
func (s Settings) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(s)+1)
	var from []any
	for _, x := range s {
		attrs = append(attrs, slog.String(x.Name, x.Value))
		if x.Source != SourceDefault {
			from = append(from, slog.String(x.Name, string(x.Source)))
		}
	}
	if len(from) > 0 {
		attrs = append(attrs, slog.Group("from", from...))
	}
	return slog.GroupValue(attrs...)
}

// WriteTo writes the settings as a configuration file, each line commented
// with its source; masked secrets are commented out so the output can be
// loaded back.
func (s Settings) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	for _, x := range s {
		prefix := ""
		if x.Value == MaskedValue {
			prefix = "# "
		}
		fmt.Fprintf(&b, "%s%s = %s  # %s\n", prefix, x.Name, strconv.Quote(x.Value), x.Source)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

func secretName(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "file") || strings.HasSuffix(n, "path") {
		return false
	}
	for _, s := range []string{"password", "passwd", "secret", "token", "apikey", "api-key", "api_key",
		"apiv3-key", "apiv2-key", "private-key-pem"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
