// Package pgtest opens throwaway PostgreSQL journals for tests, each in a
// fresh schema of the server named by REFUNDD_TEST_POSTGRES, and checks
// their consistency (pgjournal.DB.Verify) when the test ends.
//
// Without REFUNDD_TEST_POSTGRES a test skips, with a message saying how to
// get a server (scripts/start-postgres); under CI=true it fails instead, so
// CI never passes by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// EnvDSN is the environment variable holding the test server's DSN.
const EnvDSN = "REFUNDD_TEST_POSTGRES"

// DSN returns the test server's DSN. Without one it skips the test, or
// fails it when CI=true.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	const how = EnvDSN + " is not set: run scripts/start-postgres (installs and starts PostgreSQL on 127.0.0.1) and export the DSN it prints"
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: %s; CI must run the PostgreSQL tests (scripts/test does this)", how)
	}
	t.Skipf("pgtest: skipping PostgreSQL test: %s", how)
	return ""
}

// Store is one fresh schema on the test server: a cluster's shared
// journal. Open opens nodes on it.
type Store struct {
	DSN    string
	Schema string
}

// New names a fresh schema (created by the first Open) and drops it when
// the test ends, after the nodes opened on it are closed.
func New(t testing.TB) *Store {
	t.Helper()
	dsn := DSN(t)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	s := &Store{DSN: dsn, Schema: "test_" + hex.EncodeToString(rnd[:])}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", s.Schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.Schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", s.Schema, err)
		}
	})
	return s
}

// Open opens a node on the store (opts may be nil; Schema is set to the
// store's). When the test ends it runs Verify, failing the test if the
// journal is inconsistent, then closes the node.
func (s *Store) Open(t testing.TB, opts *pgjournal.Options) *pgjournal.DB {
	t.Helper()
	var o pgjournal.Options
	if opts != nil {
		o = *opts
	}
	o.Schema = s.Schema
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgjournal.Open(ctx, s.DSN, &o)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(func() {
		vctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err := db.Verify(vctx)
		if errors.Is(err, journal.ErrClosed) { // the test closed it: check through another node
			var other *pgjournal.DB
			if other, err = pgjournal.Open(vctx, s.DSN, &pgjournal.Options{Schema: s.Schema}); err == nil {
				err = other.Verify(vctx)
				_ = other.Close()
			}
		}
		if err != nil {
			t.Errorf("pgtest: journal inconsistent at end of test: %v", err)
		}
		_ = db.Close()
	})
	return db
}

// Open opens one node on a fresh store.
func Open(t testing.TB) *pgjournal.DB {
	t.Helper()
	return New(t).Open(t, nil)
}
