package tally

import "time"

// SetAfter replaces the timer a writer waits out NoteEvery with; call it
// before the Store is used.
func SetAfter(s *Store, after func(time.Duration) <-chan time.Time) { s.after = after }
