package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit against per-event commit and against a raw bbolt ceiling,
// at 1/8/64/256 concurrent writers, with fsync on and off:
//
//	go test -run='^$' -bench=GroupCommit -benchmem ./journal/
//
// Every mode stores the same data: a log value of ~216 bytes under a
// global sequence, a streams index entry and a head per stream. "ceiling"
// is the least code that can write the journal's layout with a drain-loop
// committer (no validation, no record encoding or checksum, no claims):
// the log in the commit that acknowledges an append, the index entries
// later, one index transaction per 8192 events (index.go). It is the
// bound this package's overhead is judged against. "ceiling-inline" is the
// same with the layout before the index tail: index entries and heads
// written in every commit.

// gcData makes each stored record about 216 bytes, the size the layout in
// docs/BENCHMARKS.md was measured with.
var gcData = make([]byte, 180)

// gcRun runs b.N appends over writers goroutines and reports events/s.
// appendOne is called by one goroutine per writer index.
func gcRun(b *testing.B, writers int, appendOne func(w int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	lat := make([][]time.Duration, writers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				if err := appendOne(w); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
	}
}

func BenchmarkGroupCommit(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		sync := "on"
		if noSync {
			sync = "off"
		}
		for _, mode := range []string{"group", "per-event", "ceiling", "ceiling-inline"} {
			for _, writers := range []int{1, 8, 64, 256} {
				name := fmt.Sprintf("fsync=%s/mode=%s/writers=%d", sync, mode, writers)
				b.Run(name, func(b *testing.B) {
					path := filepath.Join(b.TempDir(), "gc.db")
					if mode == "ceiling" || mode == "ceiling-inline" {
						benchCeiling(b, path, noSync, mode == "ceiling-inline", writers)
						return
					}
					opts := &Options{NoSync: noSync}
					if mode == "per-event" {
						opts.MaxBatch = 1
					}
					benchJournal(b, path, opts, writers)
				})
			}
		}
	}
}

func benchJournal(b *testing.B, path string, opts *Options, writers int) {
	db, err := Open(path, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	heads := make([]uint64, writers) // each owned by one writer goroutine
	streams := make([]string, writers)
	for w := range streams {
		streams[w] = fmt.Sprintf("reservation-%03d", w)
	}
	ctx := context.Background()
	commits0 := db.commits.Load()
	gcRun(b, writers, func(w int) error {
		last, err := db.Append(ctx, AppendRequest{
			Stream:   streams[w],
			Expected: heads[w],
			Events:   []Event{{Type: "refund.requested", Version: 1, Data: gcData}},
		})
		heads[w] = last
		return err
	})
	if c := db.commits.Load() - commits0; c > 0 {
		b.ReportMetric(float64(b.N)/float64(c), "events/commit")
	}
}

// ceiling is a minimal drain-loop group committer writing the journal's
// layout straight into bbolt.
type ceiling struct {
	db     *bolt.DB
	inline bool
	queue  chan *ceilingReq
	done   chan struct{}
	n      atomic.Int64 // commits
	// tail holds the index entries not yet written (inline == false),
	// in append order; only the loop uses it.
	tail []*ceilingReq
}

type ceilingReq struct {
	stream []byte
	seq    uint64
	global uint64
	value  []byte
	err    error
	done   chan struct{}
}

func openCeiling(path string, noSync, inline bool) (*ceiling, error) {
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		return nil, err
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"log", "streams", "heads"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		bdb.Close()
		return nil, err
	}
	c := &ceiling{db: bdb, inline: inline, queue: make(chan *ceilingReq, 4096), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

func (c *ceiling) loop() {
	defer close(c.done)
	var batch []*ceilingReq
	for first := range c.queue {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < 1024 {
			select {
			case r, ok := <-c.queue:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		err := c.db.Update(func(tx *bolt.Tx) error {
			log := tx.Bucket([]byte("log"))
			log.FillPercent = 1.0
			for _, r := range batch {
				g, err := log.NextSequence()
				if err != nil {
					return err
				}
				r.global = g
				if err := log.Put(binary.BigEndian.AppendUint64(nil, g), r.value); err != nil {
					return err
				}
			}
			if c.inline {
				return writeIndex(tx, batch)
			}
			return nil
		})
		c.n.Add(1)
		if !c.inline && err == nil {
			c.tail = append(c.tail, batch...)
			if len(c.tail) >= 8192 {
				err = c.db.Update(func(tx *bolt.Tx) error { return writeIndex(tx, c.tail) })
				c.tail = c.tail[:0]
			}
		}
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
	}
}

func writeIndex(tx *bolt.Tx, reqs []*ceilingReq) error {
	streams, heads := tx.Bucket([]byte("streams")), tx.Bucket([]byte("heads"))
	for _, r := range reqs {
		gk := binary.BigEndian.AppendUint64(nil, r.global)
		sk := binary.BigEndian.AppendUint64(append(append(make([]byte, 0, len(r.stream)+9), r.stream...), 0), r.seq)
		if err := streams.Put(sk, gk); err != nil {
			return err
		}
		if err := heads.Put(r.stream, binary.BigEndian.AppendUint64(nil, r.seq)); err != nil {
			return err
		}
	}
	return nil
}

func (c *ceiling) append(stream []byte, seq uint64, data []byte) error {
	// A fresh value per event, as the journal's encoder makes one.
	v := make([]byte, 0, len(data)+36)
	v = append(append(v, 1), data...)
	r := &ceilingReq{stream: stream, seq: seq, value: v, done: make(chan struct{})}
	c.queue <- r
	<-r.done
	return r.err
}

func (c *ceiling) close() error {
	close(c.queue)
	<-c.done
	return c.db.Close()
}

func benchCeiling(b *testing.B, path string, noSync, inline bool, writers int) {
	c, err := openCeiling(path, noSync, inline)
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	seqs := make([]uint64, writers)
	streams := make([][]byte, writers)
	for w := range streams {
		streams[w] = []byte(fmt.Sprintf("reservation-%03d", w))
	}
	gcRun(b, writers, func(w int) error {
		seqs[w]++
		return c.append(streams[w], seqs[w], gcData)
	})
	if n := c.n.Load(); n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "events/commit")
	}
}

// BenchmarkLayoutCommit isolates what one fsynced bbolt commit of k events
// for k distinct streams costs with the journal's layout ("indexed": log +
// streams index + heads) and with the log alone ("log-only"), to show
// where durable throughput goes: every stream in a commit dirties its own
// 4 KiB leaf page of the stream-first indexes, the log does not. ns/op is
// per commit.
func BenchmarkLayoutCommit(b *testing.B) {
	for _, layout := range []string{"indexed", "log-only"} {
		for _, k := range []int{1, 8, 64, 256} {
			b.Run(fmt.Sprintf("layout=%s/events=%d", layout, k), func(b *testing.B) {
				bdb, err := bolt.Open(filepath.Join(b.TempDir(), "layout.db"), 0o600, &bolt.Options{Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				defer bdb.Close()
				if err := bdb.Update(func(tx *bolt.Tx) error {
					for _, name := range []string{"log", "streams", "heads"} {
						if _, err := tx.CreateBucket([]byte(name)); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				streams := make([][]byte, k)
				for i := range streams {
					streams[i] = []byte(fmt.Sprintf("reservation-%03d", i))
				}
				value := make([]byte, 216)
				var seq uint64
				commit := func() error {
					seq++
					return bdb.Update(func(tx *bolt.Tx) error {
						log := tx.Bucket([]byte("log"))
						log.FillPercent = 1.0
						for _, s := range streams {
							g, err := log.NextSequence()
							if err != nil {
								return err
							}
							gk := binary.BigEndian.AppendUint64(nil, g)
							if err := log.Put(gk, value); err != nil {
								return err
							}
							if layout == "log-only" {
								continue
							}
							sk := binary.BigEndian.AppendUint64(append(append([]byte{}, s...), 0), seq)
							if err := tx.Bucket([]byte("streams")).Put(sk, gk); err != nil {
								return err
							}
							if err := tx.Bucket([]byte("heads")).Put(s, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
								return err
							}
						}
						return nil
					})
				}
				// Let each stream span several index pages first, as a
				// journal that has been running does.
				for range 200 {
					if err := commit(); err != nil {
						b.Fatal(err)
					}
				}
				w0 := pagesWritten(bdb)
				for b.Loop() {
					if err := commit(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(pagesWritten(bdb)-w0)/float64(b.N), "pages/commit")
				b.ReportMetric(float64(b.N*k)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

func pagesWritten(db *bolt.DB) int64 {
	st := db.Stats()
	return st.TxStats.GetWrite()
}
