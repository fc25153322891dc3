package echo

import (
	"testing"
	"time"
)

// The clock dates a microphone's samples by their earliest arrivals. A
// stall in delivery hands the audio it held over at once, and leaves the
// dating as it was; audio lost, which leaves every later chunk late, moves
// it once the chunks have come that late for lateHold.
func TestClockRidesOutStalls(t *testing.T) {
	t0 := time.Unix(1000, 0)
	frame := int64(Rate / 50)
	var c clock
	pos := int64(0)
	// A chunk every 20 ms, 10 ms late by the network.
	due := func(p int64) time.Time { return t0.Add(samples(p) + 10*time.Millisecond) }
	// deliver hands over the chunks up to position to, all at at, and
	// says how far off their due time the clock dated them at worst, as
	// each came (the suppressor dates a chunk's hops as it takes it).
	deliver := func(to int64, at time.Time) (worst time.Duration) {
		for pos < to {
			pos += frame
			c.stamp(pos, at)
			worst = max(worst, c.at(pos).Sub(due(pos)).Abs())
		}
		return worst
	}
	for range 50 {
		deliver(pos+frame, due(pos+frame))
	}
	// 300 ms stalled: what came due then is handed over at its end. The
	// chunks less than lateGap late move the clock a hundredth of the way
	// each, as a drifting sender's do: under a hop in all.
	held := pos + 15*frame
	if off := deliver(held, due(held)); off > 5*time.Millisecond {
		t.Errorf("audio held by a stall of 300 ms dated up to %v off", off)
	}
	for range 20 {
		if off := deliver(pos+frame, due(pos+frame)); off != 0 {
			t.Fatalf("audio after a stall dated %v off", off)
		}
	}
	// 200 ms lost: every chunk after it comes 200 ms later than its
	// position says.
	lost := 200 * time.Millisecond
	for i := range 20 {
		deliver(pos+frame, due(pos+frame).Add(lost))
		off := c.at(pos).Sub(due(pos).Add(lost))
		if settled := time.Duration(i) * 20 * time.Millisecond; settled >= lateHold && off != 0 {
			t.Fatalf("%v after audio was lost the clock dates audio %v off its arrival", settled, off)
		}
	}
}
