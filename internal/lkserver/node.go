package lkserver

import (
	"fmt"
	"os"
)

// StartNode starts one livekit-server of a multi-node deployment on free
// ports: every node given the same Redis address and database, and the
// same key pair, serves the same rooms and shares agent workers (rooms,
// participants and jobs are routed between nodes through Redis).
func StartNode(dir, redisAddr string, redisDB int, apiKey, apiSecret string) (*Server, error) {
	var lastErr error
	for range 3 {
		s, err := New(dir)
		if err != nil {
			return nil, err
		}
		s.APIKey, s.APISecret = apiKey, apiSecret
		if err := s.configure(dir); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(s.config, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		_, err = fmt.Fprintf(f, "redis:\n  address: %s\n  db: %d\n", redisAddr, redisDB)
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
