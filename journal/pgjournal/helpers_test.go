package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// connect opens a plain connection to the store's schema, closed at the
// end of the test.
func connect(t *testing.T, s *pgtest.Store) *pgx.Conn {
	t.Helper()
	return connectTB(t, s)
}

func connectTB(t testing.TB, s *pgtest.Store) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{s.Schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
