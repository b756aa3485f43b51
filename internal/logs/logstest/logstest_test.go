package logstest_test

import (
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/logs/logstest"
)

func TestCheckKeys(t *testing.T) {
	for _, tc := range []struct {
		line string
		err  string // "" for none
	}{
		{line: `{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`},
		{line: `{"a":1,"a":2}`, err: `duplicate key "a"`},
		{line: `{"g":{"k":1,"k":2}}`, err: `duplicate key "g.k"`},
		{line: `{"c":[{"k":1,"k":2}]}`, err: `duplicate key "c.k"`},
		{line: `[1]`, err: "not a JSON object"},
		{line: `{"a":1}{}`, err: "trailing data"},
	} {
		err := logstest.CheckKeys([]byte(tc.line))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckKeys(%s) = %v, want %q", tc.line, err, tc.err)
		}
	}
}
