package room

import (
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk/opus"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// countingInput counts the samples a microphone hands on.
type countingInput struct {
	mu      sync.Mutex
	samples int
}

func (c *countingInput) Write(s []int16) error {
	c.mu.Lock()
	c.samples += len(s)
	c.mu.Unlock()
	return nil
}

func (c *countingInput) Close() error { return nil }

func (c *countingInput) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples
}

// A client in DTX is heard as silence at once, not after a wait, and
// again after each comfort-noise packet it sends every 400 ms: the end of
// an utterance is timed by that silence, so any wait makes every answer
// late. The time not covered is set back by hand and filled by a direct
// call, so the test does not wait on the clock.
func TestMicInDTXIsSilenceAtOnce(t *testing.T) {
	in := &countingInput{}
	dec, err := newMicDecoder(in)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	w := dec.(dtxWatch).mic
	frames, err := speechtest.Opus(append(speechtest.Render(t, "stop", 140, 48000), speechtest.Silence(600, 48000)...), 48000, true)
	if err != nil {
		t.Fatal(err)
	}
	// The last frame of sound, and the first of DTX after it.
	var sound, dtx opus.Sample
	for _, f := range frames {
		if len(f) > 2 {
			sound = f
		} else if f != nil {
			dtx = f
			break
		}
	}
	if sound == nil || dtx == nil {
		t.Fatal("the encoder never went into DTX")
	}
	const behind = 100 * time.Millisecond
	want := int(behind/micFrame) * voice.InputRate * int(micFrame/time.Millisecond) / 1000
	for _, step := range []struct {
		name    string
		packets []opus.Sample
	}{
		{"after speech", []opus.Sample{sound, dtx}},
		{"after a comfort-noise update", []opus.Sample{sound, dtx}}, // a full frame, as speech is
	} {
		for _, p := range step.packets {
			if err := dec.WriteSample(p); err != nil {
				t.Fatal(err)
			}
		}
		// Counted first: the microphone's own timer may fill the time too.
		before := in.count()
		w.mu.Lock()
		w.covered = time.Now().Add(-behind)
		w.mu.Unlock()
		w.fill()
		if got := in.count() - before; got < want {
			t.Errorf("%s: %d samples of silence for the %v a client in DTX sent nothing, want %d", step.name, got, behind, want)
		}
	}
}
