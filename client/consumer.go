package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CursorStore keeps a consumer's position in the feed. Save must be
// durable before it returns: the consumer moves on after it.
type CursorStore interface {
	// Load returns the saved cursor, or "" to start at the beginning.
	Load(ctx context.Context) (string, error)
	Save(ctx context.Context, cursor string) error
}

// Consumer follows the event feed from a stored cursor, long-polling when
// it has caught up. Delivery is at least once: the cursor is saved after
// each handled event, so after a crash at most the event being handled is
// handled again; de-duplicate on Event.ID.
type Consumer struct {
	Client *Client
	Cursor CursorStore
	// Handle is called for each event in feed order. An error stops Run
	// with the cursor still before the event.
	Handle func(ctx context.Context, ev Event) error
	// Types keeps only these event types; empty means all.
	Types []string
	// Limit bounds a page; zero means the server's default.
	Limit int
	// Wait is the long poll; zero means 20s.
	Wait time.Duration
	// OnError, if set, is told of a transient failure (refundd down or
	// failing) before Run waits and tries again; Run goes on either way.
	OnError func(err error)
}

// Run follows the feed until ctx ends (returning ctx's error), Handle
// fails, the cursor store fails, or the API refuses the request (for
// example a cursor beyond the end of a restored journal: an *Error with
// CodeInvalid, for an operator to decide on).
func (c *Consumer) Run(ctx context.Context) error {
	if c.Client == nil || c.Cursor == nil || c.Handle == nil {
		return errors.New("client: Consumer needs Client, Cursor and Handle")
	}
	wait := c.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	cursor, err := c.Cursor.Load(ctx)
	if err != nil {
		return fmt.Errorf("client: load feed cursor: %w", err)
	}
	failures := 0
	for {
		page, err := c.Client.Events(ctx, EventsQuery{After: cursor, Limit: c.Limit, Types: c.Types, Wait: wait})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !transient(err) {
				return err
			}
			if c.OnError != nil {
				c.OnError(err)
			}
			failures++
			if err := c.Client.sleep(ctx, c.Client.backoff(failures, 0)); err != nil {
				return err
			}
			continue
		}
		failures = 0
		for _, ev := range page.Events {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := c.Handle(ctx, ev); err != nil {
				return fmt.Errorf("client: handle %s: %w", ev.ID, err)
			}
			// An event's global sequence is the feed cursor just after it.
			cursor = strconv.FormatUint(ev.Global, 10)
			if err := c.Cursor.Save(ctx, cursor); err != nil {
				return fmt.Errorf("client: save feed cursor: %w", err)
			}
		}
		if page.Next != cursor && page.Next != "" {
			// The page moved past records that match nothing.
			cursor = page.Next
			if err := c.Cursor.Save(ctx, cursor); err != nil {
				return fmt.Errorf("client: save feed cursor: %w", err)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// MemoryCursor is a CursorStore in memory (tests, or consumers that start
// from a cursor they keep elsewhere).
type MemoryCursor struct {
	mu     sync.Mutex
	cursor string
}

func (m *MemoryCursor) Load(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor, nil
}

func (m *MemoryCursor) Save(_ context.Context, cursor string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cursor = cursor
	return nil
}

// FileCursor keeps the cursor in a file, replaced atomically and fsynced
// on every Save.
type FileCursor struct{ Path string }

func (f FileCursor) Load(context.Context) (string, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

func (f FileCursor) Save(_ context.Context, cursor string) error {
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), filepath.Base(f.Path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.WriteString(cursor + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return err
	}
	// The rename is durable once the directory is.
	d, err := os.Open(filepath.Dir(f.Path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
