package config_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/config"
)

// flags mimics cmd/refundd: environment variables become defaults before
// parsing, durations through Set.
type flags struct {
	fs      *flag.FlagSet
	listen  string
	idle    time.Duration
	level   string
	token   string
	certs   list
	verbose bool
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func newFlags(t *testing.T, env map[string]string, args ...string) *flags {
	t.Helper()
	f := &flags{fs: flag.NewFlagSet("refundd", flag.ContinueOnError), listen: "127.0.0.1:8080", idle: 2 * time.Minute, level: "info"}
	f.fs.SetOutput(io.Discard)
	if v := env["REFUNDD_LISTEN"]; v != "" {
		f.listen = v
	}
	f.fs.StringVar(&f.listen, "listen", f.listen, "")
	f.fs.DurationVar(&f.idle, "idle-timeout", f.idle, "")
	if v := env["REFUNDD_IDLE_TIMEOUT"]; v != "" {
		if err := f.fs.Set("idle-timeout", v); err != nil {
			t.Fatal(err)
		}
	}
	f.fs.StringVar(&f.level, "log-level", f.level, "")
	f.fs.StringVar(&f.token, "admin-token", "", "")
	f.fs.Var(&f.certs, "platform-cert", "")
	f.fs.BoolVar(&f.verbose, "verbose", false, "")
	if err := f.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func opts(env map[string]string) config.Options {
	return config.Options{Getenv: func(k string) string { return env[k] }, Reserved: []string{"config"},
		EnvNames: map[string]string{"platform-cert": "REFUNDD_PLATFORM_CERTS"}}
}

func TestParse_Lines(t *testing.T) {
	in := "\ufeff# refundd\n\nlisten = 0.0.0.0:8080\n  --log-level=debug  \nreason = \"  a # kept  \"  # why\nempty =\nnote = x # a comment\n"
	got, err := config.Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Entry{{3, "listen", "0.0.0.0:8080"}, {4, "log-level", "debug"}, {5, "reason", "  a # kept  "}, {6, "empty", ""}, {7, "note", "x"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: got %+v want %+v", i, got[i], want[i])
		}
	}
}

func TestParse_Errors(t *testing.T) {
	for _, in := range []string{"listen 127.0.0.1", "= x", "two words = x", "v = \"unterminated", "v = \"x\" y", strings.Repeat("x", 70<<10) + " = 1"} {
		if _, err := config.Parse(strings.NewReader(in)); !errors.Is(err, config.ErrSyntax) {
			t.Errorf("%.30q: err %v, want ErrSyntax", in, err)
		}
	}
}

func TestApply_Precedence(t *testing.T) {
	file := []config.Entry{
		{1, "listen", "0.0.0.0:1"}, {2, "idle-timeout", "7m"}, {3, "log-level", "debug"},
		{4, "platform-cert", "a.pem"}, {5, "platform-cert", "b.pem"}, {6, "verbose", "true"},
	}
	for _, tc := range []struct {
		name       string
		env        map[string]string
		args       []string
		listen     string
		idle       time.Duration
		level      string
		srcListen  config.Source
		srcIdle    config.Source
		srcLevel   config.Source
		srcVerbose config.Source
	}{
		{name: "file over default", listen: "0.0.0.0:1", idle: 7 * time.Minute, level: "debug",
			srcListen: config.SourceFile, srcIdle: config.SourceFile, srcLevel: config.SourceFile, srcVerbose: config.SourceFile},
		{name: "env over file", env: map[string]string{"REFUNDD_LISTEN": "10.0.0.1:2", "REFUNDD_IDLE_TIMEOUT": "9m"},
			listen: "10.0.0.1:2", idle: 9 * time.Minute, level: "debug",
			srcListen: config.SourceEnv, srcIdle: config.SourceEnv, srcLevel: config.SourceFile, srcVerbose: config.SourceFile},
		{name: "flag over env and file", env: map[string]string{"REFUNDD_LISTEN": "10.0.0.1:2", "REFUNDD_IDLE_TIMEOUT": "9m"},
			args:   []string{"--listen", "127.0.0.1:3", "-idle-timeout=1m", "-verbose", "--log-level", "warn"},
			listen: "127.0.0.1:3", idle: time.Minute, level: "warn",
			srcListen: config.SourceFlag, srcIdle: config.SourceFlag, srcLevel: config.SourceFlag, srcVerbose: config.SourceFlag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlags(t, tc.env, tc.args...)
			src, err := config.Apply(f.fs, tc.args, file, "refundd.conf", opts(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if f.listen != tc.listen || f.idle != tc.idle || f.level != tc.level || !f.verbose {
				t.Fatalf("listen %q idle %v level %q verbose %v", f.listen, f.idle, f.level, f.verbose)
			}
			if src["listen"] != tc.srcListen || src["idle-timeout"] != tc.srcIdle || src["log-level"] != tc.srcLevel ||
				src["verbose"] != tc.srcVerbose || src["admin-token"] != config.SourceDefault {
				t.Fatalf("sources %v", src)
			}
			if strings.Join(f.certs, ",") != "a.pem,b.pem" {
				t.Fatalf("a repeatable flag collects every line: %v", f.certs)
			}
		})
	}
}

func TestApply_Errors(t *testing.T) {
	for _, tc := range []struct {
		entry  config.Entry
		want   error
		secret string
	}{
		{config.Entry{3, "lisen", "x"}, config.ErrUnknownSetting, ""},
		{config.Entry{4, "config", "other.conf"}, config.ErrUnknownSetting, ""},
		{config.Entry{5, "idle-timeout", "soon"}, config.ErrInvalidValue, ""},
		{config.Entry{6, "verbose", "maybe-s3cr3t"}, config.ErrInvalidValue, ""},
	} {
		f := newFlags(t, nil)
		_, err := config.Apply(f.fs, nil, []config.Entry{tc.entry}, "refundd.conf", opts(nil))
		if !errors.Is(err, tc.want) {
			t.Fatalf("%+v: err %v, want %v", tc.entry, err, tc.want)
		}
		if want := "refundd.conf:" + string(rune('0'+tc.entry.Line)); !strings.Contains(err.Error(), want) {
			t.Fatalf("error does not name the line: %v", err)
		}
	}
}

// A secret's invalid value is not echoed back in the error.
func TestApply_SecretValueNotInError(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("api-token-count", 0, "") // a numeric "token" setting, to make Set fail
	_, err := config.Apply(fs, nil, []config.Entry{{1, "api-token-count", "s3cr3t"}}, "f", config.Options{Getenv: func(string) string { return "" }})
	if !errors.Is(err, config.ErrInvalidValue) || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("err %v", err)
	}
}

func TestLoad_File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refundd.conf")
	if err := os.WriteFile(path, []byte("listen = 0.0.0.0:9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFlags(t, nil)
	src, err := config.Load(f.fs, nil, path, opts(nil))
	if err != nil || f.listen != "0.0.0.0:9" || src["listen"] != config.SourceFile {
		t.Fatalf("listen %q src %v err %v", f.listen, src, err)
	}
	if _, err := config.Load(f.fs, nil, path+".missing", opts(nil)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	g := newFlags(t, nil)
	if src, err := config.Load(g.fs, nil, "", opts(nil)); err != nil || src["listen"] != config.SourceDefault {
		t.Fatalf("no file: %v %v", src, err)
	}
}

func TestEffective_MasksSecrets(t *testing.T) {
	env := map[string]string{}
	f := newFlags(t, env, "--admin-token", "t0ps3cret", "--listen", "http://user:pw@host:1")
	src, err := config.Apply(f.fs, []string{"--admin-token", "t0ps3cret", "--listen", "http://user:pw@host:1"}, nil, "", opts(env))
	if err != nil {
		t.Fatal(err)
	}
	eff := config.Effective(f.fs, src, opts(env))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("effective configuration", "config", eff)
	if _, err := eff.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, secret := range []string{"t0ps3cret", "pw@"} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q shown:\n%s", secret, out)
		}
	}
	for _, want := range []string{`"admin-token":"********"`, `"from":{`, `"listen":"flag"`, `# admin-token = "********"  # flag`,
		`idle-timeout = "2m0s"  # default`, "user:xxxxx@host"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
	// What WriteTo wrote loads back.
	_, file, _ := strings.Cut(out, "\n")
	entries, err := config.Parse(strings.NewReader(file))
	if err != nil || len(entries) != 5 { // six flags, the secret commented out
		t.Fatalf("reparse: %d entries, %v", len(entries), err)
	}
}

func TestOptions_EnvName(t *testing.T) {
	o := opts(nil)
	if got := o.EnvName("wechatpay-apiv3-key-file"); got != "REFUNDD_WECHATPAY_APIV3_KEY_FILE" {
		t.Fatal(got)
	}
	if got := o.EnvName("platform-cert"); got != "REFUNDD_PLATFORM_CERTS" {
		t.Fatal(got)
	}
}

// A password with a raw '/', '?' or '#' makes the URL unparsable: it is
// hidden all the same, with everything up to the last '@'.
func TestEffective_MasksPasswordsOfURLsItCannotParse(t *testing.T) {
	env := map[string]string{}
	v := "postgres://refundd:s3cr/et@db:5432/refundd,http://u:p?w#d@h:1,http://plain@h:2"
	f := newFlags(t, env, "--listen", v)
	src, err := config.Apply(f.fs, []string{"--listen", v}, nil, "", opts(env))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := config.Effective(f.fs, src, opts(env)).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, secret := range []string{"s3cr", "p?w", "#d"} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q shown:\n%s", secret, out)
		}
	}
	for _, want := range []string{"postgres://refundd:xxxxx@db:5432/refundd", "http://u:xxxxx@h:1", "http://plain@h:2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
}
