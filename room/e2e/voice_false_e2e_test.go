package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// answerBody is what the bot says after repeating the question: plain
// sentences of common words, each in the recogniser's dictionary, long
// enough to be talked over three times.
const answerBody = "That is a good question to ask. I will answer it slowly and with care. " +
	"The first part of the answer is short. The second part takes a little longer to tell."

// answerAtLength answers every question with the body said n times.
func answerAtLength(n int) standin.Scenario {
	return standin.Scenario{Name: "long spoken answer", Rounds: []standin.Round{{
		Answer: "You said: {{question}}. " + strings.TrimSpace(strings.Repeat(answerBody+" ", n)),
	}}}
}

// A listener's hummed "mm-hm" and a spoken "uh-huh" over the bot's
// answer, over a real livekit-server: each pauses the bot's voice at the
// client (a silence longer than any in its speech) and it resumes where
// it paused; both are counted as false interruptions, the "uh-huh"
// because the recogniser heard it as backchannel words, neither starts a
// turn nor leaves a message, and the answer is stored complete and was
// heard whole (the client's audio, recognised, is the stored text). Then
// a question over the next answer: the client hears the bot fall silent
// before the stage has even decided it is an interruption, the question
// is answered, and the stored, cut answer ends within two words of where
// the client heard it stop. TestVoiceTurnThroughTheEngine covers a click,
// and the agent's transcript against the stored cut answer;
// TestBackchannelsOverLiveKit backchannels of several lengths and words,
// TestNoiseOverLiveKit noise, which does not pause the bot at all.
func TestFalseInterruptionsOverLiveKit(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	q1, q2, q3 := "How far is the moon?", "What is the weather like in Paris today?", "Tell me about the stars instead."
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := newTalkOverLog()
	var logs testenv.LogBuffer
	resumes := &resumeLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("voice stage log:\n%s", logs.String())
		}
	})
	// The backchannels are in the grammar: the "uh-huh" is heard as one,
	// and the stage is what must call it no word; the hummed "mm-hm" could
	// be. A one-word phrase beside them ("stop") would take the "uh-huh"
	// from them as often as not.
	cfg, store, _, _ := voiceAgentWith(t, lk, modelSetup{scenarios: []standin.Scenario{answerAtLength(1)}, stage: func(c *voice.Config) {
		c.Observer = obs
		// The test's microphone carries no echo of the bot, and the
		// answer need not outlast the warm-up.
		c.EchoWarmup = -1
		// Only the answer is on the bot's track, for the recogniser.
		c.Cue = voice.CueOff
		c.Logger = slog.New(resumes.around(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}}, q1, q2, q3, "mm hmm", "uh huh")
	const conv = "conv_false_interruptions"
	rec := &voiceTape{}
	u, feed := clockedUser(t, lk, cfg, conv, "fran", rec, nil)
	_, asked := feed.say(ctx, t, trimmed(speechtest.Render(t, q1, 140, voice.InputRate)))

	// An "mm-hm" once the answer has gone past "you said:", then an
	// "uh-huh" a second after the bot resumes.
	rec.waitMidVoice(t, asked, 40, "the answer")
	mmhm := falseTalkOver(ctx, t, feed, rec, obs, trimmed(speechtest.MmHm(t, voice.InputRate)))
	rec.waitMidVoice(t, mmhm.resumed, 50, "the answer after the mm-hm")
	uhhuh := falseTalkOver(ctx, t, feed, rec, obs, trimmed(speechtest.UhHuh(t, voice.InputRate)))
	// Each false interruption logged what the stage resumed on before it
	// told the Observer, so there is one by now for each.
	heard := resumes.transcripts()
	if len(heard) != 2 {
		t.Fatalf("the stage resumed %d times, on transcripts %q", len(heard), heard)
	}
	for i, o := range []struct {
		what string
		talkOver
	}{{"mm-hm", mmhm}, {"uh-huh", uhhuh}} {
		t.Logf("%s: heard as %q; onset → silence at the client %v, its end → voice again %v (the stage resumed %v after its end; paused %v)",
			o.what, heard[i], o.silenceAfterOnset(), o.resumed.Sub(o.end).Round(time.Millisecond),
			o.decided.Sub(o.end).Round(time.Millisecond), o.pause().Round(time.Millisecond))
	}
	// The "uh-huh" came to the stage as words, and the stage resumed
	// because they were backchannels, not because none came in time.
	if heard[1] != "uh huh" {
		t.Fatalf("the stage resumed on transcripts %q; the uh-huh's should be %q", heard, "uh huh")
	}
	u.listening()
	hist := storedUntil(ctx, t, store, conv, "the answer stored complete", func(h []storage.Entry) bool {
		return len(h) >= 2 && h[1].Status == storage.StatusComplete
	})
	got := u.until("the answer's last sentence", finalSentence)
	sentences := spokenSentences(got, hist[1].ID)
	whole := strings.Join(sentences, " ")
	var finals []*wire.Transcription
	for _, tr := range bodies[*wire.Transcription](got) {
		if tr.Final {
			finals = append(finals, tr)
		}
	}
	// The talk-over left nothing behind: one question, one answer, and
	// that answer is the whole of what the model said.
	if len(hist) != 2 || hist[1].Content != whole || len(finals) != 1 || has[*wire.StartAnswer](got) != 1 || has[*wire.UserMessage](got) != 0 {
		t.Fatalf("stored %+v; %d final transcriptions, %d answers started for %q", hist, len(finals), has[*wire.StartAnswer](got), whole)
	}
	if n := obs.count("false_interruption"); n != 2 || obs.count("interruption") != 0 {
		t.Fatalf("alicia_voice_talk_over_total: %v false interruptions, %v interruptions", n, obs.count("interruption"))
	}
	// Unrecognised: the recogniser heard nothing in them, rather than a
	// backchannel the stage then discounted.
	t.Logf("talk-over: 2 false interruptions, %v of them unrecognised", obs.count("unrecognised"))

	// The next question; the answer was heard whole until then: its
	// audio, without the two pauses, recognised. Each pause is a silence
	// the answer itself does not have: the bot stopped, not merely
	// reached the end of a sentence.
	_, asked2 := feed.say(ctx, t, trimmed(speechtest.Render(t, q2, 140, voice.InputRate)))
	answerFrom, _ := rec.firstLoud(asked)
	pauses := []timeSpan{mmhm.paused(), uhhuh.paused()}
	natural := rec.longestGap(answerFrom, asked2, pauses...)
	for _, o := range []talkOver{mmhm, uhhuh} {
		if o.pause() <= natural {
			t.Fatalf("the bot's voice paused %v at a talk-over; its speech has silences of %v", o.pause(), natural)
		}
	}
	clientHeard := recognise(ctx, t, clauses(sentences), rec.audio(answerFrom, asked2, pauses...))
	wer := speechtest.WER(whole, clientHeard)
	t.Logf("stored %q; heard %q (WER %.2f); the longest silence of the speech %v", whole, clientHeard, wer, natural)
	if wer > 0.15 {
		t.Fatalf("the client heard %q of %q", clientHeard, whole)
	}

	// Two seconds into its answer, a real question over it.
	rec.waitMidVoice(t, asked2, 100, "the second answer")
	onset, asked3 := feed.say(ctx, t, trimmed(speechtest.Render(t, q3, 140, voice.InputRate)))
	stopped := obs.wait(ctx, t, "interruption")
	silent := rec.lastLoud(asked3)
	t.Logf("interruption: onset → silence at the client %v; → the stage's decision %v",
		max(0, silent.Sub(onset)).Round(time.Millisecond), stopped.Sub(onset).Round(time.Millisecond))
	// Silent at the client before the interruption was decided: the
	// pause at the onset did it, and nothing more was heard of it.
	if !silent.Before(stopped) {
		t.Fatalf("the client heard the bot %v after the interruption was decided", silent.Sub(stopped))
	}
	hist = storedUntil(ctx, t, store, conv, "the third question answered", func(h []storage.Entry) bool {
		return len(h) >= 6 && h[3].Status == storage.StatusStopped
	})
	got = u.until("the third answer", func(g []*wire.Envelope) bool {
		return slices.ContainsFunc(bodies[*wire.AssistantSentence](g), func(s *wire.AssistantSentence) bool {
			return s.IsFinal && s.PreviousID == hist[5].ID
		})
	})
	third := spokenSentences(got, hist[5].ID)
	answered := rec.waitLoud(t, asked3, 1, "the third answer")
	if speechtest.WER(q3, hist[4].Content) > 0.2 || hist[5].PreviousID != hist[4].ID || len(third) == 0 ||
		!strings.HasPrefix(third[0], "You said: "+hist[4].Content) {
		t.Fatalf("the third question %q: answer %+v, sentences %q", hist[4].Content, hist[5], third)
	}
	t.Logf("the third question %q answered, heard %v after its end", hist[4].Content, answered.Sub(asked3).Round(time.Millisecond))
	// The stored answer ends where the client heard it stop, to two words.
	second := spokenSentences(got, hist[3].ID)
	// The recogniser knows only beginnings of the answer and hears it as
	// one stretch, so that what it makes of the cut-off last word is all
	// it can get wrong; the client heard silence after it.
	words := strings.Fields(speechstandin.Normalize(strings.Join(second, " ")))
	var beginnings []string
	for n := range words {
		beginnings = append(beginnings, strings.Join(words[:n+1], " "))
	}
	cut := recognise(ctx, t, beginnings, append(squeezed(rec.audio(asked2, silent.Add(time.Millisecond))), speechtest.Silence(300, voice.InputRate)...))
	said := strings.Fields(cut)
	at := 0
	for at < len(said) && at < len(words) && said[at] == words[at] {
		at++
	}
	kept := strings.Fields(speechstandin.Normalize(hist[3].Content))
	t.Logf("cut answer stored %q (%d words); the client heard %q, to word %d", hist[3].Content, len(kept), cut, at)
	if len(kept) == 0 || at < len(kept)-2 || at > len(kept)+2 || !strings.HasPrefix(strings.Join(second, " "), hist[3].Content) {
		t.Fatalf("stored %q; the client heard %q", hist[3].Content, cut)
	}
	if n := obs.count("interruption"); n != 1 || obs.count("false_interruption") != 2 {
		t.Fatalf("alicia_voice_talk_over_total: %v interruptions, %v false", n, obs.count("false_interruption"))
	}
}

// BenchmarkFalseInterruption: over a real livekit-server, an "mm-hm" or
// an "uh-huh" over the bot's answer, and a question over it:
// from the onset of the sound to the bot's silence at the client, and for
// the false ones from the end of the sound to the bot's voice again at the
// client; medians over the iterations (a sound that begins as a sentence
// ends finds the bot silent sooner and resumed later). Each iteration is
// one talk-over, and the bot's answers last over a minute: run it with
// -benchtime Nx, N up to 20. Noise, which does not pause the bot, is
// BenchmarkNoiseGap's.
func BenchmarkFalseInterruption(b *testing.B) {
	lk := testenv.StartLiveKit(b)
	question, other := "How far is the moon?", "What is the weather like in Paris today?"
	for _, kind := range []string{"mm-hm", "uh-huh", "interruption"} {
		b.Run(kind, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			obs := newTalkOverLog()
			cfg, _, _, _ := voiceAgentWith(b, lk, modelSetup{scenarios: []standin.Scenario{answerAtLength(8)}, stage: func(c *voice.Config) {
				c.Observer, c.EchoWarmup, c.Cue = obs, -1, voice.CueOff
			}}, question, other, "mm hmm", "uh huh")
			rec := &voiceTape{}
			_, feed := clockedUser(b, lk, cfg, "conv_bench_"+kind, "gus", rec, nil)
			_, asked := feed.say(ctx, b, trimmed(speechtest.Render(b, question, 140, voice.InputRate)))
			sound := map[string][]int16{
				"mm-hm":        trimmed(speechtest.MmHm(b, voice.InputRate)),
				"uh-huh":       trimmed(speechtest.UhHuh(b, voice.InputRate)),
				"interruption": trimmed(speechtest.Render(b, other, 140, voice.InputRate)),
			}[kind]
			var toSilence, toVoice []time.Duration
			from := asked
			for b.Loop() {
				rec.waitMidVoice(b, from, 40, "the answer")
				if kind != "interruption" {
					o := falseTalkOver(ctx, b, feed, rec, obs, sound)
					toSilence, toVoice = append(toSilence, o.silenceAfterOnset()), append(toVoice, o.resumed.Sub(o.end))
					from = o.resumed
					continue
				}
				onset, end := feed.say(ctx, b, sound)
				obs.wait(ctx, b, "interruption")
				from = rec.waitLoud(b, end, 1, "the next answer")
				toSilence = append(toSilence, max(0, rec.lastLoud(end).Sub(onset)))
			}
			b.ReportMetric(ms(median(toSilence)), "ms-onset→silence")
			b.Logf("onset → silence at the client: %v", toSilence)
			if kind != "interruption" {
				b.ReportMetric(ms(median(toVoice)), "ms-end→voice-again")
				b.Logf("end → voice again at the client: %v", toVoice)
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// talkOver is one sound over the bot's voice, as the client lived it.
type talkOver struct {
	// onset and end of the sound, as written to the microphone; decided,
	// when the stage called it a false interruption; silent, the last
	// voice the client heard before it; resumed, the first after.
	onset, end, decided, silent, resumed time.Time
}

func (o talkOver) pause() time.Duration { return o.resumed.Sub(o.silent) }

// paused is the stretch the client heard nothing of the bot.
func (o talkOver) paused() timeSpan { return timeSpan{o.silent, o.resumed} }

// silenceAfterOnset is 0 when the bot was between words at the onset
// already.
func (o talkOver) silenceAfterOnset() time.Duration {
	return max(0, o.silent.Sub(o.onset)).Round(time.Millisecond)
}

// falseTalkOver plays sound over the bot's voice and returns once the
// stage resumed it and the client hears it again.
func falseTalkOver(ctx context.Context, tb testing.TB, feed *micFeed, rec *voiceTape, obs *talkOverLog, sound []int16) talkOver {
	tb.Helper()
	var o talkOver
	o.onset, o.end = feed.say(ctx, tb, sound)
	o.decided = obs.wait(ctx, tb, "false_interruption")
	o.resumed = rec.waitLoud(tb, o.decided, 1, "the bot's voice resumed")
	// The stage resumes the audio the moment it decides: what came before
	// that is from before the pause.
	o.silent = rec.lastLoud(o.decided)
	return o
}

// talkOverLog is the stage's Observer: the room's metrics, registered to
// be read as /metrics shows them, and each outcome as it comes.
type talkOverLog struct {
	*room.Metrics
	reg    *prometheus.Registry
	events chan talkOverEvent
}

type talkOverEvent struct {
	outcome string
	at      time.Time
}

func newTalkOverLog() *talkOverLog {
	reg := prometheus.NewRegistry()
	return &talkOverLog{Metrics: room.NewMetrics(reg), reg: reg, events: make(chan talkOverEvent, 256)}
}

func (o *talkOverLog) Interrupted() { o.Metrics.Interrupted(); o.post("interruption") }
func (o *talkOverLog) FalseInterruption() {
	o.Metrics.FalseInterruption()
	o.post("false_interruption")
}
func (o *talkOverLog) Unrecognised() { o.Metrics.Unrecognised(); o.post("unrecognised") }
func (o *talkOverLog) NoiseIgnored() { o.Metrics.NoiseIgnored(); o.post("noise") }
func (o *talkOverLog) EchoRejected() { o.Metrics.EchoRejected(); o.post("echo") }

// post must not block the stage's loop; the buffer outlasts any test.
func (o *talkOverLog) post(outcome string) {
	select {
	case o.events <- talkOverEvent{outcome, time.Now()}:
	default:
	}
}

// wait returns when the next decision about talk-over is outcome; any
// other than an unrecognised utterance, or one of passOver, fails.
func (o *talkOverLog) wait(ctx context.Context, tb testing.TB, outcome string, passOver ...string) time.Time {
	tb.Helper()
	_, at := o.decision(ctx, tb, []string{outcome}, passOver...)
	return at
}

// decision returns the next decision about talk-over that is one of
// outcomes, and when it came, passing over unrecognised utterances and
// the outcomes in passOver; any other fails.
func (o *talkOverLog) decision(ctx context.Context, tb testing.TB, outcomes []string, passOver ...string) (string, time.Time) {
	tb.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case e := <-o.events:
			switch {
			case slices.Contains(outcomes, e.outcome):
				return e.outcome, e.at
			case e.outcome == "unrecognised" || slices.Contains(passOver, e.outcome):
			default:
				tb.Fatalf("talk-over came to %s, not %s", e.outcome, strings.Join(outcomes, " or "))
			}
		case <-timeout.C:
			tb.Fatalf("no %s", strings.Join(outcomes, " or "))
		case <-ctx.Done():
			tb.Fatal(ctx.Err())
		}
	}
}

// count is alicia_voice_talk_over_total{outcome}.
func (o *talkOverLog) count(outcome string) float64 {
	families, _ := o.reg.Gather()
	for _, f := range families {
		if f.GetName() != "alicia_voice_talk_over_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// resumeLog keeps, from the stage's log, the transcript each false
// interruption resumed the agent on, in order ("" for none).
type resumeLog struct {
	mu    sync.Mutex
	heard []string
}

func (r *resumeLog) transcripts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.heard)
}

// around is next, with the false interruptions it handles kept.
func (r *resumeLog) around(next slog.Handler) slog.Handler { return resumeHandler{next, r} }

type resumeHandler struct {
	slog.Handler
	log *resumeLog
}

func (h resumeHandler) Handle(ctx context.Context, rec slog.Record) error {
	if strings.HasPrefix(rec.Message, "voice: talk over the agent") && strings.HasSuffix(rec.Message, "it resumes") {
		var heard string
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "transcript" {
				heard = a.Value.String()
			}
			return true
		})
		h.log.mu.Lock()
		h.log.heard = append(h.log.heard, heard)
		h.log.mu.Unlock()
	}
	return h.Handler.Handle(ctx, rec)
}

// The stage's logger may be given attributes on the way: the copies keep
// to the same log.
func (h resumeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return resumeHandler{h.Handler.WithAttrs(as), h.log}
}

func (h resumeHandler) WithGroup(name string) slog.Handler {
	return resumeHandler{h.Handler.WithGroup(name), h.log}
}

// micFeed is the user's microphone: it sends silence, as a microphone in
// a quiet room does, and what it is given to say, 20 ms at a time at the
// pace of real time, so that the bot's VAD hears each sound end.
type micFeed struct {
	clips  chan micClip
	cancel context.CancelFunc
	done   chan struct{}
}

type micClip struct {
	pcm []int16
	// said gets when the first and the last frames were captured.
	said chan [2]time.Time
}

// maxCapture is the most a microphone catches up after its goroutine ran
// late, as a device's capture buffer holds: a longer stall loses audio.
const maxCapture = 200 * time.Millisecond

// feedMic feeds mic; echo, when not nil, is the client's speaker heard
// by the microphone, mixed into everything it sends.
//
// It is clocked as a device is: a frame is captured every 20 ms of real
// time, and frames a busy machine made late are all sent when it runs
// again. A ticker dropped them instead, and each dropped tick left a
// frame more in the speaker's buffer (echo) for good, as PCMLocalTrack's
// own ticker did in its buffer (clockedMic): the echo came back 20 ms
// later each time, 180 to 280 ms over one answer on a busy machine,
// which a device's echo never does.
func feedMic(ctx context.Context, mic *clockedMic, echo *echoPath) *micFeed {
	ctx, cancel := context.WithCancel(ctx)
	m := &micFeed{clips: make(chan micClip), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		c := capture{mic: mic, echo: echo, clips: m.clips}
		due := time.Now()
		for {
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			now := time.Now()
			if late := now.Sub(due); late > maxCapture {
				due = due.Add(late.Truncate(voice.FrameDuration))
			}
			for ; !due.After(now); due = due.Add(voice.FrameDuration) {
				c.frame(due)
			}
			timer.Reset(due.Sub(now))
		}
	}()
	return m
}

// capture is a micFeed's state between frames.
type capture struct {
	mic     *clockedMic
	echo    *echoPath
	clips   chan micClip
	clip    micClip
	pos     int
	first   time.Time
	silence [voice.FrameSamples]int16
}

// frame captures and sends the frame due at at: the clip being said, or
// silence, with the speaker's echo.
func (c *capture) frame(at time.Time) {
	if c.clip.pcm == nil {
		select {
		case c.clip = <-c.clips:
			c.pos, c.first = 0, at
		default:
		}
	}
	frame := c.silence[:]
	if c.clip.pcm != nil {
		frame = c.clip.pcm[c.pos:min(c.pos+voice.FrameSamples, len(c.clip.pcm))]
	}
	if c.echo != nil {
		frame = c.echo.over(frame)
	}
	_ = c.mic.WriteSample(frame)
	if c.clip.pcm != nil {
		if c.pos += voice.FrameSamples; c.pos >= len(c.clip.pcm) {
			c.clip.said <- [2]time.Time{c.first, at}
			c.clip = micClip{}
		}
	}
}

// say plays pcm into the microphone and returns when its first and last
// samples were sent.
func (m *micFeed) say(ctx context.Context, tb testing.TB, pcm []int16) (onset, end time.Time) {
	tb.Helper()
	c := micClip{pcm: pcm, said: make(chan [2]time.Time, 1)}
	select {
	case m.clips <- c:
	case <-ctx.Done():
		tb.Fatal(ctx.Err())
	}
	select {
	case at := <-c.said:
		return at[0], at[1]
	case <-ctx.Done():
		tb.Fatal(ctx.Err())
	}
	return
}

func (m *micFeed) stop() { m.cancel(); <-m.done }

// voiceTape records the bot's voice as the client decodes it, frame by
// frame, with when each came.
type voiceTape struct {
	mu     sync.Mutex
	frames []tapeFrame
}

type tapeFrame struct {
	at   time.Time
	pcm  []int16
	loud bool
}

type timeSpan struct{ from, to time.Time }

func (r *voiceTape) WriteSample(p media.PCM16Sample) error {
	f := tapeFrame{at: time.Now(), pcm: append([]int16(nil), p...), loud: speechtest.RMS(p) > 300}
	r.mu.Lock()
	r.frames = append(r.frames, f)
	r.mu.Unlock()
	return nil
}

func (r *voiceTape) Close() error { return nil }

// nthLoud is the time of the nth loud frame after t, if it came.
func (r *voiceTape) nthLoud(t time.Time, n int) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.frames {
		if f.loud && f.at.After(t) {
			if n--; n == 0 {
				return f.at, true
			}
		}
	}
	return time.Time{}, false
}

// firstLoud is the first loud frame after t (zero if none yet).
func (r *voiceTape) firstLoud(t time.Time) (time.Time, bool) { return r.nthLoud(t, 1) }

// waitLoud waits for the client to hear n frames of the bot's voice
// after t, and returns when the last of them came.
func (r *voiceTape) waitLoud(tb testing.TB, t time.Time, n int, what string) time.Time {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if at, ok := r.nthLoud(t, n); ok {
			return at
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("%s: not heard at the client", what)
	return time.Time{}
}

// waitMidVoice waits for the client to hear n frames of the bot's voice
// after t and to be in the middle of a word: a sound starting then finds
// the bot speaking, not between sentences.
func (r *voiceTape) waitMidVoice(tb testing.TB, t time.Time, n int, what string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := r.nthLoud(t, n); ok {
			r.mu.Lock()
			last := r.frames[max(0, len(r.frames)-3):]
			voiced := len(last) == 3 && !slices.ContainsFunc(last, func(f tapeFrame) bool { return !f.loud })
			r.mu.Unlock()
			if voiced {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("%s: not heard at the client", what)
}

// lastLoud is the last frame of voice heard before t.
func (r *voiceTape) lastLoud(t time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, f := range r.frames {
		if f.loud && f.at.Before(t) {
			last = f.at
		}
	}
	return last
}

// longestGap is the longest silence between frames of voice heard in
// [from, to), leaving the skipped stretches out.
func (r *voiceTape) longestGap(from, to time.Time, skip ...timeSpan) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var longest time.Duration
	var prev time.Time
	for _, f := range r.frames {
		if !f.loud || f.at.Before(from) || !f.at.Before(to) {
			continue
		}
		if !prev.IsZero() && !slices.ContainsFunc(skip, func(s timeSpan) bool { return !f.at.Before(s.to) && !prev.After(s.from) && prev.Before(s.to) }) {
			longest = max(longest, f.at.Sub(prev))
		}
		prev = f.at
	}
	return longest
}

// dry are the stretches in [from, to) where the bot's track ran dry: it
// sends a few frames of silence, then one every 400 ms, so frames came
// further apart than their 20 ms. Each runs from the last loud frame
// before to the first loud one after: a pause's silence, which a
// recogniser hears inside the word it split.
func (r *voiceTape) dry(from, to time.Time) []timeSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []timeSpan
	var prev, loud, gapFrom time.Time
	for _, f := range r.frames {
		if f.at.Before(from) || !f.at.Before(to) {
			continue
		}
		if !prev.IsZero() && f.at.Sub(prev) > 30*time.Millisecond && gapFrom.IsZero() {
			gapFrom = loud
		}
		if f.loud {
			if !gapFrom.IsZero() {
				out = append(out, timeSpan{gapFrom, f.at})
				gapFrom = time.Time{}
			}
			loud = f.at
		}
		prev = f.at
	}
	return out
}

// audio is what the client heard in [from, to), the skipped stretches
// cut out.
func (r *voiceTape) audio(from, to time.Time, skip ...timeSpan) []int16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int16
	for _, f := range r.frames {
		if f.at.Before(from) || !f.at.Before(to) || slices.ContainsFunc(skip, func(s timeSpan) bool { return f.at.After(s.from) && f.at.Before(s.to) }) {
			continue
		}
		out = append(out, f.pcm...)
	}
	return out
}

var clauseEnd = regexp.MustCompile(`[.,:;!?]+`)

// clauses are the sentences' parts between punctuation marks: espeak-ng
// pauses at each, and the recogniser takes each stretch of speech as a
// sequence of its phrases.
func clauses(sentences []string) []string {
	var out []string
	for _, s := range sentences {
		for _, c := range clauseEnd.Split(s, -1) {
			if c = speechstandin.Normalize(c); c != "" {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// squeezed shortens each silence in pcm to 100 ms, so that a recogniser
// hears the speech as one stretch.
func squeezed(pcm []int16) []int16 {
	var out []int16
	quiet := 0
	for i := 0; i < len(pcm); i += voice.FrameSamples {
		f := pcm[i:min(i+voice.FrameSamples, len(pcm))]
		if speechtest.RMS(f) > 300 {
			quiet = 0
		} else if quiet++; quiet > 5 {
			continue
		}
		out = append(out, f...)
	}
	return out
}

// recognise is what a recogniser that knows only phrases hears in pcm.
func recognise(ctx context.Context, tb testing.TB, phrases []string, pcm []int16) string {
	tb.Helper()
	testenv.SpeechEngines(tb)
	ear, err := speechstandin.New(speechstandin.Config{Phrases: phrases, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	defer ear.Close()
	srv := httptest.NewServer(ear.Handler())
	defer srv.Close()
	var text string
	for ev := range (&speech.OpenAIRecognizer{URL: srv.URL + "/v1"}).Stream(ctx, &speech.RecognizeRequest{Audio: pcm, SampleRate: voice.InputRate}) {
		if ev.Kind == speech.RecognizeError {
			tb.Fatal(ev.Err)
		}
		text = ev.Text
	}
	return text
}

// spokenSentences are the sentences of answer id, as they are read aloud.
func spokenSentences(got []*wire.Envelope, id string) []string {
	var out []string
	for _, s := range bodies[*wire.AssistantSentence](got) {
		if s.PreviousID == id {
			out = append(out, voice.Speakable(pipeline.Sentence{Text: s.Text}))
		}
	}
	return out
}

// storedUntil polls the conversation's history until ok.
func storedUntil(ctx context.Context, tb testing.TB, store storage.Store, conv, what string, ok func([]storage.Entry) bool) []storage.Entry {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var hist []storage.Entry
	for time.Now().Before(deadline) {
		hist, _ = store.History(ctx, conv)
		if ok(hist) {
			return hist
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("%s: stored %s", what, fmt.Sprint(hist))
	return nil
}
