package metrics

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/internal/wechatpay"
)

// Sources are read at every scrape. Method values of the engine, the API
// server's notification stats and the webhook dispatcher fit them; a nil
// field leaves its metrics out.
type Sources struct {
	// Active returns the number of live reservation actors
	// (actors.Engine.Active).
	Active func() int
	// Attention lists refunds needing attention of one kind after a cursor
	// (actors.Engine.Attention).
	Attention func(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error)
	// DueBefore lists due timers at or before a time (actors.Store.DueBefore).
	DueBefore func(ctx context.Context, t time.Time, limit int) ([]reservation.Timer, error)
	// NotificationsByMerchant returns notification counts by merchant,
	// then outcome; "" for ones attributed to no merchant. Names that are
	// not configured merchants are summed under "_other".
	NotificationsByMerchant func() map[string]map[string]int64
	// Webhooks returns each webhook endpoint's lag (webhook.Dispatcher.Lag).
	Webhooks func(ctx context.Context) ([]webhook.EndpointLag, error)
	// AccountKeys returns the keys each WeChat Pay account verifies
	// answers and notifications with, by mchid (wechatpay.Verifier.Keys):
	// the expiry of each platform certificate, and whether the account's
	// certificates are due for renewal.
	AccountKeys func() map[string][]wechatpay.KeyInfo
	// CertificateDownloads returns the platform certificate download state
	// of each account that downloads its certificates, by mchid
	// (from wechatpay.CertificateManager.Status).
	CertificateDownloads func() map[string]CertificateDownloads
	// Now is the clock for overdue timers; nil means time.Now.
	Now func() time.Time
}

// CertificateDownloads is one account's certificate download history.
type CertificateDownloads struct {
	Failures            int64     // failed downloads since start
	ConsecutiveFailures int64     // failed downloads since the last success
	LastSuccess         time.Time // zero: none since start
}

// Watch registers the metrics read from src at scrape time. It fails with
// ErrWatched if called again.
func (m *Metrics) Watch(src Sources) error {
	if !m.watched.CompareAndSwap(false, true) {
		return ErrWatched
	}
	if src.Now == nil {
		src.Now = time.Now
	}
	c := &sourceCollector{m: m, src: src}
	if src.Active != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace,
			Name: "actor_passivations_total", Help: "Reservation actors stopped (passivated, or at shutdown): activations minus live actors."},
			c.passivations))
	}
	return m.reg.Register(c)
}

var (
	descActive = prometheus.NewDesc(namespace+"_actors_active", "Live reservation actors.", nil, nil)
	descAttn   = prometheus.NewDesc(namespace+"_refunds_attention",
		"Refunds needing attention by kind (UNKNOWN, REJECTED, ABNORMAL, stuck), from the attention index; stuck is the reconciler's stuck count.",
		[]string{"kind"}, nil)
	descOverdue = prometheus.NewDesc(namespace+"_timers_overdue",
		"Journaled due times that are overdue by more than the configured margin: a scheduler that is not keeping up.", nil, nil)
	descNotify       = prometheus.NewDesc(namespace+"_notifications_total", "WeChat Pay refund notifications by merchant (configured ones, _other, or _none when not attributed) and outcome.", []string{"merchant", "outcome"}, nil)
	descHookBehind   = prometheus.NewDesc(namespace+"_webhook_events_behind", "Journal records after the endpoint's cursor.", []string{"endpoint"}, nil)
	descHookAge      = prometheus.NewDesc(namespace+"_webhook_oldest_undelivered_age_seconds", "Age of the oldest event not yet delivered to the endpoint.", []string{"endpoint"}, nil)
	descHookParked   = prometheus.NewDesc(namespace+"_webhook_parked", "Events parked after exhausting retries.", []string{"endpoint"}, nil)
	descHookDeliver  = prometheus.NewDesc(namespace+"_webhook_delivered_total", "Webhook deliveries that succeeded since start.", []string{"endpoint"}, nil)
	descHookFailures = prometheus.NewDesc(namespace+"_webhook_failed_attempts_total", "Webhook delivery attempts that failed since start.", []string{"endpoint"}, nil)
	descCertExpiry   = prometheus.NewDesc(namespace+"_wechatpay_certificate_expiry_timestamp_seconds",
		"NotAfter of each WeChat Pay certificate refundd verifies with, as Unix seconds, by serial and kind (platform). "+
			"A WeChat Pay public key (PUB_KEY_ID_...) does not expire and has no series.",
		[]string{"serial", "kind"}, nil)
	descCertExpiring = prometheus.NewDesc(namespace+"_wechatpay_certificate_expiring",
		"1 when the WeChat Pay account verifies with platform certificates only and the last of them expires within "+
			"the warning window (30 days unless configured), else 0; by mchid. Alert on 1: renew, or move to the WeChat Pay public key. "+
			"An account with a public key has 0 (the key does not expire); one with no certificate has no series.",
		[]string{"mchid"}, nil)
	descCertDLFailures = prometheus.NewDesc(namespace+"_wechatpay_certificate_download_failures_total",
		"Platform certificate downloads that failed since start, by mchid.", []string{"mchid"}, nil)
	descCertDLFailing = prometheus.NewDesc(namespace+"_wechatpay_certificate_download_consecutive_failures",
		"Platform certificate downloads that failed since the last success, by mchid: alert when it stays above zero "+
			"(the certificates held keep verifying, but a rotation by WeChat Pay will not be picked up).", []string{"mchid"}, nil)
	descCertDLSuccess = prometheus.NewDesc(namespace+"_wechatpay_certificate_download_last_success_timestamp_seconds",
		"Time of the last successful platform certificate download, as Unix seconds, by mchid; absent before the first.", []string{"mchid"}, nil)
)

// sourceCollector reads Sources at scrape time.
type sourceCollector struct {
	m   *Metrics
	src Sources
	// passMax keeps the derived passivation counter monotonic while an
	// activation is between joining the live set and loading.
	passMax atomic.Uint64
}

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descAttn, descOverdue, descNotify,
		descHookBehind, descHookAge, descHookParked, descHookDeliver, descHookFailures, descCertExpiry, descCertExpiring,
		descCertDLFailures, descCertDLFailing, descCertDLSuccess} {
		ch <- d
	}
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := c.m.scrapeContext()
	defer cancel()
	if c.src.Active != nil {
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(c.src.Active()))
	}
	if c.src.Attention != nil {
		for _, kind := range reservation.AttentionKinds {
			n, err := c.countAttention(ctx, kind)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(descAttn, fmt.Errorf("attention %s: %w", kind, err))
				break
			}
			ch <- prometheus.MustNewConstMetric(descAttn, prometheus.GaugeValue, float64(n), kind)
		}
	}
	if c.src.DueBefore != nil {
		timers, err := c.src.DueBefore(ctx, c.src.Now().Add(-c.m.opts.OverdueAfter), c.m.opts.AttentionCap)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descOverdue, fmt.Errorf("due timers: %w", err))
		} else {
			ch <- prometheus.MustNewConstMetric(descOverdue, prometheus.GaugeValue, float64(len(timers)))
		}
	}
	if counts := c.notifications(); counts != nil {
		keys := make([]notifyKey, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].merchant < keys[j].merchant || keys[i].merchant == keys[j].merchant && keys[i].outcome < keys[j].outcome
		})
		for _, k := range keys {
			ch <- prometheus.MustNewConstMetric(descNotify, prometheus.CounterValue, float64(counts[k]), k.merchant, k.outcome)
		}
	}
	if c.src.AccountKeys != nil {
		now := c.src.Now()
		for mchid, keys := range c.src.AccountKeys() {
			for _, k := range keys {
				if k.Certificate { // serials are WeChat Pay's, unique across accounts
					ch <- prometheus.MustNewConstMetric(descCertExpiry, prometheus.GaugeValue, float64(k.NotAfter.Unix()), k.Serial, "platform")
				}
			}
			due, certs := wechatpay.RenewalDue(keys, now, c.m.opts.CertificateWarning)
			if !certs {
				continue
			}
			expiring := 0.0
			if due {
				expiring = 1
			}
			ch <- prometheus.MustNewConstMetric(descCertExpiring, prometheus.GaugeValue, expiring, mchid)
		}
	}
	if c.src.CertificateDownloads != nil {
		for mchid, d := range c.src.CertificateDownloads() {
			ch <- prometheus.MustNewConstMetric(descCertDLFailures, prometheus.CounterValue, float64(d.Failures), mchid)
			ch <- prometheus.MustNewConstMetric(descCertDLFailing, prometheus.GaugeValue, float64(d.ConsecutiveFailures), mchid)
			if !d.LastSuccess.IsZero() {
				ch <- prometheus.MustNewConstMetric(descCertDLSuccess, prometheus.GaugeValue, float64(d.LastSuccess.Unix()), mchid)
			}
		}
	}
	if c.src.Webhooks != nil {
		lags, err := c.src.Webhooks(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descHookBehind, fmt.Errorf("webhook lag: %w", err))
			return
		}
		for _, l := range lags {
			ch <- prometheus.MustNewConstMetric(descHookBehind, prometheus.GaugeValue, float64(l.EventsBehind), l.Name)
			ch <- prometheus.MustNewConstMetric(descHookAge, prometheus.GaugeValue, l.OldestUndeliveredAge.Seconds(), l.Name)
			ch <- prometheus.MustNewConstMetric(descHookParked, prometheus.GaugeValue, float64(l.Parked), l.Name)
			ch <- prometheus.MustNewConstMetric(descHookDeliver, prometheus.CounterValue, float64(l.Delivered), l.Name)
			ch <- prometheus.MustNewConstMetric(descHookFailures, prometheus.CounterValue, float64(l.FailedAttempts), l.Name)
		}
	}
}

type notifyKey struct{ merchant, outcome string }

// notifications reads the notification counts, with merchant label values
// bounded: names that are not configured merchants are summed as other.
func (c *sourceCollector) notifications() map[notifyKey]int64 {
	out := map[notifyKey]int64{}
	switch {
	case c.src.NotificationsByMerchant != nil:
		for name, counts := range c.src.NotificationsByMerchant() {
			label := NoMerchant
			if name != "" {
				label = c.m.merchant(name)
			}
			for o, n := range counts {
				out[notifyKey{label, o}] += n
			}
		}
	default:
		return nil
	}
	return out
}

// countAttention counts one kind page by page, up to AttentionCap.
func (c *sourceCollector) countAttention(ctx context.Context, kind string) (int, error) {
	const page = 1000
	n, after := 0, ""
	for n < c.m.opts.AttentionCap {
		want := min(page, c.m.opts.AttentionCap-n)
		refs, err := c.src.Attention(ctx, kind, after, want)
		if err != nil {
			return n, err
		}
		n += len(refs)
		if len(refs) < want {
			break
		}
		last := refs[len(refs)-1]
		after = last.ReservationID + "/" + last.RefundNo
	}
	return n, nil
}

// passivations is activations minus live actors, never going down.
func (c *sourceCollector) passivations() float64 {
	act := c.m.activations.Load()
	live := uint64(max(c.src.Active(), 0))
	var v uint64
	if act > live {
		v = act - live
	}
	for {
		old := c.passMax.Load()
		if v <= old {
			return float64(old)
		}
		if c.passMax.CompareAndSwap(old, v) {
			return float64(v)
		}
	}
}
