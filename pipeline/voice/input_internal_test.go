package voice

import (
	"slices"
	"testing"
)

// Input keeps what was written, in order, up to its backlog, and nothing
// written after it closed.
func TestInputKeepsItsBacklogInOrder(t *testing.T) {
	in := newInput()
	for i := range inputBacklog + 2 {
		_ = in.Write([]int16{int16(i)})
	}
	_ = in.Close()
	_ = in.Write([]int16{-1})
	<-in.ended
	var got []int16
	for _, c := range in.chunks.Take() {
		got = append(got, c.pcm...)
	}
	want := make([]int16, inputBacklog)
	for i := range want {
		want[i] = int16(i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kept %d samples, %v…; want the first %d in order", len(got), got[:min(5, len(got))], inputBacklog)
	}
	if in.drops != 2 {
		t.Fatalf("%d chunks dropped, want 2", in.drops)
	}
}
