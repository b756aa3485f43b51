package config_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/config"
)

// ApplyEnv sets each flag from its variable, splits the lists, lets the
// command line win, and names the variable of a value refused (never the
// value of a secret).
func TestApplyEnv(t *testing.T) {
	env := map[string]string{"REFUNDD_LISTEN": "127.0.0.1:9", "REFUNDD_IDLE": "7m", "REFUNDD_CERT": "a.pem,b.pem", "REFUNDD_VERBOSE": "true"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	listen, idle, verbose := fs.String("listen", "x", ""), fs.Duration("idle", time.Minute, ""), fs.Bool("verbose", false, "")
	var certs list
	fs.Var(&certs, "cert", "")
	opts := config.Options{Getenv: func(k string) string { return env[k] }}
	if err := config.ApplyEnv(fs, opts, "cert"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--idle", "9m"}); err != nil {
		t.Fatal(err)
	}
	if *listen != "127.0.0.1:9" || *idle != 9*time.Minute || !*verbose || !slices.Equal(certs, list{"a.pem", "b.pem"}) {
		t.Fatalf("listen %q idle %s verbose %v certs %v", *listen, *idle, *verbose, certs)
	}

	for _, tc := range []struct {
		env, value, want string
		secret           bool
	}{
		{"REFUNDD_IDLE", "soon", `REFUNDD_IDLE="soon"`, false},
		{"REFUNDD_API_KEY_COUNT", "s3cr3t-not-a-number", "value refused", true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.Duration("idle", time.Minute, "")
		fs.Int("api-key-count", 0, "")
		opts := config.Options{Getenv: func(k string) string {
			if k == tc.env {
				return tc.value
			}
			return ""
		}, Secret: func(name string) bool { return name == "api-key-count" }}
		err := config.ApplyEnv(fs, opts)
		if !errors.Is(err, config.ErrInvalidValue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v; want ErrInvalidValue naming %s", tc.env, tc.value, err, tc.want)
		}
		if tc.secret && strings.Contains(err.Error(), tc.value) {
			t.Errorf("%s: the secret's value is shown: %v", tc.env, err)
		}
	}
}

// An old variable is read for its replacement only while the replacement
// is unset, and warned about whenever it is set.
func TestWithAliases(t *testing.T) {
	aliases := map[string]string{"OLD_CERTS": "NEW_CERT"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
		warn bool
	}{
		{"old only", map[string]string{"OLD_CERTS": "a"}, "a", true},
		{"new only", map[string]string{"NEW_CERT": "b"}, "b", false},
		{"both", map[string]string{"OLD_CERTS": "a", "NEW_CERT": "b"}, "b", true},
		{"neither", nil, "", false},
	} {
		getenv, warnings := config.WithAliases(func(k string) string { return tc.env[k] }, aliases)
		if got := getenv("NEW_CERT"); got != tc.want {
			t.Errorf("%s: NEW_CERT = %q, want %q", tc.name, got, tc.want)
		}
		if (len(warnings) == 1 && strings.Contains(warnings[0], "OLD_CERTS is deprecated: set NEW_CERT")) != tc.warn || (!tc.warn && len(warnings) > 0) {
			t.Errorf("%s: warnings %q, want one: %v", tc.name, warnings, tc.warn)
		}
	}
}

// Each flag is printed once, under its section, sections in order, with
// its built-in default even after the environment set it.
func TestPrintSections(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("listen", "127.0.0.1:8080", "address")
	fs.Duration("idle", time.Minute, "idle time")
	fs.String("hidden", "", "in no section")
	if err := fs.Set("listen", "0.0.0.0:1"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	config.PrintSections(&out, fs, []string{"Service", "Tuning"}, func(name string) string {
		return map[string]string{"listen": "Service", "idle": "Tuning"}[name]
	})
	got := out.String()
	s, l, tu, i := strings.Index(got, "\nService:\n"), strings.Index(got, "-listen"), strings.Index(got, "\nTuning:\n"), strings.Index(got, "-idle")
	if s < 0 || !(s < l && l < tu && tu < i) {
		t.Fatalf("want Service, -listen, Tuning, -idle in order:\n%s", got)
	}
	if !strings.Contains(got, `(default "127.0.0.1:8080")`) || strings.Contains(got, "hidden") {
		t.Errorf("want the built-in default and no unsectioned flag:\n%s", got)
	}
}
