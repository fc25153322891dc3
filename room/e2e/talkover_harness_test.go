package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	protoLogger "github.com/livekit/protocol/logger"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// The harness of the talk-over tests: one user talking to the voice bot
// over a real livekit-server, who types a question, hears the answer and
// makes a sound over it (a backchannel, a cough, the bot's own voice
// coming back through a speakerphone, a real question), and what the bot
// decided about it, as its Observer and its turn reports tell.

// storyQuestion is typed, not spoken: the answer's text, and so its
// length, is then the same every time.
const storyQuestion = "Tell me a story."

// shortAnswer answers with two sentences, about 7 s of speech: enough to
// make a sound over its middle and to hear what that did to it.
var shortAnswer = standin.Scenario{Name: "short spoken answer", Rounds: []standin.Round{{
	Answer: "You said: {{question}}. That is a good question to ask. I will answer it slowly and with care.",
}}}

// Phrases the bot's recogniser knows. The backchannels are there so that
// it can hear them as what they are; the questions so that it can
// mistake a sound for words, as any recogniser can.
var (
	backchannelPhrases = []string{"mm hmm", "uh huh", "okay", "right"}
	otherQuestions     = []string{"How far is the moon?", "What is the weather like in Paris today?"}
)

// talkOverSetup is the bot and the user of a talk-over test.
type talkOverSetup struct {
	conv    string
	answer  standin.Scenario
	phrases []string
	// echo, when set, is the user's speakerphone: the bot's voice comes
	// back into the microphone.
	echo *echoSetting
}

// talkOverClient is the user: a microphone fed in real time, the bot's
// voice as the client decodes it, and the bot's decisions about talk
// over it, as /metrics counts them and as its turn reports time them.
type talkOverClient struct {
	conv  string
	u     *user
	feed  *micFeed
	rec   *voiceTape
	obs   *talkOverLog
	turns *turnLog
	store storage.Store
	// resumes are the transcripts the stage resumed the bot on.
	resumes *resumeLog
}

// newTalkOverClient starts the bot with the stage's defaults (only the
// thinking cue off, so that the bot's track carries the answer alone, for
// the recogniser and for timing it) and joins the user, whose microphone
// has sent its first second of silence.
func newTalkOverClient(tb testing.TB, lk *testenv.LiveKit, s talkOverSetup) *talkOverClient {
	tb.Helper()
	c := &talkOverClient{conv: s.conv, rec: &voiceTape{}, obs: newTalkOverLog(), turns: newTurnLog(), resumes: &resumeLog{}}
	cfg, store, _, _ := voiceAgentWith(tb, lk, modelSetup{scenarios: []standin.Scenario{s.answer}, telemetry: c.turns, stage: func(vc *voice.Config) {
		vc.Observer = c.obs
		vc.Cue = voice.CueOff
		vc.Logger = slog.New(c.resumes.around(vc.Logger.Handler()))
	}}, s.phrases...)
	c.store = store
	var heard lkmedia.PCMRemoteTrackWriter = c.rec
	var echo *echoPath
	if s.echo != nil {
		echo = newEchoPath(*s.echo)
		heard = speakerphone{c.rec, echo}
	}
	c.u, c.feed = clockedUser(tb, lk, cfg, s.conv, "pat", heard, echo)
	return c
}

// ask types a question, and returns its message id and when it went.
func (c *talkOverClient) ask(text string) (id string, at time.Time) {
	id = wire.NewID("msg")
	at = time.Now()
	c.u.send(&wire.UserMessage{ID: id, ConversationID: c.conv, Content: text})
	return id, at
}

// heardAnswer is one answer to a typed question, as the client lived it.
type heardAnswer struct {
	// id is the question's; report the turn's, once its speech was over.
	id     string
	report pipeline.TurnReport
	// from and to are the first and the last of its voice at the client.
	from, to time.Time
	// sound is when the sound over it was played, if one was.
	sound timeSpan
}

// span is how long the client heard the answer take, pauses and all.
func (a heardAnswer) span() time.Duration { return a.to.Sub(a.from) }

// pauses are the times talk over the answer paused or stopped it: the
// onset of the talk and when the audio paused.
func (a heardAnswer) pauses() []pipeline.Timed { return bargeIns(a.report) }

func bargeIns(r pipeline.TurnReport) []pipeline.Timed {
	var out []pipeline.Timed
	for _, st := range r.Stages {
		if st.Name == voice.StageBargeIn {
			out = append(out, st)
		}
	}
	return out
}

// answer asks the story question and, once the client has heard its
// answer for about 1.5 s, plays sound (if any) over it, in the middle of
// a word; it returns when the client has heard the whole answer.
func (c *talkOverClient) answer(tb testing.TB, sound []int16) heardAnswer {
	tb.Helper()
	var a heardAnswer
	var asked time.Time
	a.id, asked = c.ask(storyQuestion)
	if sound != nil {
		c.rec.waitMidVoice(tb, asked, 75, "the answer")
		a.sound.from, a.sound.to = c.feed.say(tb.Context(), tb, sound)
	}
	a.report, a.to = c.heardUntilTheEnd(tb, a.id)
	a.from, _ = c.rec.firstLoud(asked)
	return a
}

// heardUntilTheEnd waits for the end of the answer to question id: its
// turn's report, then the last of its voice at the client.
func (c *talkOverClient) heardUntilTheEnd(tb testing.TB, id string) (pipeline.TurnReport, time.Time) {
	tb.Helper()
	r, at := c.turns.wait(tb, "the answer's report", func(r pipeline.TurnReport) bool { return r.UserMessageID == id })
	return r, c.rec.lastVoiceBy(tb, at)
}

// stored waits for the answer to question id to be stored as over
// (complete, stopped or failed) and returns it.
func (c *talkOverClient) stored(tb testing.TB, id string) storage.Entry {
	tb.Helper()
	var answer storage.Entry
	storedUntil(tb.Context(), tb, c.store, c.conv, "the answer stored", func(h []storage.Entry) bool {
		i := slices.IndexFunc(h, func(e storage.Entry) bool { return e.PreviousID == id && e.Role == "assistant" })
		if i < 0 || h[i].Status == storage.StatusStreaming {
			return false
		}
		answer = h[i]
		return true
	})
	return answer
}

// heardWhole checks that answer a was stored complete, as the sentences
// the client was sent, and heard whole: its audio at the client,
// recognised, is its text (to a word error rate of 0.15, the stand-in
// recogniser's). It returns the stored answer.
func (c *talkOverClient) heardWhole(tb testing.TB, a heardAnswer) storage.Entry {
	tb.Helper()
	stored := c.stored(tb, a.id)
	got := c.u.until("the answer's last sentence", func(g []*wire.Envelope) bool {
		return slices.ContainsFunc(bodies[*wire.AssistantSentence](g), func(s *wire.AssistantSentence) bool {
			return s.IsFinal && s.PreviousID == stored.ID
		})
	})
	sentences := spokenSentences(got, stored.ID)
	whole := strings.Join(sentences, " ")
	if stored.Status != storage.StatusComplete || stored.Content != whole {
		tb.Fatalf("stored %s %q; the client was sent %q", stored.Status, stored.Content, whole)
	}
	// Without the silences of the bot's pauses: left in, a recogniser
	// took the words they split for others (WER up to 0.25, in 2 of 15
	// runs of TestBackchannelsOverLiveKit, while every run's audio held
	// the same 611,840 samples; 0.00 with them cut out).
	to := a.to.Add(time.Millisecond)
	audio := squeezed(c.rec.audio(a.from, to, c.rec.dry(a.from, to)...))
	heard := recognise(tb.Context(), tb, clauses(sentences), audio)
	wer := speechtest.WER(whole, heard)
	tb.Logf("the client heard %q (WER %.2f against the stored answer)", heard, wer)
	if wer > 0.15 {
		// Kept, so that a failure tells audio lost on the way from a
		// recogniser that took one clause for another.
		kept := filepath.Join(testenv.ArtifactsDir(), strings.ReplaceAll(tb.Name(), "/", "_")+"-heard.wav")
		if err := os.MkdirAll(filepath.Dir(kept), 0o755); err == nil {
			_ = os.WriteFile(kept, speech.EncodeWAV(audio, voice.InputRate), 0o644)
		}
		tb.Fatalf("the client heard %q of %q (the audio: %s)", heard, whole, kept)
	}
	return stored
}

// turnLog is the engine's telemetry: each turn's report as it comes, once
// the turn is over, its speech too. A spoken answer's report is the
// barrier after which nothing more of it plays, and it lists every pause
// talk over it made (a barge_in stage each).
type turnLog struct {
	mu      sync.Mutex
	reports []endedTurn
	grew    chan struct{}
}

type endedTurn struct {
	pipeline.TurnReport
	at time.Time
}

func newTurnLog() *turnLog { return &turnLog{grew: make(chan struct{}, 1)} }

func (l *turnLog) TurnEnded(r pipeline.TurnReport) {
	l.mu.Lock()
	l.reports = append(l.reports, endedTurn{r, time.Now()})
	l.mu.Unlock()
	select {
	case l.grew <- struct{}{}:
	default:
	}
}

// wait returns the first report that is, and when it came.
func (l *turnLog) wait(tb testing.TB, what string, is func(pipeline.TurnReport) bool) (pipeline.TurnReport, time.Time) {
	tb.Helper()
	timeout := time.NewTimer(90 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		i := slices.IndexFunc(l.reports, func(r endedTurn) bool { return is(r.TurnReport) })
		var r endedTurn
		if i >= 0 {
			r = l.reports[i]
		}
		l.mu.Unlock()
		if i >= 0 {
			return r.TurnReport, r.at
		}
		select {
		case <-l.grew:
		case <-timeout.C:
			tb.Fatalf("%s: no turn report", what)
		case <-tb.Context().Done():
			tb.Fatal(tb.Context().Err())
		}
	}
}

// lastVoiceBy is the last frame of the bot's voice the client heard of
// what the bot's track sent before t. The track is ordered and sends
// through the silence after an answer (a frame every 400 ms at least, as
// DTX does): once a frame has come half a second after t, all it sent
// before t is in.
func (r *voiceTape) lastVoiceBy(tb testing.TB, t time.Time) time.Time {
	tb.Helper()
	after := t.Add(500 * time.Millisecond)
	testenv.Eventually(tb, "the bot's track after its answer", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.frames) > 0 && r.frames[len(r.frames)-1].at.After(after)
	})
	return r.lastLoud(after)
}

// drain forgets the decisions so far: a benchmark's next iteration waits
// for its own.
func (o *talkOverLog) drain() {
	for {
		select {
		case <-o.events:
		default:
			return
		}
	}
}

// clockedMic is a microphone track that sends each frame as it is
// written, Opus-coded at 16 kHz: its feed is its clock, as a device's
// capture is. PCMLocalTrack sends from a buffer on a ticker of its own,
// which drops ticks on a busy machine: each kept a frame more in the
// buffer for good, so that the microphone, and the echo in it, came to
// the bot later and later.
type clockedMic struct {
	*webrtc.TrackLocalStaticSample
	enc media.PCM16Writer
}

func newClockedMic(tb testing.TB) *clockedMic {
	tb.Helper()
	track, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus}, "mic", "mic")
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := opus.Encode(media.FromSampleWriter[opus.Sample](track, voice.InputRate, voice.FrameDuration), 1, protoLogger.GetLogger())
	if err != nil {
		tb.Fatal(err)
	}
	return &clockedMic{track, enc}
}

func (m *clockedMic) WriteSample(frame media.PCM16Sample) error { return m.enc.WriteSample(frame) }

// clockedUser is listeningUser with a clocked microphone, fed until the
// test ends, whose first second of silence is sent; echo, when not nil,
// is what its speaker plays back into it.
func clockedUser(tb testing.TB, lk *testenv.LiveKit, cfg room.Config, conv, identity string, rec lkmedia.PCMRemoteTrackWriter, echo *echoPath) (*user, *micFeed) {
	tb.Helper()
	mic := newClockedMic(tb)
	u, _ := listeningUserWith(tb, lk, cfg, conv, identity, rec, mic)
	feed := feedMic(tb.Context(), mic, echo)
	tb.Cleanup(feed.stop)
	// A track drops what is written before it is bound.
	feed.say(tb.Context(), tb, speechtest.Silence(1000, voice.InputRate))
	return u, feed
}

// scope is a testing.TB whose cleanups run at close, not at the end of
// the test: the iterations of a benchmark that are each a conversation of
// their own end one by one. Kept open until the benchmark ended, the
// third conversation in a row lost its turn report.
type scope struct {
	testing.TB
	ctx      context.Context
	cancel   context.CancelFunc
	cleanups []func()
}

func newScope(tb testing.TB) *scope {
	ctx, cancel := context.WithCancel(tb.Context())
	s := &scope{TB: tb, ctx: ctx, cancel: cancel}
	// A failed iteration leaves its scope to the test's end.
	tb.Cleanup(s.close)
	return s
}

func (s *scope) Context() context.Context { return s.ctx }
func (s *scope) Cleanup(f func())         { s.cleanups = append(s.cleanups, f) }

// close cancels the scope's context, as testing does before cleaning up,
// and runs its cleanups, the last first.
func (s *scope) close() {
	s.cancel()
	for len(s.cleanups) > 0 {
		f := s.cleanups[len(s.cleanups)-1]
		s.cleanups = s.cleanups[:len(s.cleanups)-1]
		f()
	}
}
