package audio

import (
	"slices"
	"testing"
	"time"
)

type tapped struct {
	frame []int16
	rate  int
	at    time.Time
}

// The track hands its tap each frame of sound as it sends it, at its
// rate, in order, and not the silence it sends once its queue ran dry:
// the stage's echo reference is what was sent, exactly.
func TestTrackTapsWhatItSends(t *testing.T) {
	tr, err := NewTrack(16000)
	if err != nil {
		t.Fatal(err)
	}
	taps := make(chan tapped, 100)
	tr.Tap(func(frame []int16, rate int, at time.Time) {
		taps <- tapped{append([]int16(nil), frame...), rate, at}
	})
	tr.start.Do(func() { go tr.run() }) // as Bind starts it
	defer tr.Close()

	sound := make([]int16, 2*tr.frame)
	for i := range sound {
		sound[i] = int16(i%200 + 1)
	}
	_ = tr.WriteSample(sound)
	first, second := <-taps, <-taps
	if first.rate != 16000 || !slices.Equal(first.frame, sound[:tr.frame]) || !slices.Equal(second.frame, sound[tr.frame:]) {
		t.Fatalf("tapped %d and %d samples at %d Hz, not what was written", len(first.frame), len(second.frame), first.rate)
	}
	if !second.at.After(first.at) {
		t.Errorf("the second frame was tapped as sent at %v, the first at %v", second.at, first.at)
	}
	// Silence follows, sent and not tapped: the next tap is the next
	// sound.
	marker := slices.Repeat([]int16{-7}, tr.frame)
	_ = tr.WriteSample(marker)
	if got := <-taps; !slices.Equal(got.frame, marker) {
		t.Fatalf("after the sound, a frame of %v was tapped", got.frame[:4])
	}
}
