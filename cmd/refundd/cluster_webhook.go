package main

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/pgjournal"
)

// readWebhookEndpoints reads --webhooks-file (as startWebhooks does).
func (m *Main) readWebhookEndpoints() ([]webhook.Endpoint, error) {
	f, err := os.Open(m.Config.WebhooksFile)
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file: %w", err)
	}
	defer f.Close()
	getenv := m.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	eps, err := webhook.ParseEndpoints(f, getenv, os.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file %s: %w", m.Config.WebhooksFile, err)
	}
	return eps, nil
}

// startClusterWebhooks validates the endpoints, registers the leader gauge
// and starts campaigning (docs/CLUSTER.md, "Webhook dispatch"): an etcd
// election with etcd membership, a PostgreSQL advisory lock with
// automanaged membership. Close stops it (m.hooksStop) before the node and
// the journal close.
func (m *Main) startClusterWebhooks(node *cluster.Node, pg *pgjournal.DB, membership cluster.Membership, nodeID, httpAddr string) (*webhook.Leader, error) {
	eps, err := m.readWebhookEndpoints()
	if err != nil {
		return nil, err
	}
	log := m.log.With("component", "webhook")
	value := nodeID + " " + httpAddr
	var el webhook.Elector
	switch membership.(type) {
	case cluster.Etcd, *cluster.Etcd:
		el = node.Election("webhooks", value)
	default:
		cc := m.Config.Cluster
		el = &pgjournal.LockElector{DSN: cc.Journal, Key: pgjournal.AdvisoryKey("webhooks", cc.JournalSchema, cc.Name),
			Name: "webhook leader lock", Value: value, Logger: log}
	}
	w, err := webhook.NewLeader(webhook.Config{Endpoints: eps, Logger: log}, pg, el)
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file %s: %w", m.Config.WebhooksFile, err)
	}
	if err := m.metrics.Registry().Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "refundd", Name: "webhook_leader",
		Help: "1 while this node runs webhook dispatch (the cluster's webhook leader), else 0.",
	}, func() float64 {
		if w.Leading() {
			return 1
		}
		return 0
	})); err != nil {
		return nil, fmt.Errorf("webhook leader gauge: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.hooksStop, m.hooksDone = stop, done
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			log.Error("webhook dispatch: leader election stopped; this node will not dispatch", "err", err)
		}
	}()
	log.Info("webhook dispatch: campaigning for leadership", "endpoints", len(eps), "node", value)
	return w, nil
}
