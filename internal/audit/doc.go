// Package audit answers auditors' and operators' questions from the journal
// alone: does the journal hold together (Verify: the journal's own checks,
// then every event decoded and replayed through the reservation state
// machine with its rules and invariants, then the indexes against the
// events), what happened to a reservation and when (Timeline), what its
// state was at a past moment (StateAt), what the journal holds in figures
// (Stats, Export), and whether it agrees with WeChat Pay (ReconcileBill
// against a daily refund bill, ReconcileProvider by querying every refund,
// ReconcileAfterRestore when refundd starts on a restored journal).
//
// Everything here reads; nothing writes the journal. The functions that
// take a *journal.DB expect a file nobody is writing (a backup, or a data
// directory opened with journal.Options.ReadOnly): several of them read in
// more than one transaction. The exception is ReconcileAfterRestore, which
// changes state only through the engine it is given, and BuildCounters,
// which stores the counters of a journal written before they were kept.
//
// Amounts are int64 fen; the views add a yuan string for people.
package audit
