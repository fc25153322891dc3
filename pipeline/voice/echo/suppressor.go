package echo

import (
	"log/slog"
	"math"
	"time"
)

// hopTime is a hop's duration: what a Suppressor's audio comes out late
// by (Delay), the half of a window that overlap-add needs before a hop is
// complete.
const hopTime = hopDuration * time.Millisecond

// minLevel is about -60 dBFS, as the endpointer's: quieter is silence.
const minLevel = 32

// window is how long after the agent's last sound an echo of it may
// still come: the longest delay, its taps and a window.
const window = (maxLag + tapsAfter + 2) * hopDuration * time.Millisecond

// Config tunes a Suppressor.
type Config struct {
	// MinSound is how long a stretch of the microphone's sound, all of it
	// removed as echo, must be to count as rejected echo: what would have
	// been speech had it not been removed (the endpointer's MinSpeech).
	// Default 120 ms.
	MinSound time.Duration
}

// Suppressor removes the agent's voice, as ref has it, from one
// microphone's 16 kHz audio. It works only while the agent's voice could
// be coming back and the microphone is not silent; otherwise the audio
// goes through as it came, one hop late. Not safe for concurrent use.
type Suppressor struct {
	ref      *Reference
	minSound int

	clock clock
	// in is input short of a whole hop, out output not returned yet;
	// late is how many samples of silence came out first, beyond a hop.
	in, out []int16
	late    int
	// direct: the audio goes out as it comes, not a hop late, while the
	// agent is silent (active is whether it talked lately, as of the last
	// hop, lastQuiet whether that hop was quiet).
	direct, active, lastQuiet bool
	// taken is how many samples were taken into hops; prev is the last
	// hop, and prevEnergy its sum of squares.
	taken      int64
	prev       [hop]int16
	prevEnergy float64
	// ola is what the last frame adds to the next hop; plain: that frame
	// went through as it came, and its part is the hop's own samples
	// under the window's second half.
	ola   [hop]float64
	plain bool
	// floor is the microphone's noise level.
	floor noiseFloor

	mode mode
	// quietRun counts the hops in a row, while the path is unknown, that
	// the microphone stayed quiet when an echo was due; soundHops the
	// hops it was not, and unknownHops all of them with the agent
	// talking; missing the hops in a row the known path's echo was due
	// and none came.
	quietRun, soundHops, unknownHops, missing int
	stretch                                   stretch
	// talked is the hop (as taken) the user was last heard over the
	// echo; gone the last one the echo due at the locked delay was not
	// there.
	talked, gone int64
	// unsure is the last hop (as taken) the echo left unexplained for
	// doubleTalkRun of its sound, and unsureRun how many such hops in a
	// row led to it.
	unsure    int64
	unsureRun int
	// w is the analysis, made at the first hop that needs it; wants:
	// the reference keeps its audio for this microphone.
	w     *work
	wants bool
	// held: the user's speech is under way (Hold).
	held bool
}

// mode is what a Suppressor knows of the echo path.
type mode uint8

const (
	// unknown: no path found yet; the echo is bounded from above.
	unknown mode = iota
	// locked: the delay and gains are known.
	locked
	// none: this microphone carries no echo; the audio goes through.
	none
)

// The path is taken for none when, unknown, the microphone stays quiet
// for noEchoHops in a row while the agent talked 100 to 400 ms before
// (when a real echo would come); when it heard notEchoHops of sound that
// follows the agent at no delay (its best correlation under notEcho: a
// user talking over the first words of the first answer, on a headset);
// or after unknownMax hops of the agent talking without one being found.
// The known path is dropped after missingMax hops of its echo due and
// none coming (a headset plugged in).
const (
	noEchoHops        = 50
	noEchoFrom        = 10
	noEchoTo          = 40
	notEchoHops       = 40
	notEcho           = 0.5
	unknownMax        = 200
	missingMax        = 100
	defaultMinSoundMs = 120
)

type work struct {
	mic   *analyser
	refs  *refCache
	est   *estimator
	path  path
	mics  micHistory
	noise bandNoise
	drift drift
}

// NewSuppressor makes a microphone's suppressor of the agent's voice ref.
func NewSuppressor(ref *Reference, cfg Config) *Suppressor {
	if cfg.MinSound <= 0 {
		cfg.MinSound = defaultMinSoundMs * time.Millisecond
	}
	s := &Suppressor{ref: ref, minSound: int(cfg.MinSound / hopTime), plain: true, direct: true,
		floor: newNoiseFloor(), out: make([]int16, 0, 2*frame), talked: math.MinInt64 / 2, gone: math.MinInt64 / 2}
	s.keep(true) // until it knows whether the microphone echoes
	return s
}

// Close lets go of what the suppressor holds of the reference.
func (s *Suppressor) Close() { s.keep(false) }

// keep tells the reference whether this microphone needs the agent's
// audio kept.
func (s *Suppressor) keep(k bool) {
	if k != s.wants {
		s.wants = k
		s.ref.want(k)
	}
}

// Delay is how late the audio that last came out of Process is: none
// while the agent is silent, else a hop (10 ms), and less than a hop more
// if it was once handed less than a whole one.
func (s *Suppressor) Delay() time.Duration {
	if s.direct {
		return 0
	}
	return hopTime + samples(int64(s.late))
}

// PathState is what a suppressor knows of the echo path: Mode is
// unknown, locked (at Delay) or none. It is comparable, so that a change
// can be told.
type PathState struct {
	Mode  string
	Delay time.Duration
}

// Path is what the suppressor knows of the echo path now.
func (s *Suppressor) Path() PathState {
	st := PathState{Mode: [...]string{"unknown", "locked", "none"}[s.mode]}
	if s.mode == locked && s.w != nil {
		st.Delay = time.Duration(s.w.est.delay) * hopTime
	}
	return st
}

// Moved says whether the path went from one known delay, before's, to
// another: the sound the old delay left unexplained since the echo moved
// was that echo, come at the new one, and went through as if it were
// the user's, until then.
func (p PathState) Moved(before PathState) bool {
	return p.Mode == "locked" && before.Mode == "locked" && p.Delay != before.Delay
}

// LogValue is what the suppressor knows of the echo path, for a log
// line about speech it let through: whether it found the path, the
// echo's delay where it did (as Path has it), and how clearly the delay
// estimator sees it.
func (s *Suppressor) LogValue() slog.Value {
	path := s.Path()
	attrs := []slog.Attr{slog.String("path", path.Mode), slog.Bool("active", s.active)}
	if s.mode == locked {
		attrs = append(attrs, slog.Duration("delay", path.Delay))
	}
	if s.w != nil {
		e := s.w.est
		attrs = append(attrs, slog.Float64("correlation", math.Round(e.best*100)/100), slog.Float64("margin", math.Round(e.margin*100)/100))
	}
	return slog.GroupValue(attrs...)
}

// Hold says whether the microphone carries the user's speech, as the
// endpointer confirmed it, from now on: while it does, the echo path is
// not moved far on what the microphone hears (drift.go).
func (s *Suppressor) Hold(speech bool) { s.held = speech }

// Echoing reports whether the audio that last came out of Process may
// hold what is left of the agent's echo: the agent talked lately, and the
// microphone is not known to carry none.
func (s *Suppressor) Echoing() bool { return s.active && s.mode != none }

// DoubleTalk reports whether the last hop Process took was the user's
// voice over the echo: sound the echo left unexplained, as doubleTalkAt
// judges it.
func (s *Suppressor) DoubleTalk() bool { return s.active && s.talked == s.taken }

// Process removes the echo from pcm, the microphone's audio that came at
// at, in place: what comes out is Delay late. It reports whether a
// stretch of the microphone's sound, MinSound of it removed as echo, was
// completed: one report per stretch.
func (s *Suppressor) Process(pcm []int16, at time.Time) (rejected bool) {
	s.switchDelay()
	s.clock.stamp(s.taken+int64(len(s.in)+len(pcm)), at)
	s.in = append(s.in, pcm...)
	n := 0
	for ; len(s.in)-n >= hop; n += hop {
		if s.hop(s.in[n : n+hop]) {
			rejected = true
		}
	}
	s.in = s.in[:copy(s.in, s.in[n:])]
	if s.direct {
		s.out = s.out[:0] // pcm goes out as it came
		return rejected
	}
	if short := len(pcm) - len(s.out); short > 0 {
		// Audio that did not end on a hop: what comes out is that much
		// later from now on.
		s.out = append(make([]int16, short, short+len(s.out)), s.out...)
		s.late += short
	}
	k := copy(pcm, s.out)
	s.out = s.out[:copy(s.out, s.out[k:])]
	return rejected
}

// switchDelay goes a hop late when the agent starts talking, and back to
// going straight through when it has stopped: every end of the user's
// speech is found 10 ms sooner, the end of a question above all. It
// switches between chunks, on a hop, after a quiet one: the 10 ms it
// repeats or drops are the room's noise.
func (s *Suppressor) switchDelay() {
	if len(s.in) != 0 || !s.lastQuiet || s.direct != s.active {
		return
	}
	if s.direct {
		// The first hop puts out the last one again, as it came.
		s.direct, s.plain = false, true
		return
	}
	if s.plain && len(s.out) == 0 && s.late == 0 {
		s.direct = true // the last hop, not put out yet, is dropped
	}
}

// hop takes the next hop of input and puts out the one before it.
func (s *Suppressor) hop(b []int16) (rejected bool) {
	s.taken += hop
	var energy float64
	for _, v := range b {
		energy += float64(v) * float64(v)
	}
	power := (energy + s.prevEnergy) / frame
	quiet := s.quiet(power)
	processed, removed := s.suppress(b, s.clock.at(s.taken), quiet, power < minLevel*minLevel)
	if processed {
		s.emitProcessed()
	} else {
		s.emitPlain()
	}
	copy(s.prev[:], b)
	s.prevEnergy, s.lastQuiet = energy, quiet
	return s.stretch.hop(!quiet, removed && !s.direct, s.minSound)
}

// quiet: the frame ending with this hop, of mean square power, is
// silence, or no louder than the microphone's noise (6 dB over it, as the
// endpointer's margin). Powers, not decibels: this runs on every hop.
func (s *Suppressor) quiet(power float64) bool {
	s.floor.add(power)
	return power < minLevel*minLevel || power < noiseOver*s.floor.level()
}

// noiseFloor is the quietest frame of the last four or five seconds (its
// mean square), in blocks of a second: speech and its echo pause to the
// room's noise within that even when the user talks over the agent, so
// the noise is followed however long the agent talks, and within a few
// seconds of a change. It passes over the microphone's first startHops
// (100 ms), and is silence until then: a client's encoder starts with its
// lookahead's zeros, and the first hop of a room's noise, Opus-coded,
// came 8 to 10 dB under the rest. Taken for the floor, it held it there
// for five seconds; the room's noise was sound to the suppressor, which
// the echo did not explain, the delay was moved on it, and the echo's
// frames taken out were brought down to 10 dB under the room. The echo
// started speech 1 to 3 times an answer (BenchmarkEchoInNoisyRoom), and
// TestEchoLaterMidAnswer's moved echo once on an Intel Xeon VM.
//
// Frames of silence (under minLevel) are not the room's: the bot hears a
// client in DTX, and the packets a client's encoder marks as holding no
// voice, as digital silence (room/audio). With them the floor sat at
// zero, every hop of a room's noise during an answer was sound, and over
// LiveKit in a room 9.5 dB noisier than the tests' the path wandered from
// 120 to 650 ms and the echo paused the answer (TestEchoOverLiveKit). So
// the floor is the quietest frame of sound, and silence only while the
// microphone carried nothing else. On a microphone digitally silent but
// for the echo (a client's noise suppression) it is the echo's quietest
// frame, near minLevel, and the echo taken out comes down to that.
type noiseFloor struct {
	blocks [floorBlocks]float64
	cur    float64
	n      int
	// started counts the hops of the microphone's start passed over.
	started int
}

const (
	floorBlocks = 4
	startHops   = 10
)

func newNoiseFloor() noiseFloor {
	f := noiseFloor{}
	for i := range f.blocks {
		f.blocks[i] = math.Inf(1)
	}
	return f
}

func (f *noiseFloor) add(power float64) {
	if f.started < startHops {
		f.started++
		return
	}
	if f.n == 0 {
		f.cur = math.Inf(1)
	}
	if power >= minLevel*minLevel {
		f.cur = min(f.cur, power)
	}
	if f.n++; f.n == 100 {
		copy(f.blocks[1:], f.blocks[:floorBlocks-1])
		f.blocks[0], f.n = f.cur, 0
	}
}

// level is the floor; silence until the microphone's start is over, and
// while it has carried nothing but silence.
func (f *noiseFloor) level() float64 {
	if f.started < startHops {
		return minLevel * minLevel
	}
	l := math.Inf(1)
	if f.n > 0 {
		l = f.cur
	}
	for _, b := range f.blocks {
		l = min(l, b)
	}
	if math.IsInf(l, 1) {
		return minLevel * minLevel
	}
	return l
}

// emitPlain puts out the last hop as it came, finishing a processed
// frame's overlap if the last frame was one.
func (s *Suppressor) emitPlain() {
	if s.plain {
		s.out = append(s.out, s.prev[:]...)
		return
	}
	for i, v := range s.prev {
		// The window's first half over this frame's first hop.
		w := math.Sin(math.Pi * float64(i) / frame)
		s.out = append(s.out, pcm16(s.ola[i]+float64(v)*w*w))
	}
	s.plain = true
}

// emitProcessed overlaps the processed frame in the analyser's buffer
// with the last one and puts out the hop they complete.
func (s *Suppressor) emitProcessed() {
	y := s.w.mic.buf
	for i := range hop {
		prior := s.ola[i]
		if s.plain {
			w := math.Cos(math.Pi * float64(i) / frame)
			prior = float64(s.prev[i]) * w * w
		}
		s.out = append(s.out, pcm16(prior+float64(y[i])))
		s.ola[i] = float64(y[hop+i])
	}
	s.plain = false
}

func pcm16(v float64) int16 {
	return int16(max(-32768, min(32767, math.Round(v))))
}
