// Package logstest captures what refundd logs, for tests: a logger built as
// the binaries build theirs (logs.New, JSON), and its lines parsed with
// duplicate keys refused, since encoding/json would silently keep the last.
package logstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/refundd/refundd/internal/logs"
)

// Recorder holds the lines a logger wrote. It is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer; slog handlers write one line per call.
func (r *Recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// String returns everything written so far.
func (r *Recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// New returns a debug-level JSON logger made by logs.New, writing to the
// returned Recorder.
func New(t testing.TB) (*slog.Logger, *Recorder) {
	t.Helper()
	r := &Recorder{}
	log, err := logs.New(r, logs.FormatJSON, "debug")
	if err != nil {
		t.Fatal(err)
	}
	return log, r
}

// Line is one parsed log line.
type Line map[string]any

// Str returns the string value of key, or "".
func (l Line) Str(key string) string {
	s, _ := l[key].(string)
	return s
}

// Lines parses every line written so far; a line that is not a JSON
// object, or that has a key twice at any level, fails the test.
func (r *Recorder) Lines(t testing.TB) []Line {
	t.Helper()
	lines, err := Parse(r.String())
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// Match returns the lines at level (e.g. "WARN") with message msg.
func (r *Recorder) Match(t testing.TB, level, msg string) []Line {
	t.Helper()
	var out []Line
	for _, l := range r.Lines(t) {
		if l.Str(slog.LevelKey) == level && l.Str(slog.MessageKey) == msg {
			out = append(out, l)
		}
	}
	return out
}

// Parse parses JSON log lines (empty lines are skipped), refusing a line
// that is not an object or has a duplicate key.
func Parse(raw string) ([]Line, error) {
	var out []Line
	for s := range strings.SplitSeq(raw, "\n") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		if err := CheckKeys([]byte(s)); err != nil {
			return nil, fmt.Errorf("log line %q: %w", s, err)
		}
		var l Line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			return nil, fmt.Errorf("log line %q: %w", s, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// CheckKeys returns an error if the JSON object line has a key twice in
// the same object, at any depth.
func CheckKeys(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not a JSON object")
	}
	if err := checkObject(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// checkObject reads an object's members after its '{' through its '}'.
func checkObject(dec *json.Decoder, path string) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("duplicate key %q", path+key)
		}
		seen[key] = true
		if err := checkValue(dec, path+key+"."); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func checkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return checkObject(dec, path)
	case json.Delim('['):
		for dec.More() {
			if err := checkValue(dec, path); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}
