package fsyncprobe

import (
	"os"
	"syscall"
)

// dataSync is fdatasync, as bbolt calls it on Linux.
func dataSync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
