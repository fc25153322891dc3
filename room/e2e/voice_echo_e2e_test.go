package e2e

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// stopPhrase is a user talking over the bot for real.
const stopPhrase = "Stop, tell me about Paris instead."

// A client on a speakerphone without an echo canceller, over a real
// livekit-server: it plays the bot's voice as it receives it, and its
// microphone hears it again 100 ms later at −10 dB, or 300 ms later at
// −3 dB, through a small room. With the stage's defaults, the whole
// answer is heard and nothing paused it (its turn report has no barge-in;
// no interruption, false interruption or noise was counted), its echo
// was counted as echo, and it is stored complete. Then the same client
// says "Stop, tell me about Paris instead." over the next answer and its
// echo: the bot paused at the onset, before the words made it an
// interruption, and the question is recognised and answered.
// BenchmarkEchoOverLiveKit runs all four settings, and the first in a
// noisy room.
func TestEchoOverLiveKit(t *testing.T) {
	testenv.RealTimeAlone(t)
	lk := testenv.StartLiveKit(t)
	for _, e := range []echoSetting{echoSettings[0], echoSettings[3]} {
		t.Run(e.String(), func(t *testing.T) {
			c := storyClient(t, lk, e.conv("conv_echo"), &e)
			wholeOverEcho(t, c)
			interruptedOverEcho(t, c)
		})
	}
}

// wholeOverEcho: an answer whose echo comes back all through it is heard
// whole, and nothing paused it.
func wholeOverEcho(t *testing.T, c *talkOverClient) {
	t.Helper()
	a := c.answer(t, nil)
	if p := a.pauses(); len(p) > 0 || a.report.Interrupted {
		t.Fatalf("the bot's own echo paused it %d times (%v into the answer at the client); interrupted: %v",
			len(p), pauseTimes(p, a.from), a.report.Interrupted)
	}
	for _, o := range []string{"interruption", "false_interruption", "noise"} {
		if n := c.obs.count(o); n != 0 {
			t.Fatalf("alicia_voice_talk_over_total{outcome=%q} is %v over the echo alone", o, n)
		}
	}
	c.heardWhole(t, a)
	echo := c.obs.count("echo")
	t.Logf("an answer of %v over its echo; %v stretches of echo rejected", a.span().Round(time.Millisecond), echo)
	if echo == 0 {
		t.Fatal("nothing was counted as echo")
	}
}

// interruptedOverEcho: a real question over an answer and its echo
// pauses the bot at its onset, stops it, and is answered.
func interruptedOverEcho(t *testing.T, c *talkOverClient) {
	t.Helper()
	stop := trimmed(speechtest.Render(t, stopPhrase, 140, voice.InputRate))
	id, asked := c.ask(storyQuestion)
	c.rec.waitMidVoice(t, asked, 150, "the second answer")
	onset, end := c.feed.say(t.Context(), t, stop)
	stopped := c.obs.wait(t.Context(), t, "interruption", "echo")
	// The next answer cannot begin before the question has ended.
	silent := c.rec.lastLoud(end)
	cut, _ := c.turns.wait(t, "the cut answer's report", func(r pipeline.TurnReport) bool { return r.UserMessageID == id })
	pauses := bargeIns(cut)
	t.Logf("the question over the echo: onset → silence at the client %v; → the interruption decided %v; the stage's pauses %v",
		max(0, silent.Sub(onset)).Round(time.Millisecond), stopped.Sub(onset).Round(time.Millisecond), pauseTimes(pauses, onset))
	// One pause, the question's, made at its onset: before its words
	// were known, and heard so at the client.
	if len(pauses) != 1 || pauses[0].End.Before(onset) || !pauses[0].End.Before(stopped) || !silent.Before(stopped) {
		t.Fatalf("the bot paused %d times, the question's onset at 0 and its interruption at %v; the client heard it until %v",
			len(pauses), stopped.Sub(onset), silent.Sub(onset))
	}
	hist := storedUntil(t.Context(), t, c.store, c.conv, "the question over the echo answered", func(h []storage.Entry) bool {
		return len(h) >= 6 && h[3].Status == storage.StatusStopped
	})
	asked2 := hist[4]
	got := c.u.until("the answer to the question over the echo", func(g []*wire.Envelope) bool {
		return len(spokenSentences(g, hist[5].ID)) > 0
	})
	first := spokenSentences(got, hist[5].ID)[0]
	answered := c.rec.waitLoud(t, end, 1, "the answer to the question over the echo")
	t.Logf("heard over the echo as %q; its answer heard %v after its end", asked2.Content, answered.Sub(end).Round(time.Millisecond))
	if speechtest.WER(stopPhrase, asked2.Content) > 0.2 || hist[5].PreviousID != asked2.ID || !strings.HasPrefix(first, "You said: "+asked2.Content) {
		t.Fatalf("the question %q: answer %+v, its first sentence %q", asked2.Content, hist[5], first)
	}
}

// storyClient is a client, on a speakerphone of echo e (nil: none), of
// a bot that answers with the 13.5 s story and hears "Stop, tell me
// about Paris instead." and the other questions.
func storyClient(tb testing.TB, lk *testenv.LiveKit, conv string, e *echoSetting) *talkOverClient {
	tb.Helper()
	return newTalkOverClient(tb, lk, talkOverSetup{conv: conv, answer: answerAtLength(1),
		phrases: append([]string{stopPhrase}, otherQuestions...), echo: e})
}

// pauseTimes are the pauses' onsets and ends, from t.
func pauseTimes(pauses []pipeline.Timed, t time.Time) []string {
	var out []string
	for _, p := range pauses {
		out = append(out, fmt.Sprintf("%v→%v", p.Start.Sub(t).Round(time.Millisecond), p.End.Sub(t).Round(time.Millisecond)))
	}
	return out
}

// BenchmarkEchoOverLiveKit: a speakerphone client, as TestEchoOverLiveKit's,
// at each of the four settings and the first in a noisy room, and one
// without echo. Each iteration asks
// for the story, says "Stop, tell me about Paris instead." over it,
// and hears the answer to that out, echo and all. It reports the onset of
// the question → the bot's silence at the client (ms-onset→silence) and
// → its audio paused at the stage (ms-onset→paused), medians; the pauses
// that were not the question's (echo-paused/op: over the first answer
// before the question, over the whole second); the stretches of echo
// rejected (echo-rejected/op); and how often the question was recognised
// to a word error rate of 0.2 (recognised/op). The question comes where
// TestEchoOverLiveKit's does, with the bot talking on, not near a pause
// of the answer, which the client would hear as the bot's silence. Each
// iteration takes about 23 s: run it with -benchtime Nx.
func BenchmarkEchoOverLiveKit(b *testing.B) {
	lk := testenv.StartLiveKit(b)
	stop := trimmed(speechtest.Render(b, stopPhrase, 140, voice.InputRate))
	settings := []*echoSetting{nil}
	for _, e := range echoSettings {
		settings = append(settings, &e)
	}
	settings = append(settings, &noisyRoom)
	for _, e := range settings {
		name, conv := "echo=off", "conv_bench_echo_off"
		if e != nil {
			name, conv = e.String(), e.conv("conv_bench_echo")
		}
		b.Run(name, func(b *testing.B) {
			c := storyClient(b, lk, conv, e)
			// Heard out first: the stage is then past any warm-up of its
			// first answer.
			c.answer(b, nil)
			var toSilence, toPaused []time.Duration
			var echoPaused, recognised int
			echoBefore := c.obs.count("echo")
			for b.Loop() {
				id, asked := c.ask(storyQuestion)
				c.rec.waitMidVoice(b, asked, 150, "the answer")
				c.obs.drain()
				onset, end := c.feed.say(b.Context(), b, stop)
				c.obs.wait(b.Context(), b, "interruption", "echo", "false_interruption", "noise")
				toSilence = append(toSilence, max(0, c.rec.lastLoud(end).Sub(onset)))
				cut, _ := c.turns.wait(b, "the cut answer", func(r pipeline.TurnReport) bool { return r.UserMessageID == id })
				reply, at := c.turns.wait(b, "the reply", func(r pipeline.TurnReport) bool {
					return r.UserMessageID != id && r.Start.After(onset)
				})
				c.rec.lastVoiceBy(b, at)
				for _, p := range bargeIns(cut) {
					if p.End.Before(onset) {
						echoPaused++
					} else {
						toPaused = append(toPaused, p.End.Sub(onset))
					}
				}
				echoPaused += len(bargeIns(reply))
				if speechtest.WER(stopPhrase, c.said(b, reply.UserMessageID)) <= 0.2 {
					recognised++
				}
			}
			b.ReportMetric(ms(median(toSilence)), "ms-onset→silence")
			b.ReportMetric(ms(median(toPaused)), "ms-onset→paused")
			b.ReportMetric(float64(echoPaused)/float64(b.N), "echo-paused/op")
			b.ReportMetric((c.obs.count("echo")-echoBefore)/float64(b.N), "echo-rejected/op")
			b.ReportMetric(float64(recognised)/float64(b.N), "recognised/op")
			b.Logf("onset → silence at the client: %v; → paused at the stage: %v", toSilence, toPaused)
		})
	}
}

// BenchmarkFirstAnswerInNoisyRoom: the first answer of new conversations
// on a speakerphone in the noisy room, where the suppressor must find the
// echo's path in the answer's first second, over the room's noise, or
// take the microphone for one without echo and let the rest of the
// answer's echo through. Each iteration is a new conversation, ended
// before the next, that hears its first answer out; it reports the share
// of the answers their echo paused (paused-answers/op) and the pauses an
// answer (pauses/op). About 20 s an iteration: run it with -benchtime 12x.
func BenchmarkFirstAnswerInNoisyRoom(b *testing.B) {
	lk := testenv.StartLiveKit(b)
	var paused, pauses, n int
	for b.Loop() {
		s := newScope(b)
		e := noisyRoom
		c := storyClient(s, lk, e.conv(fmt.Sprintf("conv_bench_first%d", n)), &e)
		a := c.answer(s, nil)
		n++
		if p := a.pauses(); len(p) > 0 || a.report.Interrupted {
			paused++
			pauses += len(p)
			b.Logf("answer %d: paused %d times (%v into it at the client); interrupted: %v", n, len(p), pauseTimes(p, a.from), a.report.Interrupted)
		}
		s.close()
	}
	b.ReportMetric(float64(paused)/float64(n), "paused-answers/op")
	b.ReportMetric(float64(pauses)/float64(n), "pauses/op")
}

// said is what the user was heard to say in message id, as stored.
func (c *talkOverClient) said(tb testing.TB, id string) string {
	tb.Helper()
	var text string
	storedUntil(tb.Context(), tb, c.store, c.conv, "the question stored", func(h []storage.Entry) bool {
		for _, e := range h {
			if e.ID == id {
				text = e.Content
				return true
			}
		}
		return false
	})
	return text
}

// echoSetting is how a speakerphone's microphone hears its speaker: delay
// after the client received the sound, at db against it.
type echoSetting struct {
	delay time.Duration
	db    float64
	// room is the noise of the room the speakerphone is in, which its
	// microphone's Opus codes with the echo, as a multiple of the tests'
	// quiet room's (about -55 dBFS); 0, a microphone digitally silent but
	// for the echo (a client's noise suppression).
	room int16
}

func (e echoSetting) String() string {
	s := fmt.Sprintf("delay=%v,gain=%gdB", e.delay, e.db)
	if e.room > 0 {
		s += fmt.Sprintf(",room=x%d", e.room)
	}
	return s
}

// conv is a room name for the setting.
func (e echoSetting) conv(prefix string) string {
	return fmt.Sprintf("%s_%dms_%gdB_x%d", prefix, e.delay.Milliseconds(), -e.db, e.room)
}

// echoSettings are a phone 100 or 300 ms behind what it receives, its
// echo 10 or 3 dB below what it played.
var echoSettings = []echoSetting{
	{delay: 100 * time.Millisecond, db: -10}, {delay: 100 * time.Millisecond, db: -3},
	{delay: 300 * time.Millisecond, db: -10}, {delay: 300 * time.Millisecond, db: -3},
}

// noisyRoom is the first setting in a room 9.5 dB noisier than the
// tests' quiet one, whose noise the client's Opus codes with the echo,
// and whose packets it marks as holding no voice the bot hears as
// silence.
var noisyRoom = echoSetting{delay: 100 * time.Millisecond, db: -10, room: 3}

// speakerphone is a client that plays the bot's voice on a speaker its
// own microphone hears: it records the voice, as every test client does,
// and plays it down the echo path.
type speakerphone struct {
	*voiceTape
	echo *echoPath
}

func (s speakerphone) WriteSample(p media.PCM16Sample) error {
	s.echo.play(p)
	return s.voiceTape.WriteSample(p)
}

// echoPath is the way from a speakerphone's speaker to its microphone:
// what it receives is played from a jitter buffer and comes back delay
// later, through a small room (the direct sound and three reflections
// within 30 ms), with the highs that a room and a cheap microphone lose,
// at gain. It has no echo canceller.
type echoPath struct {
	mu sync.Mutex
	// queued is the jitter buffer: what the client received and the
	// speaker has not played yet. playing: it holds prefill or held it
	// since it last ran dry.
	queued  []int16
	playing bool
	// played is the speaker's last samples, a ring at at.
	played []float64
	at     int
	delay  int
	gain   float64
	// low is the lowpass filter's state.
	low float64
	// noise is the room's, played in a loop from noiseAt.
	noise   []int16
	noiseAt int
}

// reflections are the room's, as lags at 16 kHz and gains: 7, 17 and
// 29 ms after the direct sound.
var reflections = [...]struct {
	lag  int
	gain float64
}{{0, 1}, {112, 0.5}, {272, 0.3}, {464, 0.2}}

const (
	// roomGain keeps the reflections' sum at the direct sound's power:
	// 1/√(1+0.5²+0.3²+0.2²).
	roomGain = 0.851
	// lowpass is a one-pole filter's coefficient for about 3.5 kHz at
	// 16 kHz: 1−exp(−2π·3500/16000).
	lowpass = 0.747
	// maxQueued is the speaker's playout buffer, 200 ms: what comes
	// beyond it is late, and a device drops it.
	maxQueued = voice.InputRate / 5
	// prefill is what the jitter buffer holds before it plays, at the
	// start and whenever it ran dry: 60 ms, so that a packet late by less
	// leaves the echo's delay where it was, as a device's playout does.
	// Without it a packet late by one frame moved the echo 20 ms later
	// for good, and a neighbour's load made the suppressor lose it.
	prefill = voice.InputRate * 60 / 1000
)

// newEchoPath is the path for s; the jitter buffer's prefill is part of
// the setting's delay.
func newEchoPath(s echoSetting) *echoPath {
	delay := int(s.delay.Seconds()*voice.InputRate) - prefill
	p := &echoPath{
		played: make([]float64, delay+reflections[len(reflections)-1].lag+1),
		delay:  delay,
		gain:   roomGain * math.Pow(10, s.db/20),
	}
	if s.room > 0 {
		p.noise = speechtest.Noise(10_000, voice.InputRate, 3)
		for i := range p.noise {
			p.noise[i] *= s.room
		}
	}
	return p
}

// play queues what the client received for its speaker.
func (p *echoPath) play(pcm []int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queued = append(p.queued, pcm...)
	if over := len(p.queued) - maxQueued; over > 0 {
		p.queued = append(p.queued[:0], p.queued[over:]...)
	}
}

// over is a 20 ms frame of the microphone with the speaker's next 20 ms
// played into it; frame (what the user says, up to 20 ms) is left as it
// is.
func (p *echoPath) over(frame []int16) []int16 {
	out := make([]int16, voice.FrameSamples)
	copy(out, frame)
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.played)
	p.playing = p.playing && len(p.queued) > 0 || len(p.queued) >= prefill
	for i := range out {
		var x float64
		if p.playing && i < len(p.queued) {
			x = float64(p.queued[i])
		}
		p.played[p.at] = x
		var y float64
		for _, r := range reflections {
			y += r.gain * p.played[(p.at-p.delay-r.lag+n)%n]
		}
		p.low += lowpass * (y - p.low)
		p.at = (p.at + 1) % n
		v := float64(out[i]) + p.gain*p.low
		if p.noise != nil {
			v += float64(p.noise[p.noiseAt])
			p.noiseAt = (p.noiseAt + 1) % len(p.noise)
		}
		out[i] = int16(max(-32768, min(32767, v)))
	}
	if p.playing {
		p.queued = append(p.queued[:0], p.queued[min(len(p.queued), voice.FrameSamples):]...)
	}
	return out
}
