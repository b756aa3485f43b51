package pgrefund

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema is the seeds' tables, with the running totals the seed asks for
// once partial refunds are allowed ("atomically check that the cumulative
// refund does not exceed what is refundable") and its unique keys.
const Schema = `
CREATE TABLE IF NOT EXISTS reservation (
    id             text PRIMARY KEY,
    user_id        text NOT NULL,
    out_trade_no   text NOT NULL,
    transaction_id text NOT NULL DEFAULT '',
    amount         bigint NOT NULL CHECK (amount > 0),
    currency       text NOT NULL,
    status         text NOT NULL DEFAULT 'ACCEPTED',
    refunded       bigint NOT NULL DEFAULT 0,
    in_flight      bigint NOT NULL DEFAULT 0,
    refund_count   integer NOT NULL DEFAULT 0,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uk_reservation_out_trade_no UNIQUE (out_trade_no),
    CONSTRAINT ck_reservation_refundable CHECK (refunded >= 0 AND in_flight >= 0 AND refunded + in_flight <= amount)
);
CREATE TABLE IF NOT EXISTS reservation_refund (
    id                 bigserial PRIMARY KEY,
    reservation_id     text NOT NULL,
    refund_no          text NOT NULL,
    idempotency_key    text NOT NULL,
    user_id            text NOT NULL,
    amount             bigint NOT NULL CHECK (amount > 0),
    reason             text NOT NULL DEFAULT '',
    status             text NOT NULL,
    provider_refund_id text,
    last_error         text,
    attempts           integer NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    succeeded_at       timestamptz,
    CONSTRAINT uk_refund_no UNIQUE (refund_no),
    CONSTRAINT uk_refund_idempotency UNIQUE (reservation_id, idempotency_key)
);
CREATE TABLE IF NOT EXISTS refund_notify_record (
    id             bigserial PRIMARY KEY,
    out_refund_no  text NOT NULL,
    refund_status  text NOT NULL,
    notify_content text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uk_notify_refund_status UNIQUE (out_refund_no, refund_status)
);
`

// dropSchema removes the tables, for a fresh run.
const dropSchema = `DROP TABLE IF EXISTS refund_notify_record, reservation_refund, reservation`

// maxRefunds is refundd's default cap on refunds per reservation (WeChat
// Pay's limit on partial refunds of one order); the claim statements spell
// it out as 50.
const maxRefunds = 50

// Refund states, as refundd names them.
const (
	StateProcessing = "PROCESSING"
	StateSucceeded  = "SUCCEEDED"
	StateFailed     = "FAILED"
	StateUnknown    = "UNKNOWN"
	StateAbnormal   = "ABNORMAL"
)

// Reservation is a reservation row with its refunds.
type Reservation struct {
	ID, UserID, OutTradeNo, TransactionID, Currency, Status string
	Amount, Refunded, InFlight                              int64
	RegisteredAt                                            time.Time
	Refunds                                                 []Refund
}

// Refund is a reservation_refund row.
type Refund struct {
	ReservationID, RefundNo, IdempotencyKey, UserID, Reason, Status string
	Amount                                                          int64
	ProviderRefundID                                                string
	Attempts                                                        int
	CreatedAt, UpdatedAt                                            time.Time
	SucceededAt                                                     *time.Time
}

// Terminal reports whether the refund can no longer change.
func (r Refund) Terminal() bool { return r.Status == StateSucceeded || r.Status == StateFailed }

// Store runs the seeds' statements on a connection pool.
type Store struct {
	pool *pgxpool.Pool
}

// OpenStore connects with at most pool connections (0 means pgxpool's
// default, max(4, CPUs)).
func OpenStore(ctx context.Context, dsn string, pool int) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgrefund: dsn: %w", err)
	}
	if pool > 0 {
		cfg.MaxConns = int32(pool)
		cfg.MinConns = int32(pool) // connected and prepared before the first request
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgrefund: connect: %w", err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("pgrefund: connect: %w", err)
	}
	return &Store{pool: p}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Migrate creates the tables, dropping them first when reset is set.
func (s *Store) Migrate(ctx context.Context, reset bool) error {
	if reset {
		if _, err := s.pool.Exec(ctx, dropSchema); err != nil {
			return fmt.Errorf("pgrefund: drop schema: %w", err)
		}
	}
	if _, err := s.pool.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("pgrefund: create schema: %w", err)
	}
	return nil
}

func isUnique(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && (constraint == "" || pe.ConstraintName == constraint)
}

// Register inserts a reservation. A repeat with the same fields is a
// replay (created false); different fields fail with ErrConflict, and an
// order number owned by another reservation with ErrOutTradeNoTaken.
func (s *Store) Register(ctx context.Context, r Reservation) (Reservation, bool, error) {
	const insert = `INSERT INTO reservation (id, user_id, out_trade_no, transaction_id, amount, currency)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING registered_at`
	err := s.pool.QueryRow(ctx, insert, r.ID, r.UserID, r.OutTradeNo, r.TransactionID, r.Amount, r.Currency).Scan(&r.RegisteredAt)
	if err == nil {
		r.Status = "ACCEPTED"
		return r, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return r, false, fmt.Errorf("pgrefund: register %s: %w", r.ID, err)
	}
	old, err := s.Get(ctx, r.ID)
	if errors.Is(err, ErrNotFound) {
		return r, false, ErrOutTradeNoTaken
	}
	if err != nil {
		return r, false, err
	}
	if old.UserID != r.UserID || old.OutTradeNo != r.OutTradeNo || old.TransactionID != r.TransactionID ||
		old.Amount != r.Amount || old.Currency != r.Currency {
		return old, false, ErrConflict
	}
	return old, false, nil
}

// claimStmt is the seeds' claim for a partial refund: one conditional
// UPDATE of the reservation's totals and the refund's INSERT, in one
// statement. No row means the UPDATE matched nothing; a unique violation
// on uk_refund_idempotency means the key was used (the UPDATE is rolled
// back with it).
const claimStmt = `WITH c AS (
    UPDATE reservation
       SET in_flight = in_flight + $3, refund_count = refund_count + 1
     WHERE id = $1 AND user_id = $2 AND status = 'ACCEPTED'
       AND refunded + in_flight + $3 <= amount AND refund_count < 50
 RETURNING id, refund_count, out_trade_no, transaction_id, amount, currency),
i AS (
    INSERT INTO reservation_refund (reservation_id, refund_no, idempotency_key, user_id, amount, reason, status)
    SELECT c.id, $5 || '-' || c.id || '-' || c.refund_count, $4, $2, $3, $6, 'PROCESSING' FROM c
 RETURNING reservation_id, refund_no, created_at, amount)
SELECT i.refund_no, i.created_at, i.amount, c.out_trade_no, c.transaction_id, c.amount, c.currency
  FROM i JOIN c ON c.id = i.reservation_id`

// claimAllStmt claims everything still refundable (amount omitted).
const claimAllStmt = `WITH cur AS (
    SELECT id, amount - refunded - in_flight AS rest FROM reservation WHERE id = $1 FOR UPDATE),
c AS (
    UPDATE reservation r
       SET in_flight = r.in_flight + cur.rest, refund_count = r.refund_count + 1
      FROM cur
     WHERE r.id = cur.id AND r.user_id = $2 AND r.status = 'ACCEPTED' AND cur.rest > 0 AND r.refund_count < 50
 RETURNING r.id, r.refund_count, cur.rest, r.out_trade_no, r.transaction_id, r.amount, r.currency),
i AS (
    INSERT INTO reservation_refund (reservation_id, refund_no, idempotency_key, user_id, amount, reason, status)
    SELECT c.id, $4 || '-' || c.id || '-' || c.refund_count, $3, $2, c.rest, $5, 'PROCESSING' FROM c
 RETURNING reservation_id, refund_no, created_at, amount)
SELECT i.refund_no, i.created_at, i.amount, c.out_trade_no, c.transaction_id, c.amount, c.currency
  FROM i JOIN c ON c.id = i.reservation_id`

// Order is what a provider submission needs to know about the
// reservation a refund was claimed on.
type Order struct {
	OutTradeNo, TransactionID, Currency string
	Total                               int64
}

// Claim takes an amount for a new refund (amount nil: everything left).
// A repeat of the same key with the same request returns the existing
// refund with created false; with another request, ErrIdempotencyKeyReused.
// The Order is filled only for a created refund.
func (s *Store) Claim(ctx context.Context, id, userID, key string, amount *int64, reason, prefix string) (Refund, Order, bool, error) {
	ref := Refund{ReservationID: id, IdempotencyKey: key, UserID: userID, Reason: reason, Status: StateProcessing}
	var o Order
	var row pgx.Row
	if amount != nil {
		row = s.pool.QueryRow(ctx, claimStmt, id, userID, *amount, key, prefix, reason)
	} else {
		row = s.pool.QueryRow(ctx, claimAllStmt, id, userID, key, prefix, reason)
	}
	err := row.Scan(&ref.RefundNo, &ref.CreatedAt, &ref.Amount, &o.OutTradeNo, &o.TransactionID, &o.Total, &o.Currency)
	switch {
	case err == nil:
		ref.UpdatedAt = ref.CreatedAt
		return ref, o, true, nil
	case errors.Is(err, pgx.ErrNoRows), isUnique(err, "uk_refund_idempotency"):
		ref, created, err := s.whyNotClaimed(ctx, id, userID, key, amount, reason)
		return ref, o, created, err
	}
	return ref, o, false, fmt.Errorf("pgrefund: claim on %s: %w", id, err)
}

// whyNotClaimed turns a claim that wrote nothing into a replay or a
// domain error.
func (s *Store) whyNotClaimed(ctx context.Context, id, userID, key string, amount *int64, reason string) (Refund, bool, error) {
	if old, err := s.RefundByKey(ctx, id, key); err == nil {
		if old.UserID != userID || old.Reason != reason || (amount != nil && old.Amount != *amount) {
			return old, false, ErrIdempotencyKeyReused
		}
		return old, false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Refund{}, false, err
	}
	var (
		owner, status            string
		paid, refunded, inFlight int64
		count                    int
	)
	err := s.pool.QueryRow(ctx, `SELECT user_id, status, amount, refunded, in_flight, refund_count FROM reservation WHERE id = $1`, id).
		Scan(&owner, &status, &paid, &refunded, &inFlight, &count)
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && owner != userID:
		return Refund{}, false, ErrNotFound
	case err != nil:
		return Refund{}, false, fmt.Errorf("pgrefund: read %s: %w", id, err)
	case status != "ACCEPTED":
		return Refund{}, false, ErrCanceled
	case count >= maxRefunds:
		return Refund{}, false, ErrRefundLimit
	}
	return Refund{}, false, ErrInsufficient
}

const refundColumns = `reservation_id, refund_no, idempotency_key, user_id, reason, status, amount,
coalesce(provider_refund_id, ''), attempts, created_at, updated_at, succeeded_at`

func scanRefund(row pgx.Row) (Refund, error) {
	var r Refund
	err := row.Scan(&r.ReservationID, &r.RefundNo, &r.IdempotencyKey, &r.UserID, &r.Reason, &r.Status, &r.Amount,
		&r.ProviderRefundID, &r.Attempts, &r.CreatedAt, &r.UpdatedAt, &r.SucceededAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// RefundByKey reads the refund created under an idempotency key.
func (s *Store) RefundByKey(ctx context.Context, id, key string) (Refund, error) {
	return scanRefund(s.pool.QueryRow(ctx, `SELECT `+refundColumns+` FROM reservation_refund
WHERE reservation_id = $1 AND idempotency_key = $2`, id, key))
}

// Refund reads one refund of a reservation.
func (s *Store) Refund(ctx context.Context, id, no string) (Refund, error) {
	return scanRefund(s.pool.QueryRow(ctx, `SELECT `+refundColumns+` FROM reservation_refund
WHERE refund_no = $1 AND reservation_id = $2`, no, id))
}

// Get reads a reservation and its refunds in one round trip.
func (s *Store) Get(ctx context.Context, id string) (Reservation, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.id, s.user_id, s.out_trade_no, s.transaction_id, s.currency, s.status,
       s.amount, s.refunded, s.in_flight, s.registered_at,
       r.refund_no, r.idempotency_key, r.user_id, r.reason, r.status, r.amount, coalesce(r.provider_refund_id, ''),
       r.attempts, r.created_at, r.updated_at, r.succeeded_at
  FROM reservation s LEFT JOIN reservation_refund r ON r.reservation_id = s.id
 WHERE s.id = $1 ORDER BY r.id`, id)
	if err != nil {
		return Reservation{}, fmt.Errorf("pgrefund: get %s: %w", id, err)
	}
	defer rows.Close()
	var res Reservation
	found := false
	for rows.Next() {
		var (
			no, key, user, reason, status, provider *string
			amount                                  *int64
			attempts                                *int
			created, updated                        *time.Time
			succeeded                               *time.Time
		)
		if err := rows.Scan(&res.ID, &res.UserID, &res.OutTradeNo, &res.TransactionID, &res.Currency, &res.Status,
			&res.Amount, &res.Refunded, &res.InFlight, &res.RegisteredAt,
			&no, &key, &user, &reason, &status, &amount, &provider, &attempts, &created, &updated, &succeeded); err != nil {
			return Reservation{}, fmt.Errorf("pgrefund: get %s: %w", id, err)
		}
		found = true
		if no != nil {
			res.Refunds = append(res.Refunds, Refund{ReservationID: id, RefundNo: *no, IdempotencyKey: *key, UserID: *user,
				Reason: *reason, Status: *status, Amount: *amount, ProviderRefundID: *provider, Attempts: *attempts,
				CreatedAt: *created, UpdatedAt: *updated, SucceededAt: succeeded})
		}
	}
	if err := rows.Err(); err != nil {
		return Reservation{}, fmt.Errorf("pgrefund: get %s: %w", id, err)
	}
	if !found {
		return Reservation{}, ErrNotFound
	}
	return res, nil
}

// markSucceededStmt is the seeds' markSucceeded: the refund moves from
// PROCESSING or UNKNOWN to SUCCEEDED only if it is still there, and its
// amount moves from in flight to refunded in the same statement; the
// reservation is CANCELED once everything paid is refunded.
const markSucceededStmt = `WITH r AS (
    UPDATE reservation_refund
       SET status = 'SUCCEEDED', provider_refund_id = coalesce(nullif($2, ''), provider_refund_id),
           succeeded_at = $3, updated_at = now(), attempts = attempts + $4
     WHERE refund_no = $1 AND status IN ('PROCESSING', 'UNKNOWN', 'ABNORMAL')
 RETURNING reservation_id, amount)
UPDATE reservation s
   SET in_flight = s.in_flight - r.amount, refunded = s.refunded + r.amount,
       status = CASE WHEN s.refunded + r.amount >= s.amount THEN 'CANCELED' ELSE s.status END
  FROM r WHERE s.id = r.reservation_id`

// markFailedStmt: a closed or rejected refund releases its amount.
const markFailedStmt = `WITH r AS (
    UPDATE reservation_refund
       SET status = 'FAILED', last_error = $2, updated_at = now(), attempts = attempts + $3
     WHERE refund_no = $1 AND status IN ('PROCESSING', 'UNKNOWN')
 RETURNING reservation_id, amount)
UPDATE reservation s SET in_flight = s.in_flight - r.amount FROM r WHERE s.id = r.reservation_id`

// markStmt records a non-final answer (accepted, unknown, abnormal).
const markStmt = `UPDATE reservation_refund
   SET status = $2, provider_refund_id = coalesce(nullif($3, ''), provider_refund_id), last_error = nullif($4, ''),
       updated_at = now(), attempts = attempts + $5
 WHERE refund_no = $1 AND status IN ('PROCESSING', 'UNKNOWN')`

// Outcome is a provider's answer, reduced to what the tables keep.
type Outcome struct {
	Status      string // one of the State constants
	ProviderID  string
	Message     string
	SuccessTime time.Time
}

// Record applies a provider answer with the conditional UPDATEs; it
// reports whether anything changed (false: a duplicate or stale answer).
// attempt is 1 for the answer to a submission, 0 otherwise.
func (s *Store) Record(ctx context.Context, no string, o Outcome, attempt int) (bool, error) {
	var tag pgconn.CommandTag
	var err error
	switch o.Status {
	case StateSucceeded:
		t := o.SuccessTime
		if t.IsZero() {
			t = time.Now()
		}
		tag, err = s.pool.Exec(ctx, markSucceededStmt, no, o.ProviderID, t, attempt)
	case StateFailed:
		tag, err = s.pool.Exec(ctx, markFailedStmt, no, o.Message, attempt)
	default:
		tag, err = s.pool.Exec(ctx, markStmt, no, o.Status, o.ProviderID, o.Message, attempt)
	}
	if err != nil {
		return false, fmt.Errorf("pgrefund: record %s %s: %w", o.Status, no, err)
	}
	return tag.RowsAffected() > 0, nil
}

// notifyStmt is the seeds' notification handling in one statement: insert
// into refund_notify_record (a duplicate inserts nothing, and then nothing
// else happens), then the conditional UPDATE of the refund and the
// reservation's totals.
const notifyStmt = `WITH n AS (
    INSERT INTO refund_notify_record (out_refund_no, refund_status, notify_content)
    VALUES ($1, 'SUCCESS', $4) ON CONFLICT DO NOTHING RETURNING out_refund_no),
r AS (
    UPDATE reservation_refund
       SET status = 'SUCCEEDED', provider_refund_id = coalesce(nullif($2, ''), provider_refund_id),
           succeeded_at = $3, updated_at = now()
      FROM n
     WHERE refund_no = n.out_refund_no AND status IN ('PROCESSING', 'UNKNOWN', 'ABNORMAL')
 RETURNING reservation_id, amount)
UPDATE reservation s
   SET in_flight = s.in_flight - r.amount, refunded = s.refunded + r.amount,
       status = CASE WHEN s.refunded + r.amount >= s.amount THEN 'CANCELED' ELSE s.status END
  FROM r WHERE s.id = r.reservation_id`

// notifyOtherStmt records a CLOSED or ABNORMAL notification the same way.
const notifyOtherStmt = `WITH n AS (
    INSERT INTO refund_notify_record (out_refund_no, refund_status, notify_content)
    VALUES ($1, $2, $5) ON CONFLICT DO NOTHING RETURNING out_refund_no),
r AS (
    UPDATE reservation_refund
       SET status = $3, provider_refund_id = coalesce(nullif($4, ''), provider_refund_id), updated_at = now()
      FROM n
     WHERE refund_no = n.out_refund_no AND status IN ('PROCESSING', 'UNKNOWN')
 RETURNING reservation_id, amount, status)
UPDATE reservation s SET in_flight = s.in_flight - r.amount FROM r WHERE s.id = r.reservation_id AND r.status = 'FAILED'`

// NotifyTarget is what a notification is checked against.
type NotifyTarget struct {
	Amount, Total int64
	OutTradeNo    string
	ProviderID    string
}

// NotifyTarget reads the refund a notification names, with its order.
func (s *Store) NotifyTarget(ctx context.Context, no string) (NotifyTarget, error) {
	var t NotifyTarget
	err := s.pool.QueryRow(ctx, `SELECT r.amount, s.amount, s.out_trade_no, coalesce(r.provider_refund_id, '')
  FROM reservation_refund r JOIN reservation s ON s.id = r.reservation_id WHERE r.refund_no = $1`, no).
		Scan(&t.Amount, &t.Total, &t.OutTradeNo, &t.ProviderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("pgrefund: notification for %s: %w", no, err)
	}
	return t, nil
}

// ApplyNotification records a verified notification (wechatStatus is
// SUCCESS, CLOSED or ABNORMAL); applied is false for a duplicate.
func (s *Store) ApplyNotification(ctx context.Context, no, wechatStatus, providerID string, success time.Time, raw string) (bool, error) {
	var tag pgconn.CommandTag
	var err error
	switch wechatStatus {
	case "SUCCESS":
		if success.IsZero() {
			success = time.Now()
		}
		tag, err = s.pool.Exec(ctx, notifyStmt, no, providerID, success, raw)
	case "CLOSED":
		tag, err = s.pool.Exec(ctx, notifyOtherStmt, no, wechatStatus, StateFailed, providerID, raw)
	case "ABNORMAL":
		tag, err = s.pool.Exec(ctx, notifyOtherStmt, no, wechatStatus, StateAbnormal, providerID, raw)
	default:
		return false, fmt.Errorf("%w: refund_status %q", ErrInvalid, wechatStatus)
	}
	if err != nil {
		return false, fmt.Errorf("pgrefund: notification %s %s: %w", wechatStatus, no, err)
	}
	return tag.RowsAffected() > 0, nil
}

// RefundNo is the number the claim statements give the nth refund of a
// reservation, as refundd numbers them.
func RefundNo(prefix, id string, n int) string { return prefix + "-" + id + "-" + strconv.Itoa(n) }
