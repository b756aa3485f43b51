package webhook_test

import (
	"refundd/internal/webhook"
	"refundd/journal"
	"refundd/journal/pgjournal"
)

// Both journals can carry webhook dispatch (single node and cluster mode).
var (
	_ webhook.Journal = (*journal.DB)(nil)
	_ webhook.Journal = (*pgjournal.DB)(nil)
)
