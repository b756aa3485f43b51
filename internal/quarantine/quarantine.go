// Package quarantine keeps the raw bytes of inbound messages that could not
// be applied (bad signatures, mismatches, unknown refunds) for operators, in
// bounded storage outside the event journal: the endpoints that feed it are
// reachable without authentication, so it must never grow without limit.
// When a limit is reached the oldest entries are dropped first and counted.
package quarantine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entry is one kept message.
type Entry struct {
	At       time.Time         `json:"at"`
	Endpoint string            `json:"endpoint"`
	Reason   string            `json:"reason"`
	Detail   string            `json:"detail,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     []byte            `json:"body"`
}

// Meta describes a kept entry without its body.
type Meta struct {
	Name     string    `json:"name"`
	At       time.Time `json:"at"`
	Endpoint string    `json:"endpoint"`
	Reason   string    `json:"reason"`
	Size     int64     `json:"size"`
}

// Options bound the store.
type Options struct {
	// MaxBytes caps the total size of kept files; zero means 64 MiB.
	MaxBytes int64
	// MaxEntries caps their number; zero means 10,000.
	MaxEntries int
	// MaxBody truncates a single body; zero means 64 KiB.
	MaxBody int
}

// Store keeps entries as one JSON file each in a directory.
type Store struct {
	dir  string
	opts Options

	mu      sync.Mutex
	files   []fileInfo // oldest first
	total   int64
	seq     uint64
	dropped int64
}

type fileInfo struct {
	name string
	size int64
}

// ErrInvalid is returned for an unusable directory or options.
var ErrInvalid = errors.New("quarantine: invalid")

// Open creates dir if needed and indexes what it already holds.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory", ErrInvalid)
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 64 << 20
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 10000
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 64 << 10
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	s := &Store{dir: dir, opts: opts}
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		s.files = append(s.files, fileInfo{name: name, size: info.Size()})
		s.total += info.Size()
		if n, ok := seqOf(name); ok && n > s.seq {
			s.seq = n
		}
	}
	// Names sort by sequence, which is creation order.
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].name < s.files[j].name })
	return s, nil
}

func seqOf(name string) (uint64, bool) {
	i := strings.IndexByte(name, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(name[:i], 10, 64)
	return n, err == nil
}

// Keep writes e, dropping the oldest entries beyond the limits.
func (s *Store) Keep(e Entry) error {
	if len(e.Body) > s.opts.MaxBody {
		e.Body = e.Body[:s.opts.MaxBody]
		e.Detail = strings.TrimSpace(e.Detail + " (body truncated)")
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	name := fmt.Sprintf("%020d-%s.json", s.seq, safe(e.Reason))
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("quarantine: %w", err)
	}
	s.files = append(s.files, fileInfo{name: name, size: int64(len(data))})
	s.total += int64(len(data))
	for len(s.files) > 1 && (s.total > s.opts.MaxBytes || len(s.files) > s.opts.MaxEntries) {
		old := s.files[0]
		if err := os.Remove(filepath.Join(s.dir, old.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("quarantine: drop oldest: %w", err)
		}
		s.files = s.files[1:]
		s.total -= old.size
		s.dropped++
	}
	return nil
}

func safe(reason string) string {
	var b strings.Builder
	for _, r := range reason {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		}
		if b.Len() >= 32 {
			break
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// List returns up to limit entries, newest first.
func (s *Store) List(limit int) ([]Meta, error) {
	s.mu.Lock()
	files := append([]fileInfo(nil), s.files...)
	s.mu.Unlock()
	var out []Meta
	for i := len(files) - 1; i >= 0 && len(out) < limit; i-- {
		data, err := os.ReadFile(filepath.Join(s.dir, files[i].name))
		if err != nil {
			continue // dropped meanwhile
		}
		var e Entry
		if json.Unmarshal(data, &e) != nil {
			continue
		}
		out = append(out, Meta{Name: files[i].name, At: e.At, Endpoint: e.Endpoint, Reason: e.Reason, Size: files[i].size})
	}
	return out, nil
}

// Read returns one entry by name.
func (s *Store) Read(name string) (Entry, error) {
	if name != filepath.Base(name) || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
		return Entry{}, fmt.Errorf("%w: bad name", ErrInvalid)
	}
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return Entry{}, fmt.Errorf("quarantine: %w", err)
	}
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return Entry{}, fmt.Errorf("quarantine: %s: %w", name, err)
	}
	return e, nil
}

// Stats reports how many entries and bytes are kept and how many were
// dropped to respect the limits.
func (s *Store) Stats() (entries int, bytes int64, dropped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files), s.total, s.dropped
}
