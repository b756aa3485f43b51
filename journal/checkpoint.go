package journal

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Checkpoint says that at Time the journal's last record was Global and
// the chain hash of that record was Hash. Recorded outside the journal (by
// an auditor, in a ticket, in another system), it proves that records
// 1..Global have not been changed since: any change alters the chain hash
// at Global. Signed with the deployment's Ed25519 key, it also proves that
// refundd wrote it.
type Checkpoint struct {
	Global uint64    `json:"global"`
	Hash   Hash      `json:"hash"`
	Time   time.Time `json:"time"`
	// KeyID names the signing key (KeyID of its public key); empty when
	// unsigned.
	KeyID string `json:"key_id,omitempty"`
	// Signature is the Ed25519 signature of Message(); nil when unsigned.
	Signature []byte `json:"signature,omitempty"`
}

// checkpointDomain starts every signed message, so a signature over a
// checkpoint can never be taken for a signature over anything else.
const checkpointDomain = "refundd journal checkpoint v1"

// Message returns the exact bytes that are signed: four lines of text,
//
//	refundd journal checkpoint v1
//	global: 1234
//	hash: 3f0c...(64 hex digits)
//	time: 2026-03-01T02:00:00.123456789Z
//
// each ending in "\n", the time in UTC RFC 3339 with nanoseconds.
func (c Checkpoint) Message() []byte {
	return []byte(checkpointDomain + "\nglobal: " + strconv.FormatUint(c.Global, 10) +
		"\nhash: " + c.Hash.String() + "\ntime: " + c.Time.UTC().Format(time.RFC3339Nano) + "\n")
}

// Signed reports whether the checkpoint carries a signature.
func (c Checkpoint) Signed() bool { return len(c.Signature) > 0 }

// Sign signs the checkpoint with key, setting KeyID and Signature.
func (c *Checkpoint) Sign(key ed25519.PrivateKey) {
	c.Time = c.Time.UTC()
	c.KeyID = KeyID(key.Public().(ed25519.PublicKey))
	c.Signature = ed25519.Sign(key, c.Message())
}

// VerifySignature checks the signature against pub. It fails with
// ErrSignature when the checkpoint is unsigned, names another key, or the
// signature does not verify.
func (c Checkpoint) VerifySignature(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: public key is %d bytes, want %d", ErrInvalid, len(pub), ed25519.PublicKeySize)
	}
	switch {
	case !c.Signed():
		return fmt.Errorf("%w: checkpoint at global %d is not signed", ErrSignature, c.Global)
	case c.KeyID != KeyID(pub):
		return fmt.Errorf("%w: checkpoint at global %d is signed by key %s, not %s", ErrSignature, c.Global, c.KeyID, KeyID(pub))
	case !ed25519.Verify(pub, c.Message(), c.Signature):
		return fmt.Errorf("%w: checkpoint at global %d: signature does not verify", ErrSignature, c.Global)
	}
	return nil
}

// KeyID identifies an Ed25519 public key: the first 8 bytes of its SHA-256,
// in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Checkpoint defaults (Options.CheckpointEvery, CheckpointInterval).
const (
	defaultCheckpointEvery    = 10000
	defaultCheckpointInterval = 10 * time.Minute
)

// checkpointDue reports whether a commit that ends the chain at t should
// also write a checkpoint, given the last one.
func (db *DB) checkpointDue(t tip, last Checkpoint, now time.Time) bool {
	if t.global <= last.Global {
		return false
	}
	every, interval := db.opts.CheckpointEvery, db.opts.CheckpointInterval
	return (every > 0 && t.global-last.Global >= uint64(every)) ||
		(interval > 0 && now.Sub(last.Time) >= interval)
}

// newCheckpoint builds (and signs, when a key is configured) the
// checkpoint of t at now.
func (db *DB) newCheckpoint(t tip, now time.Time) Checkpoint {
	c := Checkpoint{Global: t.global, Hash: t.hash, Time: now.UTC()}
	if db.opts.SigningKey != nil {
		c.Sign(db.opts.SigningKey)
	}
	return c
}

func putCheckpoint(tx *bolt.Tx, c Checkpoint) error {
	b, err := tx.CreateBucketIfNotExists(bucketCheckpoints)
	if err != nil {
		return err
	}
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return b.Put(be64(c.Global), v)
}

func decodeCheckpoint(k, v []byte) (Checkpoint, error) {
	var c Checkpoint
	if len(k) != 8 {
		return c, fmt.Errorf("%w: checkpoint key of %d bytes", ErrCorrupt, len(k))
	}
	if err := json.Unmarshal(v, &c); err != nil {
		return c, fmt.Errorf("%w: checkpoint under global %d: %v", ErrCorrupt, binary.BigEndian.Uint64(k), err)
	}
	if g := binary.BigEndian.Uint64(k); c.Global != g {
		return c, fmt.Errorf("%w: checkpoint stored under global %d says global %d", ErrCorrupt, g, c.Global)
	}
	return c, nil
}

// lastCheckpointInTx returns the newest stored checkpoint, ok=false when
// there is none.
func lastCheckpointInTx(tx *bolt.Tx) (Checkpoint, bool, error) {
	b := tx.Bucket(bucketCheckpoints)
	if b == nil {
		return Checkpoint{}, false, nil
	}
	k, v := b.Cursor().Last()
	if k == nil {
		return Checkpoint{}, false, nil
	}
	c, err := decodeCheckpoint(k, v)
	return c, err == nil, err
}

// ChainHead returns the journal's current head: the last global and its
// chain hash, timed now and signed when Options.SigningKey is set. It is
// not stored (WriteCheckpoint stores one). An empty journal has head 0 with
// the zero Hash.
func (db *DB) ChainHead(ctx context.Context) (Checkpoint, error) {
	var t tip
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		t, err = tipInTx(tx)
		return err
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("journal: chain head: %w", err)
	}
	return db.newCheckpoint(t, db.opts.Now()), nil
}

// WriteCheckpoint stores a checkpoint of the current head now (replacing a
// stored checkpoint of the same global) and returns it. Appends also write
// checkpoints on their own (Options.CheckpointEvery, CheckpointInterval);
// this is for shutdown and for operators who want one at a given moment.
func (db *DB) WriteCheckpoint(ctx context.Context) (Checkpoint, error) {
	if db.opts.ReadOnly {
		return Checkpoint{}, fmt.Errorf("journal: write checkpoint: %w", ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, fmt.Errorf("journal: write checkpoint: %w", err)
	}
	var c Checkpoint
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		t, err := tipInTx(tx)
		if err != nil {
			return err
		}
		now := db.opts.Now()
		last, ok, err := lastCheckpointInTx(tx)
		if err != nil {
			return err
		}
		if ok && now.Before(last.Time) {
			now = last.Time // a clock stepped back: checkpoint times never do
		}
		c = db.newCheckpoint(t, now)
		return putCheckpoint(tx, c)
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("journal: write checkpoint: %w", err)
	}
	db.cpMu.Lock()
	if c.Global >= db.lastCP.Global {
		db.lastCP = c
	}
	db.cpMu.Unlock()
	return c, nil
}

// LastCheckpoint returns the newest stored checkpoint; ok is false when
// none has been written yet.
func (db *DB) LastCheckpoint(ctx context.Context) (c Checkpoint, ok bool, err error) {
	err = db.view(ctx, func(tx *bolt.Tx) error {
		c, ok, err = lastCheckpointInTx(tx)
		return err
	})
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("journal: last checkpoint: %w", err)
	}
	return c, ok, nil
}

// Checkpoints returns up to limit stored checkpoints with Global >
// afterGlobal, oldest first. limit <= 0 means no limit.
func (db *DB) Checkpoints(ctx context.Context, afterGlobal uint64, limit int) ([]Checkpoint, error) {
	out := []Checkpoint{}
	if afterGlobal == math.MaxUint64 {
		return out, nil
	}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(be64(afterGlobal + 1)); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			cp, err := decodeCheckpoint(k, v)
			if err != nil {
				return err
			}
			out = append(out, cp)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: checkpoints: %w", err)
	}
	return out, nil
}
