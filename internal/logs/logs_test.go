package logs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/logs"
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
