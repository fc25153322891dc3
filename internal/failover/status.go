package failover

import "time"

// ServerStatus is one server's state, for /readyz.
type ServerStatus struct {
	URL string `json:"url"`
	// State is "serving", "up" or "down".
	State string `json:"state"`
	// RetryIn is how long a down server is still skipped.
	RetryIn string `json:"retry_in,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Status is a pool's state, for /readyz.
type Status struct {
	// Serving is the server that answered last or, before any request,
	// the first one not down; empty when every server is down.
	Serving string         `json:"serving"`
	Servers []ServerStatus `json:"servers"`
}

// Status reports which server serves and which are down.
func (p *Pool) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	serving := p.servingIndex(now)
	st := Status{Servers: make([]ServerStatus, len(p.servers))}
	for i, s := range p.servers {
		ss := ServerStatus{URL: s.shown, State: "up"}
		switch {
		case i == serving:
			ss.State = "serving"
			st.Serving = s.shown
		case now.Before(s.until):
			ss.State, ss.RetryIn, ss.Error = "down", s.until.Sub(now).Round(time.Second).String(), s.reason
		}
		st.Servers[i] = ss
	}
	return st
}

// servingIndex is the server that answered last unless it is cooling
// off, else the first one not cooling off; -1 when every one is. p.mu
// is held.
func (p *Pool) servingIndex(now time.Time) int {
	if p.serving >= 0 && !now.Before(p.servers[p.serving].until) {
		return p.serving
	}
	for i, s := range p.servers {
		if !now.Before(s.until) {
			return i
		}
	}
	return -1
}
