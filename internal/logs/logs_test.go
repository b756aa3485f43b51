package logs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/logs"
	"github.com/refundd/refundd/internal/logs/logstest"
)

func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestHandler_RequestIDFromContext(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(logs.NewHandler(slog.NewJSONHandler(&buf, nil))).With("component", "api")
	ctx := logs.WithRequestID(context.Background(), "req-1")
	log.InfoContext(ctx, "served", "status", 200)
	log.Info("no request")
	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d", len(lines))
	}
	if lines[0]["request_id"] != "req-1" || lines[0]["component"] != "api" || lines[0]["status"] != float64(200) {
		t.Fatalf("first line: %v", lines[0])
	}
	if _, ok := lines[1]["request_id"]; ok {
		t.Fatalf("a line without a request context got a request id: %v", lines[1])
	}
}

func TestHandler_MasksSecrets(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(logs.NewHandler(slog.NewJSONHandler(&buf, nil)))
	log.With("api_token", "tok-with").Info("x",
		"Authorization", "Bearer abc", "apiv3_key", "k3", "tokens_file", "/etc/refundd/tokens",
		slog.Group("merchant", "password", "pw", "mchid", "1900"))
	out := buf.String()
	for _, secret := range []string{"tok-with", "Bearer abc", "k3", `"pw"`} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q logged: %s", secret, out)
		}
	}
	for _, kept := range []string{"/etc/refundd/tokens", `"1900"`, logs.Masked} {
		if !strings.Contains(out, kept) {
			t.Fatalf("%q missing: %s", kept, out)
		}
	}
}

func TestNewHandler_Idempotent(t *testing.T) {
	var buf bytes.Buffer
	h := logs.NewHandler(slog.NewJSONHandler(&buf, nil))
	if logs.NewHandler(h) != h {
		t.Fatal("wrapping twice must not add a second layer")
	}
	slog.New(logs.NewHandler(h)).InfoContext(logs.WithRequestID(context.Background(), "r"), "once")
	if n := strings.Count(buf.String(), "request_id"); n != 1 {
		t.Fatalf("request_id %d times: %s", n, buf.String())
	}
}

func TestNew_Formats(t *testing.T) {
	for _, tc := range []struct {
		format, level string
		json          bool
		err           bool
	}{
		{format: "auto", level: "info", json: true}, // a buffer is not a terminal
		{format: "", level: "debug", json: true},
		{format: "json", level: "warn", json: true},
		{format: "text", level: "info"},
		{format: "xml", level: "info", err: true},
		{format: "json", level: "loud", err: true},
	} {
		var buf bytes.Buffer
		log, err := logs.New(&buf, tc.format, tc.level)
		if (err != nil) != tc.err {
			t.Fatalf("%+v: err %v", tc, err)
		}
		if err != nil {
			continue
		}
		log.Error("hello")
		if got := strings.HasPrefix(buf.String(), "{"); got != tc.json {
			t.Fatalf("%+v: JSON %v: %q", tc, got, buf.String())
		}
	}
}

func TestIsTerminal_NotForFilesAndBuffers(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if logs.IsTerminal(f) || logs.IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a regular file or a buffer is not a terminal")
	}
}

func TestSecretKey(t *testing.T) {
	for name, want := range map[string]bool{
		"token": true, "api_token": true, "REFUNDD_WECHATPAY_APIV3_KEY": true, "password": true,
		"client-secret": true, "tokens-file": false, "wechatpay-apiv3-key-file": false, "listen": false,
		"refund_no": false, "reservation": false,
	} {
		if got := logs.SecretKey(name); got != want {
			t.Errorf("SecretKey(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestHandler_NoDuplicateKeys(t *testing.T) {
	ctx := logs.WithRequestID(context.Background(), "req-1")
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
		want map[string]any // the first value given for a key wins
	}{
		{name: "two layers name the component", log: func(l *slog.Logger) {
			l.With("component", "sandbox").With("component", "wxpay-sandbox").Info("x")
		}, want: map[string]any{"component": "sandbox"}},
		{name: "record repeats a With key", log: func(l *slog.Logger) {
			l.With("reservation", "r1").Info("x", "reservation", "r2")
		}, want: map[string]any{"reservation": "r1"}},
		{name: "record repeats its own key", log: func(l *slog.Logger) { l.Info("x", "k", 1, "k", 2) },
			want: map[string]any{"k": float64(1)}},
		{name: "request id given and in the context", log: func(l *slog.Logger) {
			l.InfoContext(ctx, "x", "request_id", "explicit")
		}, want: map[string]any{"request_id": "explicit"}},
		{name: "request id in With and in the context", log: func(l *slog.Logger) {
			l.With("request_id", "with").InfoContext(ctx, "x")
		}, want: map[string]any{"request_id": "with"}},
		{name: "a group keeps its own names", log: func(l *slog.Logger) {
			l.With("k", 1).WithGroup("g").Info("x", "k", 2)
		}, want: map[string]any{"k": float64(1), "g": map[string]any{"k": float64(2)}}},
		{name: "an attribute named like slog's own keys", log: func(l *slog.Logger) { l.Info("x", "msg", "other", "level", 3) },
			want: map[string]any{"msg": "x", "level": "INFO"}},
		{name: "an inline group's members count", log: func(l *slog.Logger) {
			l.Info("x", "k", 1, slog.Group("", "k", 2, "j", 3))
		}, want: map[string]any{"k": float64(1), "j": float64(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, rec := logstest.New(t)
			tc.log(log)
			lines := rec.Lines(t) // fails on a duplicate key
			if len(lines) != 1 {
				t.Fatalf("want 1 line, got %d", len(lines))
			}
			for k, v := range tc.want {
				if got := lines[0][k]; !reflect.DeepEqual(got, v) {
					t.Errorf("%s = %v, want %v (line %v)", k, got, v, lines[0])
				}
			}
		})
	}
}

func TestHandler_DurationsAsStrings(t *testing.T) {
	for _, format := range []string{logs.FormatJSON, logs.FormatText} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := logs.New(&buf, format, "info")
			if err != nil {
				t.Fatal(err)
			}
			log.With("timeout", 2*time.Second).Info("x", "took", 1500*time.Millisecond,
				slog.Group("g", "wait", 250*time.Microsecond), slog.Any("any", time.Minute))
			out := buf.String()
			for _, want := range []string{"2s", "1.5s", "250µs", "1m0s"} {
				if !strings.Contains(out, want) {
					t.Errorf("%q missing: %s", want, out)
				}
			}
			if strings.Contains(out, "1500000000") {
				t.Errorf("a duration logged as integer nanoseconds: %s", out)
			}
		})
	}
}
