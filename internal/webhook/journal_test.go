package webhook_test

import (
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// Both journals can carry webhook dispatch (single node and cluster mode).
var (
	_ webhook.Journal = (*journal.DB)(nil)
	_ webhook.Journal = (*pgjournal.DB)(nil)
)
