// Package queue hands values from goroutines that must not block (the
// SDK's callbacks, the engine, a voice stage's listeners) to the one
// goroutine that consumes them, in order.
package queue

import "sync"

// Queue is a slice under a mutex rather than a buffered channel: a
// channel holds its whole capacity for the life of the conversation, and
// the garbage collector scans it at every cycle.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{} // rung when items were added; one slot
}

// New returns an empty queue.
func New[T any]() *Queue[T] { return &Queue[T]{ready: make(chan struct{}, 1)} }

// Ready is rung (one slot) whenever values were added: the consumer
// waits on it, then takes everything.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Push appends v, unless limit > 0 and limit values are waiting.
func (q *Queue[T]) Push(v T, limit int) bool {
	q.mu.Lock()
	if limit > 0 && len(q.items) >= limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.ring()
	return true
}

// PushFront puts v ahead of everything waiting: a reply that must follow
// what the consumer is doing now but precede what came after it.
func (q *Queue[T]) PushFront(v T) {
	q.mu.Lock()
	q.items = append([]T{v}, q.items...)
	q.mu.Unlock()
	q.ring()
}

func (q *Queue[T]) ring() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Take returns everything waiting, oldest first, and empties the queue.
func (q *Queue[T]) Take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// Pop returns the oldest value waiting, if any.
func (q *Queue[T]) Pop() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if len(q.items) == 0 {
		return zero, false
	}
	v := q.items[0]
	q.items[0] = zero
	q.items = q.items[1:]
	return v, true
}
