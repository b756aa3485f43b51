// Package examples holds no code: its tests check the example files
// against the service they configure and observe.
package examples

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/config"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/internal/wechatpay"
)

// prometheusOwn are series Prometheus makes itself for every target.
var prometheusOwn = map[string]bool{"up": true}

// exported returns every series name refundd's registry serves: each
// instrument is used once so that the vectors have a child, then the
// registry is gathered. Histograms add their _bucket, _sum and _count.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New(metrics.Options{}) // with the Go runtime and process collectors, as cmd/refundd has them
	m.ObserveRequest("GET", "/v1/reservations/{id}", 200, time.Millisecond)
	m.ObserveCommit(1, time.Millisecond, time.Millisecond, nil)
	m.ObserveCommit(0, 0, 0, errors.New("disk full"))
	m.ObserveRateLimited("notify", "")
	st := m.Store(fakeStore{})
	ctx := context.Background()
	if _, _, err := st.Load(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, "r1", nil, []reservation.Event{{Data: reservation.RefundRequested{RefundNo: "R-r1-1", Amount: 1}}}); err != nil {
		t.Fatal(err)
	}
	p := m.Provider(fakeProvider{})
	p.Submit(ctx, "R-r1-1", nil, 1)
	p.Query(ctx, "R-r1-1")
	err := m.Watch(metrics.Sources{
		Active: func() int { return 1 },
		Attention: func(context.Context, string, string, int) ([]reservation.RefundRef, error) {
			return nil, nil
		},
		DueBefore: func(context.Context, time.Time, int) ([]reservation.Timer, error) { return nil, nil },
		NotificationsByMerchant: func() map[string]map[string]int64 {
			return map[string]map[string]int64{"": {"applied": 1}}
		},
		Webhooks: func(context.Context) ([]webhook.EndpointLag, error) {
			return []webhook.EndpointLag{{Name: "orders"}}, nil
		},
		// One configured platform certificate: without one the expiry
		// gauges have no series.
		AccountKeys: func() map[string][]wechatpay.KeyInfo {
			return map[string][]wechatpay.KeyInfo{"1900000100": {{Serial: "5157F09E", Certificate: true, NotAfter: time.Unix(1940587200, 0)}}}
		},
		CertificateDownloads: func() map[string]metrics.CertificateDownloads {
			return map[string]metrics.CertificateDownloads{"1900000100": {}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		out[name] = true
		// The type's name, not its constant: this module does not require
		// the client_model package directly.
		switch f.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case "SUMMARY":
			out[name+"_sum"], out[name+"_count"] = true, true
		}
	}
	// The instruments the examples rely on most must be there, or the
	// exercise above has gone stale.
	for _, want := range []string{"refundd_refunds_attention", "refundd_webhook_parked", "refundd_journal_commit_duration_seconds_bucket",
		"refundd_notifications_total", "refundd_provider_calls_total", "process_resident_memory_bytes",
		"refundd_wechatpay_certificate_expiry_timestamp_seconds", "refundd_wechatpay_certificate_expiring"} {
		if !out[want] {
			t.Fatalf("the registry does not serve %s; exported: %v", want, keys(out))
		}
	}
	return out
}

type fakeStore struct{ metrics.Store }

func (fakeStore) Load(context.Context, string) ([]reservation.Event, uint64, error) {
	return nil, 0, nil
}
func (fakeStore) Append(context.Context, string, *reservation.State, []reservation.Event) error {
	return nil
}

type fakeProvider struct{}

func (fakeProvider) Submit(context.Context, string, []byte, int) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeProcessing}
}
func (fakeProvider) Query(context.Context, string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeSucceeded}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promBraces   = regexp.MustCompile(`\{[^{}]*\}`)
	promBrackets = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promVars     = regexp.MustCompile(`\$\{?\w+\}?`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames returns the metric names a PromQL expression selects: what
// is left once strings, label matchers, ranges, grouping labels and
// Grafana's variables are taken out, less function names and keywords.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promBraces.ReplaceAllString(e, " ")
	e = promBrackets.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = promVars.ReplaceAllString(e, " ")
	var out []string
	for _, m := range promIdent.FindAllStringSubmatchIndex(e, -1) {
		if m[2] >= 0 { // followed by "(": a function
			continue
		}
		word := e[m[0]:m[1]]
		if promKeywords[strings.ToLower(word)] {
			continue
		}
		if m[0] > 0 && (e[m[0]-1] >= '0' && e[m[0]-1] <= '9' || e[m[0]-1] == '.') {
			continue // the exponent of a number such as 1e3
		}
		out = append(out, word)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up{job="refundd"} == 0`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (instance, le) (rate(refundd_journal_commit_duration_seconds_bucket[5m]))) > 0.25`,
			[]string{"refundd_journal_commit_duration_seconds_bucket"}},
		{`sum(rate(a_sum{x=~"$instance"}[$__rate_interval])) / sum(rate(a_count[1m])) and on (instance) b`, []string{"a_sum", "a_count", "b"}},
		{`label_values(refundd_actors_active, instance)`, []string{"refundd_actors_active", "instance"}},
		{`count(x{a="b{c}"}) > 1e3`, []string{"x"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// checkExprs fails the test for an expression that names no metric or one
// refundd does not export.
func checkExprs(t *testing.T, where string, exprs []string) {
	t.Helper()
	have := exported(t)
	if len(exprs) == 0 {
		t.Fatalf("%s: no expressions found", where)
	}
	for _, expr := range exprs {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !have[n] && !prometheusOwn[n] {
				t.Errorf("%s: %q names %s, which refundd does not export", where, expr, n)
			}
		}
		// The attention kinds are a closed set: a misspelt one matches
		// nothing and never fires.
		for _, m := range attentionKind.FindAllStringSubmatch(expr, -1) {
			for k := range strings.SplitSeq(m[1], "|") {
				if !slices.Contains(reservation.AttentionKinds, k) {
					t.Errorf("%s: %q selects kind %q; refundd_refunds_attention has %v", where, expr, k, reservation.AttentionKinds)
				}
			}
		}
	}
}

var attentionKind = regexp.MustCompile(`refundd_refunds_attention\{[^}]*\bkind=~?"([^"]*)"`)

// Every query of the Grafana dashboard (panel targets and template
// variables) names metrics refundd exports.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/refundd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatal(err)
		}
		// label_values(metric, label): the label is not a metric.
		if inner, ok := strings.CutPrefix(q.Query, "label_values("); ok {
			q.Query, _, _ = strings.Cut(inner, ",")
		}
		exprs = append(exprs, q.Query)
	}
	checkExprs(t, "grafana/refundd.json", exprs)
}

// Every alert rule names metrics refundd exports (promtool, in
// scripts/test, checks the file's syntax and PromQL).
func TestAlertsNameExportedMetrics(t *testing.T) {
	f, err := os.Open("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var exprs []string
	alerts := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "- alert:") {
			alerts++
		}
		if e, ok := strings.CutPrefix(line, "expr:"); ok {
			exprs = append(exprs, strings.TrimSpace(e))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if alerts != len(exprs) {
		t.Fatalf("%d alerts, %d one-line exprs: keep each expr on its line so this test reads it", alerts, len(exprs))
	}
	checkExprs(t, "prometheus/alerts.yml", exprs)
}

// The tokens, webhooks and configuration files parse as refundd parses
// them, and the tokens file's comment tells the truth about its tokens.
func TestExampleFilesParse(t *testing.T) {
	f, err := os.Open("tokens")
	if err != nil {
		t.Fatal(err)
	}
	var tokens auth.Tokens
	err = auth.ParseFile(f, &tokens)
	f.Close()
	if err != nil {
		t.Fatalf("tokens: %v", err)
	}
	for token, want := range map[string]string{"example-service-token-0001": "service:booking",
		"example-reader-token-0001": "reader:prometheus", "example-operator-token-0001": "operator:oncall",
		"example-approver-token-0001": "approver:finance"} {
		if p, ok := tokens.Authenticate(token); !ok || p.String() != want {
			t.Errorf("token %s authenticates as %v %v, want %s", token, p, ok, want)
		}
	}

	f, err = os.Open("webhooks")
	if err != nil {
		t.Fatal(err)
	}
	eps, err := webhook.ParseEndpoints(f, func(string) string { return "whsec_0123456789abcdef" },
		func(string) ([]byte, error) { return []byte("whsec_fedcba9876543210\n"), nil })
	f.Close()
	if err != nil || len(eps) != 2 || !eps[1].FromNow || len(eps[1].Types) != 3 {
		t.Fatalf("webhooks: %+v %v", eps, err)
	}

	f, err = os.Open("refundd.conf")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := config.Parse(f)
	f.Close()
	if err != nil || len(entries) == 0 {
		t.Fatalf("refundd.conf: %d entries, %v", len(entries), err)
	}
}

// TestMerchantsRoundTrip: merchants.toml is the shape issue 19 asks for
// (two direct merchants, a service provider with two sub-merchants), and
// what refundd reads from it encodes to a file that reads back the same.
func TestMerchantsRoundTrip(t *testing.T) {
	r, err := merchant.ReadFile("merchants.toml", os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[merchant.MerchantKind]int{}
	for _, m := range r.Merchants() {
		kinds[m.Kind]++
	}
	sp, ok := r.Account("booking-platform")
	if len(r.Accounts()) != 3 || kinds[merchant.MerchantDirect] != 2 || kinds[merchant.MerchantSub] != 2 || !ok ||
		sp.Kind != merchant.AccountServiceProvider {
		t.Fatalf("accounts %d, merchants by kind %v", len(r.Accounts()), kinds)
	}
	for _, m := range r.Merchants() {
		if m.Kind == merchant.MerchantSub && m.Account != sp {
			t.Errorf("%s: account %s, want the service provider", m.Name, m.Account.Name)
		}
	}
	out, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := merchant.Parse(out, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out2, err := r2.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(out2) {
		t.Errorf("not stable:\n%s\n---\n%s", out, out2)
	}
	for _, m := range r.Merchants() {
		m2, ok := r2.ByName(m.Name)
		if !ok || m2.Kind != m.Kind || m2.Account.Name != m.Account.Name || m2.SubMchID != m.SubMchID ||
			m2.SubAppID != m.SubAppID || m2.RefundNoPrefix != m.RefundNoPrefix || m2.NotifyURL != m.NotifyURL ||
			!reflect.DeepEqual(m2.Overrides, m.Overrides) {
			t.Errorf("%s: %+v after the round trip, was %+v", m.Name, m2, m)
		}
	}
	for _, a := range r.Accounts() {
		a2, ok := r2.Account(a.Name)
		if !ok || a2.Kind != a.Kind || a2.MchID != a.MchID || a2.BaseURL != a.BaseURL || a2.Serial != a.Serial ||
			a2.PrivateKey != a.PrivateKey || a2.APIv3Key != a.APIv3Key || a2.APIv2Key != a.APIv2Key ||
			a2.PublicKeyID != a.PublicKeyID || a2.PublicKeyFile != a.PublicKeyFile || !slices.Equal(a2.PlatformCertFiles, a.PlatformCertFiles) {
			t.Errorf("account %s: %+v after the round trip, was %+v", a.Name, a2, a)
		}
	}
}
