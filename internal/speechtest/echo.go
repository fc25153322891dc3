package speechtest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gopkg.in/hraban/opus.v2"
)

// EchoRate is the rate of the microphone audio the echo helpers make:
// the voice stage's input rate.
const EchoRate = 16000

// echoFrame is a microphone's 20 ms at EchoRate.
const echoFrame = EchoRate / 50

// EchoPath is how a speakerphone without an echo canceller sends the
// agent's voice back: Delay late (a multiple of 20 ms), GainDB louder
// (negative: quieter), through a small room.
type EchoPath struct {
	Delay  time.Duration
	GainDB float64
}

// Of is the echo of the agent's audio (at rate) as a microphone track
// brings it back, at EchoRate on the agent's timeline (sample i is at
// the time of the agent's i/EchoRate s), through Line; its RMS is GainDB
// from the agent's.
func (p EchoPath) Of(t testing.TB, agent []int16, rate int) []int16 {
	t.Helper()
	back, scale := p.run(t, agent, rate, 1, nil)
	for i, v := range back {
		back[i] = clip(float64(v) * scale)
	}
	return back
}

// Over is what the speakerphone's microphone sends when it hears near
// too, the user's side at EchoRate (the room's noise, the user): the
// echo as Of makes it, with near added before the client's encoder, so
// that the two are Opus-coded together, as a real microphone's are.
func (p EchoPath) Over(t testing.TB, agent []int16, rate int, near []int16) []int16 {
	t.Helper()
	_, scale := p.run(t, agent, rate, 1, nil)
	mic, _ := p.run(t, agent, rate, scale, near)
	return mic
}

// run streams the agent's audio through Line, its gain scaled by gain
// and near added before the client's encoder, and returns the
// microphone's audio and the scale that brings the echo to GainDB.
func (p EchoPath) run(t testing.TB, agent []int16, rate int, gain float64, near []int16) ([]int16, float64) {
	t.Helper()
	line := p.Line(t, rate)
	line.gain *= gain
	n := rate / 50
	var back []int16
	for i, k := 0, 0; i < len(agent)+int(p.Delay)*rate/int(time.Second)+n || k < len(near); i, k = i+n, k+echoFrame {
		back = append(back, line.frameOver(agent[min(i, len(agent)):min(i+n, len(agent))], near[min(k, len(near)):min(k+echoFrame, len(near))])...)
	}
	lead := int(p.Delay * EchoRate / time.Second)
	return back, RMS(resampleTo(agent, rate)) * math.Pow(10, p.GainDB/20) / RMS(back[lead:])
}

// EchoLine is an EchoPath as a stream, frame by frame: the agent's audio
// Opus-coded as the bot's track sends it (CELT, 40 kbit/s, complexity
// 5), played into a room (three reflections within 28 ms and a one-pole
// lowpass at 3 kHz), GainDB from the room's direct sound and Delay late,
// then Opus-coded as a client sends its microphone (VoIP) and decoded.
type EchoLine struct {
	t          testing.TB
	rate       int
	bot, user  *opus.Encoder
	botDec     *opus.Decoder
	userDec    *opus.Decoder
	gain       float64
	past       []float64 // the room's input, a ring, for its reflections
	pos        int
	lowpass    float64
	late       [][]int16 // frames on their way, Delay of them
	packet     []byte
	frame, out []int16
}

// Line makes the stream of the agent's audio at rate.
func (p EchoPath) Line(t testing.TB, rate int) *EchoLine {
	t.Helper()
	bot, err := opus.NewEncoder(rate, 1, opus.AppRestrictedLowdelay)
	if err == nil {
		err = bot.SetComplexity(5)
	}
	if err == nil {
		err = bot.SetBitrate(40000)
	}
	user, err2 := opus.NewEncoder(EchoRate, 1, opus.AppVoIP)
	botDec, err3 := opus.NewDecoder(EchoRate, 1)
	userDec, err4 := opus.NewDecoder(EchoRate, 1)
	for _, e := range []error{err, err2, err3, err4} {
		if e != nil {
			t.Fatal(e)
		}
	}
	l := &EchoLine{t: t, rate: rate, bot: bot, user: user, botDec: botDec, userDec: userDec,
		gain: math.Pow(10, p.GainDB/20) / 2, past: make([]float64, 449), packet: make([]byte, 1500),
		frame: make([]int16, rate/50), out: make([]int16, echoFrame)}
	for range int(p.Delay / (20 * time.Millisecond)) {
		l.late = append(l.late, make([]int16, echoFrame))
	}
	return l
}

// Frame takes the agent's next 20 ms (padded with silence: nil is a
// frame not played) and returns the microphone's next 20 ms.
func (l *EchoLine) Frame(agent []int16) []int16 { return l.frameOver(agent, nil) }

// frameOver is Frame for a microphone that also hears near, the user's side
// of the next 20 ms at EchoRate.
func (l *EchoLine) frameOver(agent, near []int16) []int16 {
	clear(l.frame)
	copy(l.frame, agent)
	played := l.trip(l.bot, l.botDec, l.frame)
	room := make([]int16, len(played))
	a := math.Exp(-2 * math.Pi * 3000 / EchoRate)
	ago := func(n int) float64 { return l.past[(l.pos-n+len(l.past))%len(l.past)] }
	for i, v := range played {
		l.pos = (l.pos + 1) % len(l.past)
		l.past[l.pos] = float64(v)
		x := ago(0) + 0.5*ago(80) + 0.3*ago(240) + 0.2*ago(448)
		l.lowpass = a*l.lowpass + (1-a)*x
		room[i] = clip(l.lowpass * l.gain)
	}
	l.late = append(l.late, room)
	next := l.late[0]
	l.late = l.late[1:]
	for i, v := range near {
		next[i] = clip(float64(next[i]) + float64(v))
	}
	return l.trip(l.user, l.userDec, next)
}

// trip encodes one frame with enc and decodes it at EchoRate.
func (l *EchoLine) trip(enc *opus.Encoder, dec *opus.Decoder, frame []int16) []int16 {
	size, err := enc.Encode(frame, l.packet)
	if err != nil {
		l.t.Fatal(err)
	}
	n, err := dec.Decode(l.packet[:size], l.out)
	if err != nil {
		l.t.Fatal(err)
	}
	return append([]int16(nil), l.out[:n]...)
}

func clip(v float64) int16 { return int16(max(-32768, min(32767, math.Round(v)))) }

// resampleTo is pcm at EchoRate, by linear interpolation: enough to
// measure a level.
func resampleTo(pcm []int16, rate int) []int16 {
	if rate == EchoRate || len(pcm) == 0 {
		return pcm
	}
	out := make([]int16, len(pcm)*EchoRate/rate)
	for i := range out {
		pos := float64(i) * float64(rate) / EchoRate
		j := int(pos)
		f := pos - float64(j)
		out[i] = int16((1-f)*float64(pcm[j]) + f*float64(pcm[min(j+1, len(pcm)-1)]))
	}
	return out
}

// Mix adds b into a from sample at on, gainDB louder, growing a as
// needed.
func Mix(a, b []int16, at int, gainDB float64) []int16 {
	if need := at + len(b); need > len(a) {
		a = append(a, make([]int16, need-len(a))...)
	}
	g := math.Pow(10, gainDB/20)
	for i, v := range b {
		a[at+i] = clip(float64(a[at+i]) + g*float64(v))
	}
	return a
}

// LevelDB is how much louder (RMS) b is than a, at rates ra and rb.
func LevelDB(a []int16, ra int, b []int16, rb int) float64 {
	return 20 * math.Log10(RMS(resampleTo(b, rb))/RMS(resampleTo(a, ra)))
}

// Replay plays a call in time: agent is what the bot's track sent at
// rate from t0 on, in 20 ms frames, each handed to sent at its time; mic
// is the microphone's EchoRate audio on the same timeline, handed to
// hear in 20 ms chunks at the times they come, which is after their end
// by a network's jitter of up to 20 ms. Everything the track sent by a
// chunk's arrival was handed to sent before it.
func Replay(agent []int16, rate int, mic []int16, t0 time.Time, sent func(frame []int16, rate int, at time.Time), hear func(chunk []int16, at time.Time)) {
	jitter := rand.New(rand.NewPCG(1, 2))
	out := rate / 50
	next := 0
	for i := 0; i+echoFrame <= len(mic); i += echoFrame {
		at := t0.Add(time.Duration(i+echoFrame) * time.Second / EchoRate).Add(time.Duration(jitter.IntN(20)) * time.Millisecond)
		for ; next < len(agent); next += out {
			sentAt := t0.Add(time.Duration(next) * time.Second / time.Duration(rate))
			if sentAt.After(at) {
				break
			}
			sent(agent[next:min(next+out, len(agent))], rate, sentAt)
		}
		hear(mic[i:i+echoFrame], at)
	}
}
