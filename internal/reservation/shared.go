package reservation

import (
	"errors"
	"time"
)

// The value types below are shared by the driver (actors) and the adapters
// it drives (the journal's store, the providers, metrics, tools): they live
// in the core so that adapters need not import the driver.

// RefundRequest is what a provider needs to build a refund submission
// (Env.Encode).
type RefundRequest struct {
	RefundNo      string
	OutTradeNo    string
	TransactionID string
	Amount        int64 // fen
	Total         int64 // the order's paid total, fen
	Currency      string
	Reason        string
}

// RefundRef names one refund.
type RefundRef struct {
	ReservationID string
	RefundNo      string
}

// Timer is one entry of the journaled due-time index.
type Timer struct {
	ReservationID string
	RefundNo      string
	DueAt         time.Time
}

// ErrVersionConflict is returned by a store when a stream was appended to
// by someone else since it was loaded.
var ErrVersionConflict = errors.New("actors: journal version conflict")
