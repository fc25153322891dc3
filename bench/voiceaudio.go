package main

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

// The voice benchmark's users speak these, in turn; the speech servers'
// recogniser is limited to them, as a deployment's vocabulary would not
// be, so that recognition is fast enough for a hundred speakers on two
// cores. The last one is said over the agent to interrupt it.
var voiceQuestions = []string{
	"what is the weather like today",
	"tell me something about the moon",
	"how do I make a cup of tea",
	"what is a good book to read",
	"why is the sky blue",
}

const interruption = "wait stop and tell me about the stars"

// opusRate is WebRTC's Opus clock: frames are made and heard at it, so
// that neither side of a user resamples.
const opusRate = 48000

const (
	frame        = 20 * time.Millisecond
	frameSamples = opusRate / 50
)

// sound is audio encoded once, as 20 ms Opus frames, and kept as the
// same frames of PCM for a microphone that mixes an echo into it: a
// hundred users cannot each afford an Opus encoder on two cores shared
// with the bot, unless their microphones pick up the bot. Frames of pcm
// may be nil (silence), and all of it when a user never echoes.
type sound struct {
	frames [][]byte
	pcm    [][]int16
}

// encode makes a sound of pcm.
func encode(pcm []int16, dtx bool) (sound, error) {
	f, err := speechtest.Opus(pcm, opusRate, dtx)
	if err != nil {
		return sound{}, err
	}
	s := sound{frames: f, pcm: make([][]int16, len(f))}
	for i := range s.pcm {
		s.pcm[i] = pcm[i*frameSamples : (i+1)*frameSamples]
	}
	return s, nil
}

// phrase is a question rendered once and encoded once.
type phrase struct {
	text string
	sound
}

// voiceSounds are what the users say, and what their microphones send
// between: with dtx, a client in Opus DTX in a quiet room (a packet every
// 400 ms or so, as LiveKit's clients publish a microphone); without, a
// second of a quiet room's noise that never stops (a client without DTX,
// or a room too noisy for it).
type voiceSounds struct {
	questions []phrase
	over      phrase
	between   sound
	dtx       bool
}

// voiceAudio renders the phrases with espeak-ng and encodes them.
func voiceAudio(dtx bool) (*voiceSounds, error) {
	say := func(text string) (phrase, error) {
		pcm, err := speechtest.Speak(text, 140, opusRate)
		if err != nil {
			return phrase{}, err
		}
		s, err := encode(speechtest.Trim(pcm), dtx)
		return phrase{text: text, sound: s}, err
	}
	v := &voiceSounds{dtx: dtx}
	for _, q := range voiceQuestions {
		p, err := say(q)
		if err != nil {
			return nil, err
		}
		v.questions = append(v.questions, p)
	}
	var err error
	if v.over, err = say(interruption); err != nil {
		return nil, err
	}
	if dtx {
		// Digital silence, because libopus (1.3) never goes into DTX on
		// white noise, even at -90 dBFS; a browser's noise suppression
		// leaves a quiet room close to it. A minute of it, so that the
		// encoder's way into DTX is not repeated every second; its PCM
		// is nil, silence.
		v.between.frames, err = speechtest.Opus(speechtest.Silence(60_000, opusRate), opusRate, true)
		v.between.pcm = make([][]int16, len(v.between.frames))
	} else {
		v.between, err = encode(speechtest.Noise(1000, opusRate, 7), false)
	}
	return v, err
}

// mic is a user's microphone track: what it sends between phrases, and
// the phrases it is told to say, 20 ms at a time at real-time pace. With
// an echo, it hears the bot too, and encodes what it sends as it goes.
type mic struct {
	track   *webrtc.TrackLocalStaticRTP
	between sound // a nil frame is not sent
	echo    *echoLine
	enc     *speechtest.Encoder
	pcm     []int16

	mu  sync.Mutex
	cur *utterance
	// rest is the next frame of between, counted from the end of the
	// last phrase.
	rest int
}

// phoneComplexity is the Opus complexity libwebrtc uses on phones.
const phoneComplexity = 5

// newMic is a microphone that sends s.between between phrases and, when
// echo is on, the bot's voice as it comes back; its track is set before
// it runs.
func newMic(s *voiceSounds, echo echoPath) (*mic, error) {
	m := &mic{between: s.between}
	if !echo.on() {
		return m, nil
	}
	enc, err := speechtest.NewEncoder(opusRate, s.dtx)
	if err == nil {
		err = enc.SetComplexity(phoneComplexity)
	}
	if err != nil {
		return nil, err
	}
	m.echo, m.enc, m.pcm = newEchoLine(echo), enc, make([]int16, frameSamples)
	return m, nil
}

// utterance is a phrase being said: when its first and last frames went
// out, and done closed once the last has.
type utterance struct {
	sound
	next         int
	onset, ended time.Time
	done         chan struct{}
}

// say starts saying p after what the mic is saying now, which it replaces.
func (m *mic) say(p phrase) *utterance {
	u := &utterance{sound: p.sound, done: make(chan struct{})}
	m.mu.Lock()
	m.cur = u
	m.mu.Unlock()
	return u
}

// run sends a frame every 20 ms until ctx ends. It writes RTP itself
// because a sample track takes a frame not sent for a lost packet: the
// RTP clock runs on over frames not sent while sequence numbers stay
// continuous, which is how a receiver tells DTX from loss.
func (m *mic) run(ctx context.Context) {
	c := newCaptureClock(time.Now())
	tick := time.NewTicker(frame)
	defer tick.Stop()
	seq, ts := uint16(rand.Uint32()), rand.Uint32()
	sent := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		micFrames.note(now.Sub(c.next))
		for _, slot := range c.due(now) {
			s, i := m.next(now)
			data := m.packet(s, i, slot)
			if data != nil {
				// The first packet after a gap starts a talkspurt (RFC 3551 §4.1).
				_ = m.track.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, Marker: !sent, SequenceNumber: seq, Timestamp: ts}, Payload: data})
				seq++
			}
			sent = data != nil
			ts += opusRate / 50
		}
	}
}

// next is the microphone's next frame, sent at now: the phrase's being
// said, or what it sends between phrases.
func (m *mic) next(now time.Time) (s sound, i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.cur
	if u == nil {
		i = m.rest % len(m.between.frames)
		m.rest++
		return m.between, i
	}
	if u.next == 0 {
		u.onset = now
	}
	s, i = u.sound, u.next
	if u.next++; u.next == len(u.frames) {
		u.ended = now.Add(frame)
		m.cur = nil
		close(u.done)
		m.rest = 0
	}
	return s, i
}

// captureClock is a microphone's sound card: it captures a frame every
// 20 ms whether or not the process that sends them wakes in time, and a
// process woken late sends every frame captured since, at once, as a
// loaded phone does. Its speaker, on the same clock, then plays every
// frame, and the echo keeps its delay. A frame a wake-up, with a ticker
// that drops the ticks a starved process misses, left the speaker a
// frame behind for each one missed, and its catching up moved the echo
// 20 ms at a time, which no phone's sound card does.
type captureClock struct {
	next  time.Time
	slots []time.Time
}

// maxCapture is how much a sound card keeps for a process that does not
// come to read it; a process stopped for longer loses the rest.
const maxCapture = time.Second

func newCaptureClock(start time.Time) *captureClock {
	return &captureClock{next: start.Add(frame)}
}

// due is when each frame captured by now and not sent yet was complete,
// oldest first; the slice is reused by the next call.
func (c *captureClock) due(now time.Time) []time.Time {
	if now.Sub(c.next) > maxCapture {
		c.next = now.Add(-maxCapture)
	}
	c.slots = c.slots[:0]
	for ; !c.next.After(now); c.next = c.next.Add(frame) {
		c.slots = append(c.slots, c.next)
	}
	return c.slots
}

// micFrames is how late the users' microphones woke to send a frame,
// after it was captured (captureClock). The report says how often, so
// that figures under load say whether they are the bot's or the bench's.
var micFrames lateness

// lateness counts wake-ups and how late they came after a frame was due.
type lateness struct {
	mu          sync.Mutex
	wakes, late int
	most        time.Duration
}

// lateBy is how late a wake-up may come and not count as late: a frame.
const lateBy = frame

func (l *lateness) note(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakes++
	if d > lateBy {
		l.late++
	}
	l.most = max(l.most, d)
}

// take returns the counts so far and starts over.
func (l *lateness) take() (wakes, late int, most time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wakes, late, most = l.wakes, l.late, l.most
	l.wakes, l.late, l.most = 0, 0, 0
	return wakes, late, most
}

// packet is what the microphone sends of the frame captured by at:
// frame i of s as encoded once, or, with an echo, mixed with the echo
// the speaker played then and encoded now.
func (m *mic) packet(s sound, i int, at time.Time) []byte {
	if m.echo == nil {
		return s.frames[i]
	}
	if p := s.pcm[i]; p != nil {
		copy(m.pcm, p)
	} else {
		clear(m.pcm)
	}
	m.echo.mix(m.pcm, at)
	data, err := m.enc.Encode(m.pcm)
	if err != nil {
		return nil
	}
	return data
}

// ear hears the bot's track: when it was loud, and whether with the
// thinking cue's two partials or with speech.
type ear struct {
	// echo, when the user's microphone picks up the bot, hears all of it.
	echo *echoLine

	mu    sync.Mutex
	heard []heardFrame
	// spoke is when the bot was first heard speaking.
	spoke time.Time
}

type heardFrame struct {
	at  time.Time
	cue bool
}

// keepHeard is how much of the bot's loud audio an ear remembers.
const keepHeard = 90 * time.Second

// write takes a frame of the bot's voice as decoded, and the RTP
// timestamp of its packet.
func (e *ear) write(p media.PCM16Sample, ts uint32) error {
	now := time.Now()
	if e.echo != nil {
		e.echo.write(p, now, ts)
	}
	var sum float64
	for _, v := range p {
		sum += float64(v) * float64(v)
	}
	if math.Sqrt(sum/float64(max(1, len(p)))) <= 300 {
		return nil
	}
	cue := (goertzel(p, 392)+goertzel(p, 588))/(sum*float64(len(p))/2) > 0.6
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.heard) > 0 && now.Sub(e.heard[0].at) > keepHeard {
		i := 0
		for i < len(e.heard) && now.Sub(e.heard[i].at) > keepHeard/2 {
			i++
		}
		e.heard = append(e.heard[:0], e.heard[i:]...)
	}
	e.heard = append(e.heard, heardFrame{at: now, cue: cue})
	if e.spoke.IsZero() && !cue {
		e.spoke = now
	}
	return nil
}

// goertzel is the power of frequency f in p at the Opus rate.
func goertzel(p []int16, f float64) float64 {
	w := 2 * math.Pi * f / opusRate
	c := 2 * math.Cos(w)
	var s1, s2 float64
	for _, v := range p {
		s1, s2 = float64(v)+c*s1-s2, s1
	}
	return s1*s1 + s2*s2 - c*s1*s2
}

// first is the first loud frame after t that is answer (speech, not the
// cue) or, with either, the cue too.
func (e *ear) first(t time.Time, either bool) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.heard {
		if f.at.After(t) && (either || !f.cue) {
			return f.at, true
		}
	}
	return time.Time{}, false
}

// quietSince is when the bot's track went quiet, if it has been quiet
// for at least gap at now and was last loud after t: a silence that began
// before t is not one t caused.
func (e *ear) quietSince(t time.Time, gap time.Duration) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.heard) == 0 {
		return time.Time{}, false
	}
	last := e.heard[len(e.heard)-1].at
	if last.Before(t) || time.Since(last) < gap {
		return time.Time{}, false
	}
	return last.Add(frame), true
}

// silentFor says whether the track has been quiet for d.
func (e *ear) silentFor(d time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.heard) == 0 || time.Since(e.heard[len(e.heard)-1].at) >= d
}

// poll waits for cond, looking every 10 ms, up to timeout.
func poll(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || !sleepCtx(ctx, 10*time.Millisecond) {
			return false
		}
	}
	return true
}
