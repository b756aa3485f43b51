//go:build !linux

package fsyncprobe

import "os"

// dataSync falls back to fsync where there is no fdatasync, as bbolt does.
func dataSync(f *os.File) error { return f.Sync() }
