package sandbox

import (
	"maps"
	"sync"
	"time"
)

// CreateRate is what the sandbox saw of refund create requests per second
// (Config.Creates): how fast a client really sent them, measured where
// WeChat Pay would measure it.
type CreateRate struct {
	// PerSecond counts the authenticated create requests of each second
	// (Unix seconds of Config.Now), refused ones included.
	PerSecond map[int64]int `json:"per_second"`
	// Max is the largest count of one second.
	Max int `json:"max"`
	// Refused counts the requests refused with FREQUENCY_LIMITED for the
	// rate.
	Refused int `json:"refused"`
}

// CreateCounter counts refund create requests per second and refuses
// those beyond a limit, as WeChat Pay limits refund creates per merchant
// id: a service provider's sub-merchants share its limit (PARTNER.md §4),
// so the Servers of one account share one counter (Config.Creates).
type CreateCounter struct {
	limit int
	mu    sync.Mutex
	rate  CreateRate
}

// NewCreateCounter returns a counter refusing creates beyond limit in one
// second (a calendar second of Config.Now); 0 counts without a limit.
func NewCreateCounter(limit int) *CreateCounter {
	return &CreateCounter{limit: max(limit, 0), rate: CreateRate{PerSecond: map[int64]int{}}}
}

// Rate returns a copy of the create requests counted so far.
func (c *CreateCounter) Rate() CreateRate {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rate
	r.PerSecond = maps.Clone(c.rate.PerSecond)
	return r
}

// count counts one create request at now and reports whether it is within
// the limit.
func (c *CreateCounter) count(now time.Time) bool {
	sec := now.Unix()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rate.PerSecond[sec]++
	n := c.rate.PerSecond[sec]
	c.rate.Max = max(c.rate.Max, n)
	if c.limit > 0 && n > c.limit {
		c.rate.Refused++
		return false
	}
	return true
}

// CreateRate returns the create requests counted by the server's counter
// (shared with the other Servers of its account, if any).
func (s *Server) CreateRate() CreateRate { return s.creates.Rate() }

// countCreate counts one create request and reports whether it is within
// the account's limit.
func (s *Server) countCreate() bool { return s.creates.count(s.cfg.Now()) }
