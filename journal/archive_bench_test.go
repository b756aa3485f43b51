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
