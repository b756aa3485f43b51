package webhook

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseEndpoints reads webhook endpoints from a configuration file, one per
// line, fields separated by spaces:
//
//	# name  url                              secret                       options
//	ledger  https://ledger.internal/refundd  env:LEDGER_WEBHOOK_SECRET    types=refund.succeeded,reservation.canceled
//	crm     https://crm.internal/hooks       file:/etc/refundd/crm.secret start=now
//	sh-erp  https://erp.sh.internal/refunds  env:SH_ERP_SECRET            merchants=hotel-sh,hotel-bj
//
// Blank lines and lines starting with # are ignored. The secret itself is
// never in the file: env:NAME reads it from the environment through getenv,
// file:PATH from a file through readFile (one trailing newline is dropped).
// Options: types=a,b (Endpoint.Types), merchants=a,b (Endpoint.Merchants)
// and start=now|beginning (Endpoint.FromNow). Each endpoint is checked as
// New checks it, except that merchant names are checked against the
// configured merchants by New (Config.Merchants); errors wrap ErrConfig and
// name the line.
func ParseEndpoints(r io.Reader, getenv func(string) string, readFile func(string) ([]byte, error)) ([]Endpoint, error) {
	var eps []Endpoint
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: line %d: %s", ErrConfig, n, fmt.Sprintf(format, args...))
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, bad("want: name url secret [types=...] [merchants=...] [start=now|beginning]")
		}
		e := Endpoint{Name: f[0], URL: f[1]}
		switch src, ref, _ := strings.Cut(f[2], ":"); {
		case src == "env" && ref != "":
			e.Secret = []byte(getenv(ref))
		case src == "file" && ref != "":
			b, err := readFile(ref)
			if err != nil {
				return nil, bad("secret of %s: %v", e.Name, err)
			}
			e.Secret = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
		default:
			return nil, bad("secret must be env:NAME or file:PATH, not written in the file")
		}
		for _, opt := range f[3:] {
			k, v, _ := strings.Cut(opt, "=")
			switch {
			case k == "types" && v != "":
				e.Types = strings.Split(v, ",")
			case k == "merchants" && v != "":
				e.Merchants = strings.Split(v, ",")
			case k == "start" && v == "now":
				e.FromNow = true
			case k == "start" && v == "beginning":
				e.FromNow = false
			default:
				return nil, bad("unknown option %q; want types=a,b, merchants=a,b or start=now|beginning", opt)
			}
		}
		if err := e.validate(); err != nil {
			return nil, bad("%v", err)
		}
		if prev, ok := seen[e.Name]; ok {
			return nil, bad("endpoint %q already defined on line %d", e.Name, prev)
		}
		seen[e.Name] = n
		eps = append(eps, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("webhook: read endpoints: %w", err)
	}
	return eps, nil
}
