package voice_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/speech"
)

// timedRoom notes when the first final transcript arrives.
type timedRoom struct {
	*fakeRoom
	final chan time.Time
}

func (r *timedRoom) Transcript(ctx context.Context, t voice.Transcript) {
	if t.Final {
		select {
		case r.final <- time.Now():
		default:
		}
	}
	r.fakeRoom.Transcript(ctx, t)
}

// timedOut notes when audio is first written, paused and cleared.
type timedOut struct {
	*fakeOut
	first   chan time.Time
	paused  chan time.Time
	cleared chan time.Time
	once    sync.Once
}

func (o *timedOut) Pause() {
	select {
	case o.paused <- time.Now():
	default:
	}
	o.fakeOut.Pause()
}

func (o *timedOut) Write(s []int16, rate int) error {
	o.once.Do(func() { o.first <- time.Now() })
	return o.fakeOut.Write(s, rate)
}

func (o *timedOut) Clear() {
	select {
	case o.cleared <- time.Now():
	default:
	}
	o.fakeOut.Clear()
}

// paced feeds pcm in 20 ms frames at real-time pace and returns when
// the frame at index mark was written.
func paced(ctx context.Context, in *voice.Input, pcm []int16, mark int) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(voice.FrameDuration)
		defer tick.Stop()
		for i := 0; i+voice.FrameSamples <= len(pcm); i += voice.FrameSamples {
			if i/voice.FrameSamples == mark {
				at <- time.Now()
			}
			_ = in.Write(pcm[i : i+voice.FrameSamples])
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return at
}

// BenchmarkEndOfSpeechToFinal: from the last voiced frame, fed at real
// time, to the final Transcription (the endpointing delay plus the
// stand-in recogniser); then from that final Transcription to the first
// audio frame out, with an engine that answers at once (the synthesiser's
// time to first byte).
func BenchmarkEndOfSpeechToFinal(b *testing.B) {
	base, _ := speechServer(b)
	for _, tc := range []struct {
		name string
		rec  voice.Recognizer
	}{
		{"uploaded", &speech.OpenAIRecognizer{URL: base, Model: "whisper-1", Streaming: true}},
		{"streamed", &speech.RealtimeRecognizer{URL: base, Model: "whisper-1"}},
	} {
		b.Run(tc.name, func(b *testing.B) { endOfSpeechToFinal(b, base, tc.rec) })
	}
}

func endOfSpeechToFinal(b *testing.B, base string, rec voice.Recognizer) {
	speech := speechtest.Render(b, other, 140, voice.InputRate)
	voiced := voiceEnd(speech)
	pcm := append(append(speechtest.Silence(200, voice.InputRate), speech...), speechtest.Silence(1500, voice.InputRate)...)
	mark := (200*voice.InputRate/1000 + voiced) / voice.FrameSamples
	var eos, fta time.Duration
	for b.Loop() {
		room := &timedRoom{fakeRoom: newRoom(true), final: make(chan time.Time, 1)}
		out := &timedOut{fakeOut: &fakeOut{speed: 1}, first: make(chan time.Time, 1), paused: make(chan time.Time, 1), cleared: make(chan time.Time, 1)}
		turn := newTurn(pipeline.Sentence{Sequence: 1, Text: "You said: how far is the moon."})
		turn.finish()
		st := newStage(b, base, &fakeEngine{started: make(chan started, 1), accept: func(string) *fakeTurn { return turn }}, room, out,
			func(c *voice.Config) { c.Recognizer = rec })
		ctx, cancel := context.WithCancel(context.Background())
		in := st.Listen("alice", "TR")
		spokeEnd := <-paced(ctx, in, pcm, mark)
		final := wait(b, room.final, "final transcript")
		first := wait(b, out.first, "first audio")
		cancel()
		eos += final.Sub(spokeEnd)
		fta += first.Sub(final)
	}
	b.ReportMetric(float64(eos.Milliseconds())/float64(b.N), "ms-end-of-speech→final")
	b.ReportMetric(float64(fta.Milliseconds())/float64(b.N), "ms-final→first-audio")
}

// BenchmarkBargeIn: from the user's first voiced frame over the agent's
// speech, fed at real time, to the paused audio (at least the VAD's
// MinSpeech, 120 ms; what lies beyond is the stage's own delay), and to
// the cleared queue once the speech proved an interruption by its words
// (its first interim transcript, after InterimEvery of speech, or its
// final one).
func BenchmarkBargeIn(b *testing.B) {
	base, _ := speechServer(b)
	speech := speechtest.Trim(speechtest.Render(b, other, 140, voice.InputRate))
	pcm := append(speechtest.Silence(200, voice.InputRate), speech...)
	// The trimmed speech is voiced from its first frame on.
	mark := 200 * voice.InputRate / 1000 / voice.FrameSamples
	var total, pause time.Duration
	for b.Loop() {
		room := newRoom(true)
		out := &timedOut{fakeOut: &fakeOut{speed: 1}, first: make(chan time.Time, 1), paused: make(chan time.Time, 1), cleared: make(chan time.Time, 1)}
		long := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west and some sun."})
		st := newStage(b, base, &fakeEngine{started: make(chan started, 1), accept: func(string) *fakeTurn { return nil }}, room, out)
		st.SpeakTurn(long)
		wait(b, out.first, "speech")
		ctx, cancel := context.WithCancel(context.Background())
		in := st.Listen("alice", "TR")
		due := <-paced(ctx, in, pcm, mark)
		paused := wait(b, out.paused, "the pause")
		cleared := wait(b, out.cleared, "barge-in")
		cancel()
		total += cleared.Sub(due)
		pause += paused.Sub(due)
	}
	b.ReportMetric(float64(pause.Microseconds())/1000/float64(b.N), "ms-onset→paused")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-onset→cleared")
}

// BenchmarkPauseAtOnset: from the first sound of words said over the
// agent's speech, fed at real time, to its paused audio, for words that
// begin with a vowel or a voiced consonant and for words that begin
// without pitch ("s", "t", "wh", "h"), whose pause waits for their
// vowel.
func BenchmarkPauseAtOnset(b *testing.B) {
	for _, text := range []string{"okay", "no", "stop", "so", "tell me", "what", "how far"} {
		b.Run(text, func(b *testing.B) {
			speech := speechtest.Trim(speechtest.Render(b, text, 140, voice.InputRate))
			pcm := append(append(speechtest.Silence(200, voice.InputRate), speech...), speechtest.Silence(600, voice.InputRate)...)
			mark := 200 * voice.InputRate / 1000 / voice.FrameSamples
			var pause time.Duration
			for b.Loop() {
				out := &timedOut{fakeOut: &fakeOut{speed: 1}, first: make(chan time.Time, 1), paused: make(chan time.Time, 1), cleared: make(chan time.Time, 1)}
				long := newTurn(pipeline.Sentence{Sequence: 1, Text: "The weather in Paris is mild today, with a light breeze from the west and some sun."})
				st := newStage(b, "", &fakeEngine{started: make(chan started, 1), accept: func(string) *fakeTurn { return nil }}, newRoom(true), out,
					func(c *voice.Config) {
						c.Recognizer, c.Synthesizer, c.InterimEvery = scriptedRecognizer{""}, toneSynth{}, -1
					})
				st.SpeakTurn(long)
				wait(b, out.first, "speech")
				ctx, cancel := context.WithCancel(context.Background())
				due := <-paced(ctx, st.Listen("alice", "TR"), pcm, mark)
				paused := wait(b, out.paused, "the pause")
				cancel()
				pause += paused.Sub(due)
			}
			b.ReportMetric(float64(pause.Microseconds())/1000/float64(b.N), "ms-onset→paused")
		})
	}
}

// BenchmarkPeriodicity: the CPU of measuring one frame's pitch, which
// the endpointer does only for the voice of a sound not yet confirmed as
// speech.
func BenchmarkPeriodicity(b *testing.B) {
	fs := frames(speechtest.Render(b, question, 140, voice.InputRate))
	i := 1
	for b.Loop() {
		voice.Periodicity(fs[i-1], fs[i])
		if i++; i == len(fs) {
			i = 1
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkListeningCPU: CPU spent on VAD and endpointing per second of
// a speaker's audio (a question, then two seconds without speech), the
// work the stage does for every microphone all the time: in a quiet
// room's noise, and in the digital silence a client in DTX leaves.
func BenchmarkListeningCPU(b *testing.B) {
	speech := speechtest.Render(b, question, 140, voice.InputRate)
	pcm := append(speech, speechtest.Silence(2000, voice.InputRate)...)
	for _, room := range []struct {
		name  string
		noise float64
	}{{"noise", 1}, {"dtx", 0}} {
		b.Run(room.name, func(b *testing.B) {
			pcm := mix(pcm, room.noise)
			audio := time.Duration(len(pcm)) * time.Second / voice.InputRate
			e, err := voice.NewEndpointer(voice.EndpointConfig{})
			if err != nil {
				b.Fatal(err)
			}
			var f voice.Framer
			start := cpuTime()
			for b.Loop() {
				for _, fr := range f.Write(pcm) {
					if _, err := e.Push(fr); err != nil {
						b.Fatal(err)
					}
				}
			}
			cpu := cpuTime() - start
			b.ReportMetric(float64(cpu.Microseconds())/(float64(b.N)*audio.Seconds()), "µs-CPU/audio-s")
		})
	}
}

// BenchmarkSessionMemory: heap held by one conversation's voice stage
// with one speaker listened to (its endpointer, VAD, buffers and
// goroutines), idle.
func BenchmarkSessionMemory(b *testing.B) {
	const n = 200
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		stages := make([]*voice.Stage, n)
		for i := range stages {
			stages[i] = voice.New(voice.Config{}, &fakeEngine{}, newRoom(true), &fakeOut{speed: 1})
			wg.Add(1)
			go func() { defer wg.Done(); stages[i].Run(ctx) }()
			in := stages[i].Listen("alice", "TR")
			_ = in.Write(make([]int16, voice.FrameSamples))
		}
		for _, s := range stages {
			s.State(ctx) // every stage has started its listener
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse+after.StackInuse-before.StackInuse)/n/1024, "KiB/session")
		cancel()
		wg.Wait()
	}
}

// BenchmarkEchoMoves: how often an echo that moved mid-answer still
// starts speech, by how far it moved. Each move is tried every half
// second from 0.5 to 6 s into the answer, at the four delays and gains
// (a move that would leave less than 20 ms of delay is not), as
// TestEchoLaterMidAnswer tries a few. One iteration takes about two
// minutes of CPU: run it with -benchtime 1x.
func BenchmarkEchoMoves(b *testing.B) {
	agent := agentVoice(b)
	noise := speechtest.Noise(len(agent)*1000/agentRate+1000, voice.InputRate, 3)
	moves := []time.Duration{-150, -120, -80, -40, 20, 40, 60, 100, 150, 250, 400}
	type trial struct {
		after, move time.Duration
		path        speechtest.EchoPath
	}
	var trials []trial
	for after := 500 * time.Millisecond; after <= 6*time.Second; after += 500 * time.Millisecond {
		for _, p := range echoPaths {
			for _, m := range moves {
				if m *= time.Millisecond; p.Delay+m >= 20*time.Millisecond {
					trials = append(trials, trial{after, m, p})
				}
			}
		}
	}
	for b.Loop() {
		started := map[time.Duration]int{}
		var mu sync.Mutex
		next := make(chan trial)
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for tr := range next {
					if h := hearMic(b, agent, movedEcho(b, agent, noise, tr.path, tr.after, tr.move), true); len(h.confirmed) > 0 {
						mu.Lock()
						started[tr.move]++
						mu.Unlock()
					}
				}
			})
		}
		for _, tr := range trials {
			next <- tr
		}
		close(next)
		wg.Wait()
		total := 0
		for _, m := range moves {
			m *= time.Millisecond
			n := 0
			for _, tr := range trials {
				if tr.move == m {
					n++
				}
			}
			b.Logf("moved %+v: %d of %d started speech", m, started[m], n)
			total += started[m]
		}
		b.ReportMetric(float64(total), "started")
		b.ReportMetric(float64(len(trials)), "moves")
	}
}

// BenchmarkCodedQuestionOverEcho is TestBargeInOverEcho's question as a
// client's Opus brings it, over no echo and over each echo path: how long
// after its onset it is confirmed as speech, at the median of the 21
// points of the answer (ms-confirmed), and at how many of them the whole
// "Stop," was lost and the question confirmed only at its next words,
// 400 ms or more after the onset (lost/op). The question is said in the
// agent's own voice (the hardest case: the same pitch and timbre as its
// echo) and in three others of espeak-ng's.
func BenchmarkCodedQuestionOverEcho(b *testing.B) {
	paths := []*speechtest.EchoPath{nil}
	for _, p := range echoPaths {
		paths = append(paths, &p)
	}
	for _, v := range []string{"", userVoice, "en+m3", "en-us+m7"} {
		said, name := speechtest.Render(b, stopPhrase, 140, voice.InputRate), "agent-voice"
		if v != "" {
			said, name = speechtest.RenderAs(b, v, stopPhrase, 140, voice.InputRate), v
		}
		q := newQuestionOverEcho(b, speechtest.Coded(b, speechtest.Trim(said), voice.InputRate))
		b.Run(name, func(b *testing.B) {
			for _, p := range paths {
				name, back := "no echo", []int16(nil)
				if p != nil {
					name, back = echoName(*p), p.Of(b, q.agent, agentRate)
				}
				b.Run(name, func(b *testing.B) {
					var got []time.Duration
					lost := 0
					for b.Loop() {
						got, lost = got[:0], 0
						for _, at := range questionOnsets() {
							d := q.confirmed(b, back, at)
							got = append(got, d)
							if d >= 400*time.Millisecond {
								lost++
							}
						}
					}
					slices.Sort(got)
					b.ReportMetric(float64(got[len(got)/2])/float64(time.Millisecond), "ms-confirmed")
					b.ReportMetric(float64(lost), "lost/op")
				})
			}
		})
	}
}

// BenchmarkEchoInNoisyRoom is the echo alone over a room's noise, as a
// speakerphone sends it: the two Opus-coded together by the client, or
// (coded=false) the noise added after the codec, as the other in-process
// echo tests add it. It reports per answer (about 10 s) how often the
// echo started speech (starts/op) and was confirmed as speech, which
// pauses the agent (confirmed/op), in the tests' quiet room (-55 dBFS)
// and in rooms 9.5 and 15.6 dB louder.
func BenchmarkEchoInNoisyRoom(b *testing.B) {
	agent := agentVoice(b)
	for _, louder := range []int16{1, 3, 6} {
		noise := roomNoise(agent, louder)
		for _, p := range echoPaths {
			for _, coded := range []bool{true, false} {
				b.Run(fmt.Sprintf("noise=x%d/%s/coded=%v", louder, echoName(p), coded), func(b *testing.B) {
					var starts, confirmed int
					for b.Loop() {
						var mic []int16
						if coded {
							mic = p.Over(b, agent, agentRate, noise)
						} else {
							mic = speechtest.Mix(p.Of(b, agent, agentRate), noise, 0, 0)
						}
						h := hearMic(b, agent, mic, true)
						starts, confirmed = len(h.starts), len(h.confirmed)
					}
					b.ReportMetric(float64(starts), "starts/op")
					b.ReportMetric(float64(confirmed), "confirmed/op")
				})
			}
		}
	}
}
