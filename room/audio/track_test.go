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

// A track whose goroutine ran late sends the frames it owes at once,
// stamped with the times they were due, with contiguous RTP timestamps:
// the client plays them back to back, and the echo reference must hear
// them so. A stall longer than maxCatchUp is a gap instead, which the
// timestamps jump over.
func TestTrackCatchesUpOnLateFrames(t *testing.T) {
	tr, err := NewTrack(16000)
	if err != nil {
		t.Fatal(err)
	}
	var taps []tapped
	tr.Tap(func(frame []int16, rate int, at time.Time) { taps = append(taps, tapped{nil, rate, at}) })
	_ = tr.WriteSample(slices.Repeat([]int16{100}, 10*tr.frame))
	f, buf := make([]int16, tr.frame), make([]byte, maxPacket)
	start := time.Unix(1000, 0)
	tr.due = start
	stamp := tr.timestamp

	tr.sendDue(start.Add(70*time.Millisecond), f, buf) // 70 ms late
	if len(taps) != 4 {
		t.Fatalf("70 ms after the first frame was due, %d frames were sent, not 4", len(taps))
	}
	for i, tp := range taps {
		if want := start.Add(time.Duration(i) * voiceFrame); !tp.at.Equal(want) {
			t.Errorf("frame %d was tapped as sent at +%v, not when due, +%v", i, tp.at.Sub(start), want.Sub(start))
		}
	}
	if got := tr.timestamp - stamp; got != 4*frameTicks {
		t.Errorf("the RTP timestamp moved %d ticks over 4 frames, not %d", got, 4*frameTicks)
	}

	// A second's stall: the frames due in it are skipped, not sent in a
	// burst, and the timestamps jump over them.
	stalled := start.Add(80*time.Millisecond + time.Second + 5*time.Millisecond)
	tr.sendDue(stalled, f, buf)
	if len(taps) != 5 {
		t.Fatalf("after a second's stall, %d frames were sent at once, not 1", len(taps)-4)
	}
	if at := taps[4].at; at.After(stalled) || stalled.Sub(at) >= voiceFrame {
		t.Errorf("the frame after the stall was tapped at +%v, not within a frame of the stall's end, +%v", at.Sub(start), stalled.Sub(start))
	}
	if got, want := tr.timestamp-stamp, uint32(taps[4].at.Sub(start)/voiceFrame+1)*frameTicks; got != want {
		t.Errorf("after the stall the RTP timestamp moved %d ticks, not %d: the gap is not jumped over", got, want)
	}
}
