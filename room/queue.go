package room

import "sync"

// queue hands values from goroutines that must not block (the SDK's
// callbacks, the engine) to the one goroutine that consumes them, in
// order. A slice under a mutex rather than a buffered channel: a channel
// holds its whole capacity for the life of the conversation, and the
// garbage collector scans it at every cycle.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{} // rung when items were added; one slot
}

func newQueue[T any]() *queue[T] { return &queue[T]{ready: make(chan struct{}, 1)} }

// push appends v, unless limit > 0 and limit values are waiting.
func (q *queue[T]) push(v T, limit int) bool {
	q.mu.Lock()
	if limit > 0 && len(q.items) >= limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// take returns everything waiting, oldest first, and empties the queue.
func (q *queue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
