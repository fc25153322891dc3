package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// echoPath is how a user's phone on speaker, without an echo canceller,
// sends the bot's voice back: what the user hears comes back into the
// microphone delay later, gain quieter (in dB, negative), coloured by a
// room. The zero path is no echo: a headset, or a canceller that works.
type echoPath struct {
	delay time.Duration
	gain  float64
}

// parseEcho reads -echo: off, or a delay and a gain as "150ms,-10dB".
func parseEcho(s string) (echoPath, error) {
	if s == "" || s == "off" {
		return echoPath{}, nil
	}
	d, g, ok := strings.Cut(s, ",")
	delay, err := time.ParseDuration(strings.TrimSpace(d))
	if !ok || err != nil || delay <= 0 || delay > time.Second {
		return echoPath{}, fmt.Errorf("-echo %q: want off or a delay up to 1s and a gain, as 150ms,-10dB", s)
	}
	gain, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(strings.ToLower(g)), "db"), 64)
	if err != nil || gain > 0 {
		return echoPath{}, fmt.Errorf("-echo %q: the gain is in dB, 0 or below, as -10dB", s)
	}
	return echoPath{delay: delay, gain: gain}, nil
}

func (p echoPath) on() bool { return p.delay > 0 }

func (p echoPath) String() string {
	if !p.on() {
		return "off"
	}
	return fmt.Sprintf("%v, %gdB", p.delay, p.gain)
}

// The room: a speaker and a wall. The speaker's sound is low-passed at
// about 3.5 kHz (a one-pole filter's coefficient at 48 kHz), and comes
// once more off the wall 11 ms later, 9 dB quieter: what the browser test
// of the web client plays back too.
const (
	roomLowpass = 0.37
	wallLag     = 11 * opusRate / 1000
	wallGain    = 0.355
	// echoSlack is how far behind its delay the speaker may fall when the
	// bot's audio comes in bunches before it skips a frame.
	echoSlack = 60 * time.Millisecond
)

// echoLine is a user's speakerphone. The ear writes into it what it
// receives from the bot; the speaker plays it on the microphone's clock,
// a frame every 20 ms, and the microphone hears it through the room. A
// sound that comes after silence starts to play delay after it arrived,
// and the rest of it follows frame after frame, as a sound card plays it
// whatever the jitter of its arrival: the echo's delay holds for the
// whole of a sound, as a phone's does.
type echoLine struct {
	path echoPath
	gain float64
	// most is how many samples may wait to be played.
	most int

	mu      sync.Mutex
	chunks  []echoChunk
	queued  int
	playing bool

	// The room's state, the microphone's alone.
	low  float64
	wall [2 * wallLag]float64
	at   int
	buf  []int16
	// next is the RTP timestamp that follows the last frame written, once
	// one was (stamped).
	next    uint32
	stamped bool
}

type echoChunk struct {
	at  time.Time
	pcm []int16
}

func newEchoLine(p echoPath) *echoLine {
	return &echoLine{path: p, gain: math.Pow(10, p.gain/20), most: int((p.delay + echoSlack) * opusRate / time.Second),
		buf: make([]int16, 0, frameSamples)}
}

// write takes what arrived at, a frame whose RTP timestamp is ts. A
// frame stamped past the end of the last one follows a gap the bot left
// in sending: while the speaker still plays what came before, the gap is
// played as silence, as a phone's playout keeps it, and the sound's echo
// keeps its delay. Squeezed out, it brought the echo of the next sound
// up to 140 ms sooner than the bot's voice had sent it.
func (l *echoLine) write(p []int16, at time.Time, ts uint32) {
	c := echoChunk{at: at, pcm: append([]int16(nil), p...)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stamped && ts == l.next && l.queued == 0 && !l.playing {
		// The speaker ran dry in the middle of a sound: the rest starts
		// anew, delay after now, and its echo comes that much later.
		echoMoves.dry.Add(1)
	}
	if gap := min(int(int32(ts-l.next)), l.most); l.stamped && gap > 0 && l.queued > 0 {
		l.chunks = append(l.chunks, echoChunk{at: at, pcm: make([]int16, gap)})
		l.queued += gap
	}
	l.next, l.stamped = ts+uint32(len(p)), true
	l.chunks = append(l.chunks, c)
	l.queued += len(p)
}

// take is what the speaker plays in the microphone's frame captured by
// now. A microphone woken late takes its frames after the ear wrote what
// came later (captureClock), so only what had arrived by now is played,
// or counts as waiting.
func (l *echoLine) take(now time.Time) []int16 {
	l.buf = l.buf[:0]
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.playing {
		if len(l.chunks) == 0 || l.chunks[0].at.Add(l.path.delay).After(now) {
			return l.buf
		}
		l.playing = true
	}
	if l.arrived(now) > l.most {
		l.skip(frameSamples)
		echoMoves.skipped.Add(1)
	}
	for len(l.buf) < frameSamples && len(l.chunks) > 0 && !l.chunks[0].at.After(now) {
		c := &l.chunks[0]
		n := min(frameSamples-len(l.buf), len(c.pcm))
		l.buf = append(l.buf, c.pcm[:n]...)
		l.drop(n)
	}
	// The sound ended, or the rest of it is late: what comes next starts
	// anew, delay after it arrives.
	l.playing = l.arrived(now) > 0
	return l.buf
}

// arrived is how many of the samples waiting to be played had come by
// now.
func (l *echoLine) arrived(now time.Time) int {
	n := 0
	for _, c := range l.chunks {
		if c.at.After(now) {
			break
		}
		n += len(c.pcm)
	}
	return n
}

// echoMoves counts, over all the users' speakers, what moves an echo
// against the bot's voice as sent: a frame skipped to keep the delay
// after the bot's audio came in a bunch (the echo 20 ms sooner), and a
// sound whose rest came too late to follow on (the echo later). The
// suppressor locks on one delay, and a moved echo may leak until it
// follows.
var echoMoves moves

type moves struct{ skipped, dry atomic.Int64 }

// take returns the counts so far and starts over, as lateness.take does.
func (m *moves) take() (skipped, dry int64) { return m.skipped.Swap(0), m.dry.Swap(0) }

// skip drops n samples from the front.
func (l *echoLine) skip(n int) {
	for n > 0 && len(l.chunks) > 0 {
		k := min(n, len(l.chunks[0].pcm))
		l.drop(k)
		n -= k
	}
}

// drop removes n samples of the first chunk.
func (l *echoLine) drop(n int) {
	c := &l.chunks[0]
	c.pcm = c.pcm[n:]
	l.queued -= n
	if len(c.pcm) == 0 {
		l.chunks = l.chunks[1:]
	}
}

// mix adds the echo due at now into the microphone's frame, in place.
func (l *echoLine) mix(frame []int16, now time.Time) {
	played := l.take(now)
	for i := range frame {
		var x float64
		if i < len(played) {
			x = float64(played[i])
		}
		l.low += roomLowpass * (x - l.low)
		l.wall[l.at] = l.low
		back := l.wall[(l.at+len(l.wall)-wallLag)%len(l.wall)]
		l.at = (l.at + 1) % len(l.wall)
		v := float64(frame[i]) + l.gain*(l.low+wallGain*back)
		frame[i] = int16(max(math.MinInt16, min(math.MaxInt16, v)))
	}
}
