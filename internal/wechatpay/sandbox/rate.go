package sandbox

import "maps"

// CreateRate is what the sandbox saw of refund create requests per second
// (Config.MaxCreatesPerSecond): how fast a client really sent them,
// measured where WeChat Pay would measure it.
type CreateRate struct {
	// PerSecond counts the authenticated create requests of each second
	// (Unix seconds of Config.Now), refused ones included.
	PerSecond map[int64]int
	// Max is the largest count of one second.
	Max int
	// Refused counts the requests refused with FREQUENCY_LIMITED for the
	// rate.
	Refused int
}

// CreateRate returns a copy of the create requests counted so far.
func (s *Server) CreateRate() CreateRate {
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	r := s.rate
	r.PerSecond = maps.Clone(s.rate.PerSecond)
	if r.PerSecond == nil {
		r.PerSecond = map[int64]int{}
	}
	return r
}

// countCreate counts one create request in its second and reports whether
// it is within Config.MaxCreatesPerSecond.
func (s *Server) countCreate() bool {
	sec := s.cfg.Now().Unix()
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	if s.rate.PerSecond == nil {
		s.rate.PerSecond = map[int64]int{}
	}
	s.rate.PerSecond[sec]++
	n := s.rate.PerSecond[sec]
	s.rate.Max = max(s.rate.Max, n)
	if limit := s.cfg.MaxCreatesPerSecond; limit > 0 && n > limit {
		s.rate.Refused++
		return false
	}
	return true
}
