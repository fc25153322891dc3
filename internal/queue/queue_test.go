package queue

import (
	"slices"
	"testing"
)

func TestOrderLimitAndFront(t *testing.T) {
	q := New[int]()
	for i := 1; i <= 3; i++ {
		if !q.Push(i, 3) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.Push(4, 3) {
		t.Fatal("a fourth value got past a limit of 3")
	}
	if !q.Push(4, 0) {
		t.Fatal("limit 0 refused")
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("not rung")
	}
	if v, ok := q.Pop(); !ok || v != 1 {
		t.Fatalf("pop %d %v", v, ok)
	}
	q.PushFront(0)
	if got := q.Take(); !slices.Equal(got, []int{0, 2, 3, 4}) {
		t.Fatalf("took %v", got)
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("pop from an empty queue")
	}
	if got := q.Take(); len(got) != 0 {
		t.Fatalf("took %v from an empty queue", got)
	}
}
