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

// A track gone quiet sleeps until its next DTX frame, not waking for each
// frame it has nothing for, and the RTP timestamps still count every
// frame: the DTX frames come every dtxInterval frames, and sound written
// while it sleeps goes out in the next frame after, stamped with its time.
func TestQuietTrackSleepsBetweenDTXFrames(t *testing.T) {
	tr, err := NewTrack(16000)
	if err != nil {
		t.Fatal(err)
	}
	f, buf := make([]int16, tr.frame), make([]byte, maxPacket)
	start := time.Unix(1000, 0)
	at := func(frames int) time.Time { return start.Add(time.Duration(frames) * voiceFrame) }
	tr.due = start
	seq, stamp := tr.seq, tr.timestamp
	_ = tr.WriteSample(slices.Repeat([]int16{100}, tr.frame))
	<-tr.queued

	// The sound, then the silence that ends it: one wake-up a frame.
	for i := range 1 + trailingSilence {
		tr.sendDue(at(i), f, buf)
		if i < trailingSilence && !tr.wakeAt().Equal(at(i+1)) {
			t.Fatalf("after frame %d the track sleeps until +%v, not for the next frame", i, tr.wakeAt().Sub(start))
		}
	}
	if sent := tr.seq - seq; sent != 1+trailingSilence {
		t.Fatalf("%d packets for a frame of sound and its trailing silence, not %d", sent, 1+trailingSilence)
	}
	// Quiet: it sleeps to frame dtxInterval of silence, the next DTX frame.
	dtx := dtxInterval // the frame index of silence number dtxInterval
	if wake := tr.wakeAt(); !wake.Equal(at(dtx)) {
		t.Fatalf("quiet, the track sleeps until +%v, not until its DTX frame at +%v", wake.Sub(start), at(dtx).Sub(start))
	}
	tr.passQuiet(at(dtx), buf)
	tr.sendDue(at(dtx), f, buf)
	if sent := tr.seq - seq; sent != 2+trailingSilence {
		t.Fatalf("waking for the DTX frame sent %d packets, not 1", sent-1-trailingSilence)
	}
	if got, want := tr.timestamp-stamp, uint32(dtx+1)*frameTicks; got != want {
		t.Errorf("after the DTX frame the RTP timestamp moved %d ticks, not %d", got, want)
	}
	if wake := tr.wakeAt(); !wake.Equal(at(dtx + dtxInterval)) {
		t.Errorf("after a DTX frame the track sleeps until +%v, not +%v", wake.Sub(start), at(dtx+dtxInterval).Sub(start))
	}

	// Sound written 130 ms after the DTX frame wakes it: the frames due
	// before are silence, and the sound goes out in the next one.
	written := at(dtx).Add(130 * time.Millisecond)
	_ = tr.WriteSample(slices.Repeat([]int16{100}, tr.frame))
	tr.passQuiet(written, buf)
	tr.sendDue(written, f, buf)
	next := at(dtx + 7)
	if wake := tr.wakeAt(); !wake.Equal(next) {
		t.Fatalf("with sound queued the track sleeps until +%v, not for the next frame, +%v", wake.Sub(start), next.Sub(start))
	}
	tr.sendDue(next, f, buf)
	if sent := tr.seq - seq; sent != 3+trailingSilence {
		t.Fatalf("%d packets after the DTX frame, not the 1 of sound", sent-2-trailingSilence)
	}
	if got, want := tr.timestamp-stamp, uint32(dtx+8)*frameTicks; got != want {
		t.Errorf("after the sound the RTP timestamp moved %d ticks, not %d: it was not stamped with its time", got, want)
	}
}
