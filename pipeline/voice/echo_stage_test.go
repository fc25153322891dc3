package voice_test

import (
	"context"
	"iter"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/wire"
)

// speakerphone is an AudioOut that plays in real time, 20 ms a frame, as
// the room's track does, hands every frame of sound it plays to the stage
// as sent, and sends it back through an echo line into the stage's
// microphone, over a quiet room's noise; say puts a user's speech in the
// microphone too.
type speakerphone struct {
	st   *voice.Stage
	in   *voice.Input
	line *speechtest.EchoLine
	rate int

	mu     sync.Mutex
	queue  []int16
	paused bool
	pauses int
	user   []int16
	// Once armed, dry counts the frames since the queue last ran dry,
	// and drained is closed when the echo of the last one has come back.
	armed   bool
	dry     int
	drained chan struct{}
}

// arm has drained closed once what is queued has played and come back.
func (p *speakerphone) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.dry = true, 0
}

// echoBack is how many frames the echo of the last one played takes to
// come back whole: the line's 300 ms and a reflection's 28 ms.
const echoBack = 20

func (p *speakerphone) run(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	noise := speechtest.Noise(20, voice.InputRate, 5)
	n := p.rate / 50
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-tick.C:
		}
		p.mu.Lock()
		var frame []int16
		if !p.paused && len(p.queue) > 0 {
			frame = append([]int16(nil), p.queue[:min(n, len(p.queue))]...)
			p.queue = p.queue[len(frame):]
			p.dry = 0
		} else if p.armed {
			if p.dry++; p.dry == echoBack {
				close(p.drained)
			}
		}
		var user []int16
		if len(p.user) > 0 {
			user = p.user[:min(len(p.user), len(noise))]
			p.user = p.user[len(user):]
		}
		p.mu.Unlock()
		if frame != nil {
			p.st.Sent(frame, p.rate, now)
		}
		mic := speechtest.Mix(p.line.Frame(frame), noise, 0, 0)
		_ = p.in.Write(speechtest.Mix(mic, user, 0, 0))
	}
}

// say puts pcm (at the microphone's rate) into the microphone from now.
func (p *speakerphone) say(pcm []int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = append(p.user, pcm...)
}

func (p *speakerphone) Write(s []int16, rate int) error {
	if rate != p.rate {
		panic("the speakerphone plays one rate")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, s...)
	return nil
}

func (p *speakerphone) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.pauses++
	}
}

func (p *speakerphone) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
}

func (p *speakerphone) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue, p.paused = nil, false
}

func (p *speakerphone) Keep(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = p.queue[:min(len(p.queue), int(d)*p.rate/int(time.Second))]
}

func (p *speakerphone) Queued() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(len(p.queue)) * time.Second / time.Duration(p.rate)
}

func (p *speakerphone) TrackID() string { return "TR_bot" }

func (p *speakerphone) pausedTimes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pauses
}

// espeakSynth speaks each sentence with espeak-ng at 24 kHz, rendered
// before the test starts.
type espeakSynth map[string][]int16

func (s espeakSynth) Stream(_ context.Context, r *speech.SynthesizeRequest) iter.Seq[speech.SynthesizeEvent] {
	return func(yield func(speech.SynthesizeEvent) bool) {
		if yield(speech.SynthesizeEvent{Kind: speech.SynthesizeAudio, Samples: s[r.Text], SampleRate: agentRate}) {
			yield(speech.SynthesizeEvent{Kind: speech.SynthesizeDone})
		}
	}
}

// The agent's own voice coming back through a speakerphone (300 ms late,
// 3 dB under it) neither pauses nor stops it, through its whole answer,
// and is counted as echo rejected; a user who really talks over it, as
// loud as the agent, still pauses it and is asked.
func TestStageEchoNeitherPausesNorStops(t *testing.T) {
	testenv.RealTime(t)
	base := speechtest.Server(t, append([]string{echoQuestion, "yes"}, echoAnswer...)...)
	synth := espeakSynth{}
	for _, s := range echoAnswer {
		synth[s] = speechtest.Render(t, s, 140, agentRate)
	}
	user := speechtest.RenderAs(t, userVoice, echoQuestion, 140, voice.InputRate)
	userGain := -speechtest.LevelDB(agentVoice(t), agentRate, speechtest.Trim(user), voice.InputRate)
	for _, talk := range []bool{false, true} {
		name := map[bool]string{false: "echo alone", true: "a user over the echo"}[talk]
		t.Run(name, func(t *testing.T) {
			room := newRoom(true)
			obs := &observed{}
			out := &speakerphone{rate: agentRate, drained: make(chan struct{}), line: speechtest.EchoPath{Delay: 300 * time.Millisecond, GainDB: -3}.Line(t, agentRate)}
			next := newTurn(pipeline.Sentence{Sequence: 1, Text: echoAnswer[0]})
			next.finish()
			eng := &fakeEngine{started: make(chan started, 4), accept: func(string) *fakeTurn { return next }}
			var logs testenv.LogBuffer
			st := newStage(t, "", eng, room, out, func(c *voice.Config) {
				c.Recognizer = &speech.OpenAIRecognizer{URL: base + "/v1", Model: "whisper-1"}
				c.Synthesizer, c.Observer, c.Cue, c.EchoWarmup = synth, obs, voice.CueOff, -1
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			out.st, out.in = st, st.Listen("alice", "TR_alice")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go out.run(ctx)

			var sentences []pipeline.Sentence
			for i, s := range echoAnswer {
				sentences = append(sentences, pipeline.Sentence{Sequence: int32(i + 1), Text: s})
			}
			answer := newTurn(sentences...)
			answer.finish()
			st.SpeakTurn(answer)
			for said := ""; len(strings.Fields(said)) < 14; {
				// Talk over the answer's second sentence, its echo found.
				said += wait(t, room.speech, "the answer's words").Text
			}
			if talk {
				out.say(scaled(user, userGain))
				if got := wait(t, answer.interrupts, "the user's interruption"); got.kind != wire.StopAll {
					t.Fatalf("interrupt %+v", got)
				}
				if s := wait(t, eng.started, "the user's question"); speechtest.WER(echoQuestion, s.text) > 0.2 {
					t.Fatalf("asked %q", s.text)
				}
				if out.pausedTimes() == 0 {
					t.Fatal("the user's talk did not pause the agent")
				}
				// Speech over the echo is logged with what the suppressor
				// knew, for the day it is the echo itself.
				if !regexp.MustCompile(`level=INFO msg="voice: the sound is speech" .*echo\.now\.path=locked echo\.now\.active=true echo\.now\.delay=\d+ms`).MatchString(logs.String()) {
					t.Fatalf("speech over the echo was not logged with the echo path:\n%s", logs.String())
				}
				return
			}
			for sp := wait(t, room.speech, "the answer's words"); !sp.Final; sp = wait(t, room.speech, "the answer's words") {
				if sp.Cut {
					t.Fatalf("the answer was cut: %+v", sp)
				}
			}
			out.arm()
			wait(t, out.drained, "the answer played out and its echo back")
			// A barrier: the listener hears in order, so once the user's
			// question after the echo is asked, everything the echo did
			// was reported to the stage before it.
			out.say(scaled(user, userGain))
			if s := wait(t, eng.started, "the question after the answer"); speechtest.WER(echoQuestion, s.text) > 0.2 {
				t.Fatalf("the echo was asked: %q", s.text)
			}
			if n := out.pausedTimes(); n != 0 || len(answer.interrupts) != 0 || obs.echo.Load() == 0 {
				t.Fatalf("%d pauses, %d interrupts, %d echoes rejected", n, len(answer.interrupts), obs.echo.Load())
			}
			t.Logf("%d stretches of echo rejected", obs.echo.Load())
		})
	}
}

// scaled is pcm gainDB louder.
func scaled(pcm []int16, gainDB float64) []int16 {
	return speechtest.Mix(nil, pcm, 0, gainDB)
}
