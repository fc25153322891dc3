package voice

import (
	"math"
	"testing"
)

// An utterance the recogniser found no words in is logged with its
// loudest frame: one loud frame among quiet ones is what it reports, and
// a short last frame counts as much as a whole one.
func TestLoudestFrame(t *testing.T) {
	pcm := make([]int16, 5*FrameSamples+FrameSamples/2)
	for i := range pcm {
		pcm[i] = 10
	}
	for i := 2 * FrameSamples; i < 3*FrameSamples; i++ {
		pcm[i] = 1000
	}
	if got := loudestFrame(pcm); math.Abs(got-1000) > 1e-9 {
		t.Errorf("loudest frame %v, want 1000", got)
	}
	for i := 5 * FrameSamples; i < len(pcm); i++ {
		pcm[i] = -3000
	}
	if got := loudestFrame(pcm); math.Abs(got-3000) > 1e-9 {
		t.Errorf("with a loud short last frame, loudest %v, want 3000", got)
	}
	if got := dbfs(loudestFrame(nil)); got != -120 {
		t.Errorf("no audio: %v dBFS, want -120", got)
	}
}
