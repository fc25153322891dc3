package room

import "errors"

// Ready reports whether LiveKit can dispatch rooms to this process: the
// worker holds an open agent connection and has registered at least once.
// A process that lost its LiveKit server keeps serving the rooms it has,
// but a load balancer or orchestrator should not count it as ready.
func (a *Agent) Ready() error {
	select {
	case <-a.worker.registered:
	default:
		return errors.New("agent worker not registered with LiveKit yet")
	}
	a.worker.mu.Lock()
	connected := a.worker.conn != nil
	a.worker.mu.Unlock()
	if !connected {
		return errors.New("agent worker disconnected from LiveKit")
	}
	return nil
}
