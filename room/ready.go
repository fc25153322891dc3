package room

import "errors"

// Ready reports whether LiveKit can dispatch rooms to this process: the
// worker's present connection is registered, and recorded by LiveKit. A
// process that lost its LiveKit server keeps serving the rooms it has,
// but a load balancer or orchestrator should not count it as ready.
func (a *Agent) Ready() error {
	select {
	case <-a.worker.registered:
	default:
		return errors.New("agent worker not registered with LiveKit yet")
	}
	a.worker.mu.Lock()
	live := a.worker.live
	a.worker.mu.Unlock()
	if !live {
		return errors.New("agent worker disconnected from LiveKit")
	}
	return nil
}
