package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
	"github.com/refundd/refundd/journal"
)

// providerFlags are the merchant's WeChat Pay credentials, or a sandbox's
// key directory.
type providerFlags struct {
	baseURL, mchID, serial, privateKey, publicKey, publicKeyID, sandboxKeys string
}

func (f *providerFlags) register(fs *flag.FlagSet, c *cli) {
	env := func(k string) string { return c.getenv("REFUNDD_WECHATPAY_" + k) }
	fs.StringVar(&f.baseURL, "wechatpay-base-url", env("BASE_URL"), "WeChat Pay API base URL, e.g. https://api.mch.weixin.qq.com (env REFUNDD_WECHATPAY_BASE_URL)")
	fs.StringVar(&f.mchID, "wechatpay-mchid", env("MCHID"), "merchant id (env REFUNDD_WECHATPAY_MCHID)")
	fs.StringVar(&f.serial, "wechatpay-serial", env("SERIAL"), "merchant API certificate serial (env REFUNDD_WECHATPAY_SERIAL)")
	fs.StringVar(&f.privateKey, "wechatpay-private-key", env("PRIVATE_KEY"), "merchant private key PEM file (env REFUNDD_WECHATPAY_PRIVATE_KEY)")
	fs.StringVar(&f.publicKey, "wechatpay-public-key", env("PUBLIC_KEY"), "WeChat Pay public key PEM file (env REFUNDD_WECHATPAY_PUBLIC_KEY)")
	fs.StringVar(&f.publicKeyID, "wechatpay-public-key-id", env("PUBLIC_KEY_ID"), "its id, PUB_KEY_ID_... (env REFUNDD_WECHATPAY_PUBLIC_KEY_ID)")
	fs.StringVar(&f.sandboxKeys, "sandbox-keys", "", "a sandbox key directory (wxpaysim's, or DATA/sandbox) instead of merchant credentials")
}

func (f *providerFlags) set() bool { return f.baseURL != "" || f.sandboxKeys != "" }

func (f *providerFlags) client() (*wechatpay.Client, error) {
	if f.sandboxKeys != "" {
		keys, err := sandbox.LoadKeys(f.sandboxKeys)
		if err != nil {
			return nil, err
		}
		base := f.baseURL
		if base == "" {
			var m sandbox.Manifest
			if b, err := os.ReadFile(filepath.Join(f.sandboxKeys, sandbox.ManifestFile)); err == nil {
				_ = json.Unmarshal(b, &m)
			}
			if base = m.BaseURL; base == "" {
				return nil, fmt.Errorf("--sandbox-keys %s names no base URL: give --wechatpay-base-url", f.sandboxKeys)
			}
		}
		v, err := keys.Verifier()
		if err != nil {
			return nil, err
		}
		return wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: base, MchID: keys.MchID, Signer: keys.Signer(), Verifier: v})
	}
	var missing []string
	for _, m := range []struct{ v, name string }{{f.baseURL, "--wechatpay-base-url"}, {f.mchID, "--wechatpay-mchid"},
		{f.serial, "--wechatpay-serial"}, {f.privateKey, "--wechatpay-private-key"}, {f.publicKey, "--wechatpay-public-key"},
		{f.publicKeyID, "--wechatpay-public-key-id"}} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return nil, errUsage("missing " + strings.Join(missing, ", "))
	}
	b, err := os.ReadFile(f.privateKey)
	if err != nil {
		return nil, err
	}
	key, err := wechatpay.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("--wechatpay-private-key: %w", err)
	}
	if b, err = os.ReadFile(f.publicKey); err != nil {
		return nil, err
	}
	pub, err := wechatpay.ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("--wechatpay-public-key: %w", err)
	}
	v := &wechatpay.Verifier{}
	if err := v.AddPublicKey(f.publicKeyID, pub); err != nil {
		return nil, err
	}
	return wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: f.baseURL, MchID: f.mchID,
		Signer: wechatpay.Signer{MchID: f.mchID, SerialNo: f.serial, Key: key}, Verifier: v})
}

// reconcileOutput is the --json shape of reconcile.
type reconcileOutput struct {
	OK       bool                  `json:"ok"`
	Mode     string                `json:"mode"` // bill or query
	Journal  string                `json:"journal"`
	Bill     *audit.BillReport     `json:"bill,omitempty"`
	Provider *audit.ProviderReport `json:"provider,omitempty"`
	Fixed    []fixResult           `json:"fixed,omitempty"`
	// NothingCompared: the range held no refund on either side, which
	// proves nothing (a wrong --from or --bill-date looks the same).
	NothingCompared bool `json:"nothing_compared,omitempty"`
}

type fixResult struct {
	RefundNo string `json:"refund_no"`
	Status   int    `json:"status"`
	Error    string `json:"error,omitempty"`
}

func reconcileCommand() command {
	return command{
		name:    "reconcile",
		summary: "compare the journal with WeChat Pay: a daily refund bill (--bill, --bill-date) or a query of every refund (--query)",
		help: `Bill mode (the daily reconciliation, 定时对账) reads WeChat Pay's REFUND
bill, from a file (--bill) or downloaded (--bill-date, with credentials),
and lists refunds the journal does not know (made in the merchant
platform, or lost in a restore), journal refunds submitted that day that
the bill lacks, and amount, order, refund id and status disagreements.
A bill is a snapshot: PROCESSING in the bill and SUCCEEDED in the journal
agree.

Query mode asks WeChat Pay about every refund requested in [--from, --to)
by its number and compares state, amount and order. With --fix (and
--server) it asks the running refundd to reconcile each refund that
disagrees and is not final (POST .../reconcile); the journal file is
never written by this tool.

--merchant compares only that merchant's refunds: a bill is one WeChat Pay
account's (and, in partner mode, one sub-merchant's), so reconcile each
merchant on its own.

Credentials: --wechatpay-* flags (or REFUNDD_WECHATPAY_* variables), or
--sandbox-keys DIR for a sandbox. Exit status 1 when anything disagrees,
4 when there was nothing to compare (no refund in the range on either
side: that is not agreement, and often a wrong range or date).`,
		options: func() options { return &reconcileOptions{} },
	}
}

// reconcileOptions are reconcile's flags.
type reconcileOptions struct {
	src      source
	prov     providerFlags
	billFile string
	billDate string
	saveBill string
	date     string
	slack    time.Duration
	prefix   string
	query    bool
	from     string
	to       string
	fix      bool
	asJSON   bool
	merch    string
	pace     float64
}

func (o *reconcileOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	o.prov.register(fs, c)
	fs.StringVar(&o.billFile, "bill", "", "a REFUND bill CSV file as downloaded from WeChat Pay")
	fs.StringVar(&o.billDate, "bill-date", "", "download the REFUND bill of this date (yyyy-MM-dd) with the credentials")
	fs.StringVar(&o.saveBill, "save-bill", "", "keep the downloaded bill in this file")
	fs.StringVar(&o.date, "date", "", "the bill's date, when its rows do not tell it")
	fs.DurationVar(&o.slack, "slack", 5*time.Minute, "refunds submitted this close to midnight may be in the neighbouring bill: noted, not mismatched")
	fs.StringVar(&o.prefix, "prefix", "", "refundd's --refund-prefix: tells lost refunds from ones made in the merchant platform")
	fs.BoolVar(&o.query, "query", false, "query every refund in the range instead of reading a bill")
	fs.Float64Var(&o.pace, "pace-queries", 50, "query mode: queries per second at most; WeChat Pay allows 300 per account, shared with refundd's (--wechatpay-pace-queries); 0: unpaced")
	fs.StringVar(&o.from, "from", "", "query mode: first request time included")
	fs.StringVar(&o.to, "to", "", "query mode: first request time excluded")
	fs.BoolVar(&o.fix, "fix", false, "query mode: ask the running refundd (--server) to reconcile refunds that disagree")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&o.merch, "merchant", "", merchantUsage)
}

func (o *reconcileOptions) run(c *cli, args []string) int {
	name := "reconcile"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	modes := 0
	for _, set := range []bool{o.billFile != "", o.billDate != "", o.query} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return c.usageError(name, "give exactly one of --bill, --bill-date and --query")
	}
	if o.fix && (!o.query || o.src.server == "") {
		return c.usageError(name, "--fix needs --query and --server")
	}
	if err := (merchant.Pacing{Queries: o.pace}).Validate(); err != nil {
		return c.usageError(name, "--pace-queries: %v", err)
	}
	if (o.billDate != "" || o.query) && !o.prov.set() {
		return c.usageError(name, "downloading a bill or querying needs credentials (--wechatpay-* or --sandbox-keys)")
	}
	var rng audit.ProviderOptions
	var err error
	if o.from != "" {
		if rng.From, err = parseTime(o.from); err != nil {
			return c.usageError(name, "--from: %v", err)
		}
	}
	if o.to != "" {
		if rng.To, err = parseTime(o.to); err != nil {
			return c.usageError(name, "--to: %v", err)
		}
	}
	var client *wechatpay.Client
	if o.prov.set() {
		if client, err = o.prov.client(); err != nil {
			if ue, ok := err.(usageErr); ok {
				return c.usageError(name, "%s", ue.msg)
			}
			return c.fail(name, err)
		}
	}

	db, done, code := c.openOrExit(name, &o.src)
	if db == nil {
		return code
	}
	defer done()
	out := reconcileOutput{Journal: db.Path()}
	// Only the refunds the comparison looks at are kept: the bill's and
	// the day's, or those requested in the range.
	keep := audit.RangeFacts(rng.From, rng.To)
	var bill *wechatpay.Bill
	if !o.query {
		out.Mode = "bill"
		var raw []byte
		if o.billFile != "" {
			raw, err = os.ReadFile(o.billFile)
		} else {
			raw, err = client.DownloadBill(c.ctx, wechatpay.BillRequest{Date: o.billDate, Type: wechatpay.BillTypeRefund})
			if err == nil && o.saveBill != "" {
				err = journal.WriteFileAtomic(o.saveBill, func(w io.Writer) error { _, err := w.Write(raw); return err })
			}
			if o.date == "" {
				o.date = o.billDate
			}
		}
		if err != nil {
			return c.fail(name, err)
		}
		if bill, err = wechatpay.ParseBill(raw); err != nil {
			return c.fail(name, err)
		}
		if keep, err = audit.BillFacts(bill, o.date); err != nil {
			return c.fail(name, err)
		}
	}
	if o.merch != "" {
		inRange := keep
		keep = func(f *audit.RefundFact) bool { return f.Merchant == o.merch && inRange(f) }
	}
	p := c.progress("records replayed")
	facts, undecoded, err := audit.RefundFacts(c.ctx, db, keep, p.report)
	p.done()
	if err != nil {
		return c.fail(name, err)
	}
	if undecoded > 0 {
		fmt.Fprintf(c.stderr, "refundctl %s: WARNING: %d records could not be decoded; run \"refundctl journal verify\"\n", name, undecoded)
	}

	if o.query {
		out.Mode = "query"
		qp := c.progress("refunds queried")
		rng.Progress = func(done, _ int) { qp.report(uint64(done)) }
		// Checked above: --pace-queries is valid.
		q, _ := merchant.PaceQueries(client, o.prov.mchID, o.pace, nil)
		rep, err := audit.ReconcileProvider(c.ctx, facts, q, rng)
		qp.done()
		if err != nil {
			return c.fail(name, err)
		}
		out.Provider, out.OK = rep, rep.OK()
		if o.fix {
			out.Fixed = c.fixRefunds(o.src.server, o.src.tokenOr(c), append(append([]audit.Mismatch{}, rep.Mismatches...), rep.Failed...))
		}
	} else {
		opts := audit.BillOptions{Date: o.date, Slack: o.slack, MchID: o.prov.mchID}
		if o.prefix != "" {
			epoch, err := db.Epoch(c.ctx)
			if err != nil {
				return c.fail(name, err)
			}
			if opts.Prefixes, err = audit.EpochPrefixes(o.prefix, epoch); err != nil {
				return c.usageError(name, "--prefix: %v", err)
			}
		}
		rep, err := audit.ReconcileBill(facts, bill, opts)
		if err != nil {
			return c.fail(name, err)
		}
		out.Bill, out.OK = rep, rep.OK()
		out.NothingCompared = rep.OK() && rep.BillRefunds == 0 && rep.JournalRefunds == 0
	}
	if out.Provider != nil {
		out.NothingCompared = out.Provider.Queried == 0
	}
	if o.asJSON {
		c.printJSON(out)
	} else {
		printReconcile(c, out)
	}
	switch {
	case !out.OK:
		return exitProblems
	case out.NothingCompared:
		return exitNothing
	}
	return exitOK
}

func printReconcile(c *cli, out reconcileOutput) {
	w := c.stdout
	var mism, notes, failed []audit.Mismatch
	if b := out.Bill; b != nil {
		fmt.Fprintf(w, "bill of %s: %d refunds (%s); journal: %d refunds submitted that day (%s); %d agree\n",
			b.Date, b.BillRefunds, audit.Yuan(b.BillTotal), b.JournalRefunds, audit.Yuan(b.JournalTotal), b.Matched)
		mism, notes = b.Mismatches, b.Notes
	}
	if p := out.Provider; p != nil {
		fmt.Fprintf(w, "queried %d refunds; %d agree\n", p.Queried, p.Matched)
		mism, notes, failed = p.Mismatches, p.Notes, p.Failed
	}
	for _, m := range mism {
		fmt.Fprintf(w, "MISMATCH %s\n", m)
	}
	for _, m := range failed {
		fmt.Fprintf(w, "FAILED   %s\n", m)
	}
	for _, m := range notes {
		fmt.Fprintf(w, "note     %s\n", m)
	}
	for _, f := range out.Fixed {
		if f.Error != "" {
			fmt.Fprintf(w, "fix      %s: %s\n", f.RefundNo, f.Error)
		} else {
			fmt.Fprintf(w, "fix      %s: reconcile requested (HTTP %d)\n", f.RefundNo, f.Status)
		}
	}
	if out.OK && out.NothingCompared {
		fmt.Fprintf(w, "NOTHING COMPARED: no refunds in the range on either side; check the range (exit status %d)\n", exitNothing)
	} else if out.OK {
		fmt.Fprintln(w, "OK: the journal and WeChat Pay agree")
	} else {
		fmt.Fprintf(w, "DISAGREE: %d mismatches, %d queries without an answer\n", len(mism), len(failed))
	}
}

// fixRefunds asks the running service to reconcile each refund that
// disagrees and is not final, through its API (never the file).
func (c *cli) fixRefunds(server, token string, ms []audit.Mismatch) []fixResult {
	var out []fixResult
	seen := map[string]bool{}
	for _, m := range ms {
		if m.Journal == nil || m.Journal.State.Terminal() || m.Journal.State == reservation.Rejected || seen[m.RefundNo] {
			continue
		}
		seen[m.RefundNo] = true
		u := strings.TrimRight(server, "/") + "/v1/reservations/" + url.PathEscape(m.ReservationID) + "/refunds/" + url.PathEscape(m.RefundNo) + "/reconcile"
		r := fixResult{RefundNo: m.RefundNo}
		req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, u, nil)
		if err == nil {
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			var resp *http.Response
			if resp, err = c.http.Do(req); err == nil {
				r.Status = resp.StatusCode
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					r.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
				}
			}
		}
		if err != nil {
			r.Error = err.Error()
		}
		out = append(out, r)
	}
	return out
}
