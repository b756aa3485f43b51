package journal_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
)

// BenchmarkArchiveRewrite measures the pause of an archival
// (docs/AUDIT.md, "Archival"): refundd is stopped while ArchiveStreams
// writes the segment and the new hot generation. The journal holds
// streams of 5 records each, interleaved; a tenth of them stay hot (the
// live window), the rest are archived. It reports the hot file's size
// before and after. Not run by the test suite; run it on a quiet machine:
//
//	go test ./journal -run X -bench ArchiveRewrite -benchtime 3x
func BenchmarkArchiveRewrite(b *testing.B) {
	for _, streams := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			ctx := context.Background()
			src := filepath.Join(b.TempDir(), "refundd.db")
			db, err := journal.Open(src, &journal.Options{NoSync: true, MaxBatch: 4096})
			if err != nil {
				b.Fatal(err)
			}
			names := make([]string, streams)
			for i := range names {
				names[i] = fmt.Sprintf("r%07d", i)
			}
			data := make([]byte, 400) // about a reservation event's size
			for seq := range 5 {
				for _, s := range names {
					if _, err := db.Append(ctx, journal.AppendRequest{Stream: s, Expected: uint64(seq),
						Events: []journal.Event{{Type: "e", Version: 1, Data: data}}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			archive := names[:streams*9/10]
			before, _ := os.Stat(src)
			var after int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				path := filepath.Join(dir, "refundd.db")
				copyFileB(b, src, path)
				b.StartTimer()
				if _, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: archive, Cutoff: time.Now()}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st, _ := os.Stat(path)
				after = st.Size()
				b.StartTimer()
			}
			b.ReportMetric(float64(before.Size()), "bytes-before")
			b.ReportMetric(float64(after), "bytes-after")
		})
	}
}

func copyFileB(b *testing.B, from, to string) {
	b.Helper()
	src, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
}

// archivedForBench writes streams of 5 records each, interleaved as a
// year of reservations is, with data of a reservation event's size and
// shape (so segments compress as real ones do), and archives them all
// into one segment. It returns the hot file's path, the streams and the
// archival's result.
func archivedForBench(b *testing.B, streams int) (string, []string, journal.ArchiveResult) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true, MaxBatch: 4096})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, streams)
	for i := range names {
		names[i] = fmt.Sprintf("r%07d", i)
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for seq := range 5 {
		for i, s := range names {
			data := fmt.Appendf(nil, `{"reservation_id":%q,"refund_no":"R-%s/%d","user_id":"u%d","amount":%d,"currency":"CNY","at":%q,"by":"api","request":{"out_refund_no":"R-%s/%d","out_trade_no":"T%d","amount":{"refund":%d,"total":%d,"currency":"CNY"},"notify_url":"https://refundd.example.com/v1/notify/wechat"},"provider_id":"50300%013d"}`,
				s, s, seq, i%9973, 100+i%5000, at.Add(time.Duration(seq*streams+i)*time.Second).Format(time.RFC3339Nano), s, seq, i, 100+i%5000, 20000+i%7000, int64(i)*7919)
			if _, err := db.Append(ctx, journal.AppendRequest{Stream: s, Expected: uint64(seq),
				Events: []journal.Event{{Type: "e", Version: 1, Data: data}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	res, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: names, Cutoff: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	return path, names, res
}

// BenchmarkLoadArchived measures a read of one archived stream, what
// refundd does when an archived reservation is activated (GET
// /v1/reservations/{id}) and what `journal show` does: the first, the
// middle and the last of 100,000 streams archived into one segment.
//
//	go test ./journal -run X -bench LoadArchived -benchtime 20x
func BenchmarkLoadArchived(b *testing.B) {
	ctx := context.Background()
	path, names, res := archivedForBench(b, 100_000)
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, read := range []struct {
		name   string
		stream string
	}{{"first", names[0]}, {"middle", names[len(names)/2]}, {"last", names[len(names)-1]}} {
		b.Run(read.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				recs, archived, err := db.LoadArchived(ctx, read.stream)
				if err != nil || !archived || len(recs) != 5 {
					b.Fatalf("LoadArchived(%s) = %d records, archived %v, %v", read.stream, len(recs), archived, err)
				}
			}
			b.ReportMetric(float64(res.Manifest.SegmentBytes), "segment-bytes")
		})
	}
}

// BenchmarkSegmentWalk reads a whole segment of 500,000 records, as
// verify's chain walk and the exports do.
//
//	go test ./journal -run X -bench SegmentWalk -benchtime 5x
func BenchmarkSegmentWalk(b *testing.B) {
	_, _, res := archivedForBench(b, 100_000)
	b.ResetTimer()
	for range b.N {
		r, err := journal.OpenSegment(res.SegmentPath)
		if err != nil {
			b.Fatal(err)
		}
		var n uint64
		for {
			if _, _, ok := r.Next(); !ok {
				break
			}
			n++
		}
		if err := r.Err(); err != nil || n != res.Manifest.Records {
			b.Fatalf("walked %d of %d records: %v", n, res.Manifest.Records, err)
		}
		r.Close()
	}
	b.ReportMetric(float64(res.Manifest.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
