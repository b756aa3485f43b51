// Package crashpoint lets crash tests kill refundd at a chosen line.
//
// Hit(name) does nothing in a normal build. Built with the crashpoints tag,
// it kills the process with SIGKILL when REFUNDD_CRASH_AT names the point,
// so tests can prove that a crash between two steps loses nothing:
//
//	go build -tags crashpoints -o refundd ./cmd/refundd
//	REFUNDD_CRASH_AT=after-submit-journaled ./refundd ...
package crashpoint

import "github.com/refundd/refundd/journal"

// The crash points in refundd.
const (
	// AfterSubmitJournaled: a refund request (and its submission) is
	// journaled, the provider has not been called.
	AfterSubmitJournaled = "after-submit-journaled"
	// AfterProviderAnswered: the provider answered a submission, the answer
	// is not journaled yet.
	AfterProviderAnswered = "after-provider-answered"
	// AfterNotificationJournaled: a notification's outcome is journaled,
	// WeChat has not been acknowledged.
	AfterNotificationJournaled = "after-notification-journaled"
	// AfterApprovalJournaled: an approval (and the first submission it
	// starts) is journaled, nothing is applied, answered or sent yet.
	AfterApprovalJournaled = "after-approval-journaled"
	// AfterAbnormalJournaled: an abnormal refund's payout is journaled,
	// WeChat Pay has not been asked to pay it.
	AfterAbnormalJournaled = "after-abnormal-journaled"
	// The steps of an archival (journal.ArchiveStreams, docs/AUDIT.md
	// "Crash safety"): the segment is durable; its manifest is; the new
	// hot generation is written beside the old one; it replaced the old.
	// The journal names them (it imports no project package); refundctl
	// passes Hit as journal.ArchivePlan.AfterStep.
	ArchiveSegmentWritten    = journal.ArchiveStepSegment
	ArchiveManifestWritten   = journal.ArchiveStepManifest
	ArchiveGenerationWritten = journal.ArchiveStepGeneration
	ArchiveSwapped           = journal.ArchiveStepSwapped
)
