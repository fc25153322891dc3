package lkserver

import (
	"fmt"
	"os"
	"strings"
)

// NodeConfig is what a node of a deployment shares with the others.
type NodeConfig struct {
	// APIKey and APISecret: every node of a deployment has the same pair.
	APIKey, APISecret string
	// RedisAddr and RedisDB: nodes given the same Redis serve the same
	// rooms and share agent workers (rooms, participants and jobs are
	// routed between nodes through it). Empty: a single node.
	RedisAddr string
	RedisDB   int
	// WebhookURLs receive LiveKit's webhooks, signed with APIKey.
	WebhookURLs []string
}

// StartNode starts one livekit-server of a deployment on free ports.
func StartNode(dir string, c NodeConfig) (*Server, error) {
	var lastErr error
	for range 3 {
		s, err := New(dir)
		if err != nil {
			return nil, err
		}
		if c.APIKey != "" {
			s.APIKey, s.APISecret = c.APIKey, c.APISecret
		}
		if err := s.configure(dir); err != nil {
			return nil, err
		}
		var extra strings.Builder
		if c.RedisAddr != "" {
			fmt.Fprintf(&extra, "redis:\n  address: %s\n  db: %d\n", c.RedisAddr, c.RedisDB)
		}
		if len(c.WebhookURLs) > 0 {
			fmt.Fprintf(&extra, "webhook:\n  api_key: %s\n  urls:\n", s.APIKey)
			for _, u := range c.WebhookURLs {
				fmt.Fprintf(&extra, "    - %q\n", u)
			}
		}
		f, err := os.OpenFile(s.config, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(extra.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("livekit-server node did not start: %w", lastErr)
}

// PID is the server's process id while it runs, else 0 (for measuring
// its CPU and memory from /proc).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}
