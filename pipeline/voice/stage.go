package voice

import (
	"context"
	"flag"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice/echo"
	"github.com/alicia-voice/alicia/wire"
)

// Config configures a Stage.
type Config struct {
	Recognizer  Recognizer
	Synthesizer Synthesizer
	Endpoint    EndpointConfig
	// MinInterruption is how long the user must speak over the agent to
	// stop it when no word but backchannels was recognised: long enough
	// that it cannot be one ("mm-hmm", "uh-huh", "okay right" last 400 to
	// 900 ms). Default 2 s. The agent's audio pauses at the onset of the
	// speech already; words stop it sooner, and a transcript of none
	// resumes it (FalseInterruption).
	MinInterruption time.Duration
	// FalseInterruption is how long after talk over the agent ends the
	// paused speech waits for a word before it resumes. Default 2 s,
	// LiveKit Agents' false_interruption_timeout; it resumes sooner once
	// the utterance's transcript is known to hold none.
	FalseInterruption time.Duration
	// EchoWarmup: during the first EchoWarmup of the agent's speech in a
	// conversation only words interrupt it, and nothing pauses it, as
	// LiveKit Agents' aec_warmup_duration (3 s) does for clients' own
	// cancellers. The stage takes the agent's own voice out of every
	// microphone itself (echo.Suppressor), and finds a speakerphone's echo
	// path within the first 0.4 s of its echo, over LiveKit too
	// (TestEchoOverLiveKit runs without a warm-up): it is off by default,
	// kept for clients whose own canceller lets echo through as it
	// settles. Zero or negative: off.
	EchoWarmup time.Duration
	// Observer hears interruptions, for metrics.
	Observer Observer
	// Cue is what plays while the model thinks (default sound); a client
	// may ask for another (wire.FeatureThinkingCue). CueAfter is when it starts,
	// from the end of the user's speech (from the turn's start for a typed
	// one) if no answer is audible by then. Default 1 s: the endpointing
	// delay is inside it.
	Cue      CueMode
	CueAfter time.Duration
	// InterimEvery is how often an utterance in progress is recognised
	// for interim transcripts. Default 1 s; negative turns them off (a
	// streaming recogniser still sends its partials).
	InterimEvery time.Duration
	// Language is the recogniser's hint; Voice the synthesiser's voice.
	Language, Voice string
	// Preemptive starts the turn while the speaker pauses, before the
	// end of the utterance is decided, from a recognition of what was
	// said so far; it stays invisible until the final transcript
	// confirms it (pipeline.Conversation.Preempt), and is dropped
	// otherwise. It needs an Asker that is a Preempter. The flag's
	// default is on, as LiveKit Agents' preemptive_generation.
	Preemptive bool
	// SlowTurn: a spoken turn whose answer is first heard later than
	// this after the end of the user's speech is logged with each of its
	// stages. 0 turns it off.
	SlowTurn time.Duration
	Logger   *slog.Logger
}

// Flags registers the turn-taking settings on fs; the providers are set
// apart (ProviderConfig).
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.DurationVar(&c.MinInterruption, "voice-min-interruption", defaultMinInterruption, "how long speech over the agent must last, without a recognised word but backchannels, to stop it (its audio pauses at the speech's onset; words stop it sooner)")
	fs.DurationVar(&c.FalseInterruption, "voice-false-interruption", defaultFalseInterruption, "how long after speech over the agent ends its paused audio waits for a word before it resumes")
	fs.DurationVar(&c.EchoWarmup, "voice-echo-warmup", defaultEchoWarmup, "at the start of the agent's first speech, how long only words interrupt it, for clients whose own echo canceller is still settling; 0: off")
	fs.DurationVar(&c.Endpoint.MinSpeech, "voice-min-speech", defaultMinSpeech, "how long voice must last to count as speech (and pause the agent)")
	fs.DurationVar(&c.Endpoint.Silence, "voice-endpoint-silence", defaultSilence, "the silence that ends an utterance")
	fs.TextVar(&c.Cue, "voice-thinking-cue", CueSound, "what plays while the model thinks and no answer is audible yet: sound, phrase or off (a client may ask otherwise with the feature thinking_cue:<mode>)")
	fs.DurationVar(&c.CueAfter, "voice-cue-after", defaultCueAfter, "how long after the end of the user's speech the thinking cue starts if no answer is audible")
	fs.DurationVar(&c.Endpoint.AdaptiveMin, "voice-endpoint-adaptive-min", defaultAdaptiveMin, "the shortest silence that ends an utterance once it follows the speaker's pauses (a quick speaker)")
	fs.DurationVar(&c.Endpoint.AdaptiveMax, "voice-endpoint-adaptive-max", 2*time.Second, "the longest silence that ends an utterance once it follows the speaker's pauses (a slow speaker); 0: off, every utterance ends after -voice-endpoint-silence")
	fs.DurationVar(&c.Endpoint.UnfinishedSilence, "voice-endpoint-unfinished-silence", defaultUnfinishedSilence, "the silence that ends an utterance whose words look unfinished")
	fs.BoolVar(&c.Preemptive, "voice-preemptive-generation", true, "start thinking about the answer while the user pauses, before the end of their turn is decided; nothing of it is seen, heard or stored unless the final transcript confirms it")
	fs.DurationVar(&c.SlowTurn, "voice-slow-turn", 1500*time.Millisecond, "log a spoken turn, with each stage's time, when its answer is first heard later than this after the end of the user's speech (0: off)")
}

func (c Config) withDefaults() Config {
	if c.MinInterruption <= 0 {
		c.MinInterruption = defaultMinInterruption
	}
	if c.InterimEvery == 0 {
		c.InterimEvery = time.Second
	}
	if c.FalseInterruption <= 0 {
		c.FalseInterruption = defaultFalseInterruption
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if !c.Cue.Valid() {
		c.Cue = CueSound
	}
	if c.CueAfter <= 0 {
		c.CueAfter = defaultCueAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Stage is the speech stage of one conversation. Run owns every goroutine
// it starts; the other methods hand work to Run without waiting for it
// and are safe to call from any goroutine, the SDK's and the engine's
// included.
type Stage struct {
	cfg    Config
	asker  Asker
	room   Room
	out    *track
	events *queue.Queue[func(*loop)]
	// done is closed when Run returns, so that callers stop waiting on a
	// stage that is gone.
	done    chan struct{}
	outages outages
	// sent is what the agent's voice sent: the echo each microphone's
	// audio is cleaned of.
	sent *echo.Reference
}

var _ pipeline.Speaker = (*Stage)(nil)

// New builds a stage. out may be nil for a conversation without a voice
// track; nothing is then synthesised.
func New(cfg Config, asker Asker, room Room, out AudioOut) *Stage {
	return &Stage{cfg: cfg.withDefaults(), asker: asker, room: room, out: newTrack(out),
		events: queue.New[func(*loop)](), done: make(chan struct{}), sent: &echo.Reference{}}
}

// Sent takes each frame of sound the agent's voice sent, at rate, as it
// left at at: the reference against which each microphone's audio is
// cleaned of the agent's own voice coming back (a speakerphone without
// an echo canceller). Frames not sent, paused or silent, are silence in
// it. The voice track's clock calls it: it copies the frame and never
// waits.
func (s *Stage) Sent(frame []int16, rate int, at time.Time) { s.sent.Write(frame, rate, at) }

// loop is the state Run's goroutine owns.
type loop struct {
	s     *Stage
	ctx   context.Context
	wg    sync.WaitGroup
	turn  Turn
	play  *playback
	state State
	// over is the talk over the agent whose transcript is still to come,
	// by utterance id; paused the talk that holds its audio paused ("" for
	// none); the timer resumes a pause no word came in to confirm.
	over   map[string]talk
	paused string
	resume *time.Timer
	// spoke is when the agent's speech first played in this
	// conversation: the echo warm-up counts from it.
	spoke time.Time
	// ended is when each recent utterance's voice ended (and was
	// recognised), by the id of the question it asks: the cue of the turn
	// answering it counts from there, and its report too.
	ended map[string]heardAt
	// phrase is the last phrase cue said, so as not to say it twice.
	phrase int
	// asked is the last question asked by voice; addsTo the utterance
	// that began while its answer was still being thought.
	asked  question
	addsTo string
	// voiced is the last turn whose answer began to play. The state
	// cannot tell: a stop of speech sets it back to listening while the
	// model may go on.
	voiced Turn
}

// Run serves the stage until ctx ends, then stops what it started.
func (s *Stage) Run(ctx context.Context) {
	defer close(s.done)
	l := &loop{s: s, ctx: ctx, ended: map[string]heardAt{}, over: map[string]talk{}}
	l.setState(StateListening)
	defer l.wg.Wait()
	defer l.stopResume()
	for {
		select {
		case <-ctx.Done():
			if l.play != nil {
				l.play.cancel()
			}
			return
		case <-s.events.Ready():
			for _, ev := range s.events.Take() {
				ev(l)
			}
		}
	}
}

// post hands f to Run without waiting; once Run is gone it is never run.
func (s *Stage) post(f func(*loop)) { s.events.Push(f, 0) }

// ask runs f on s's Run goroutine and waits for its result; false when
// the stage or ctx ended first. The result comes back over a channel,
// never through a variable f shares with the caller: f may still run
// after the caller gave up waiting.
func ask[T any](ctx context.Context, s *Stage, f func(*loop) T) (T, bool) {
	res := make(chan T, 1)
	s.post(func(l *loop) { res <- f(l) })
	select {
	case v := <-res:
		return v, true
	case <-s.done:
	case <-ctx.Done():
	}
	var zero T
	return zero, false
}

func (l *loop) setState(st State) {
	if l.state != st {
		l.state = st
		l.s.room.SetState(l.ctx, st)
	}
}

// Speak implements pipeline.Speaker: the conversation hands the stage
// every turn it starts, typed or spoken, and the stage speaks its answer
// in place of any speech in progress.
func (s *Stage) Speak(t *pipeline.Turn) { s.speak(t) }

func (s *Stage) speak(t Turn) {
	report := t.Measure()
	select {
	case <-s.done:
		report(false) // never spoken: the turn reports without speech
		return
	default:
	}
	s.post(func(l *loop) { l.startTurn(t, report) })
}

// stop is a stop of speech, of the generation or of both, as ControlStop
// says: speech stops the audio at once and keeps the generation,
// generation stops the model and lets what was generated be spoken.
func (l *loop) stop(kind wire.StopType) {
	if kind != wire.StopGeneration {
		l.hush()
	}
	if l.turn != nil {
		l.turn.Interrupt(kind)
	}
}

// hush stops the answer being spoken, at once, and tells the turn how
// much was heard.
func (l *loop) hush() {
	if l.play == nil {
		return
	}
	l.silence()
	l.setState(StateListening)
}

// silence clears the answer being spoken, ends its transcript where its
// audio stopped, and tells its turn how much was heard.
func (l *loop) silence() {
	if h, whole := l.play.interrupt(l.s.out); !whole {
		l.s.room.AgentSpeech(l.ctx, AgentSpeech{SegmentID: answerSegment(l.play.turn), AnswerID: answerID(l.play.turn), TrackID: l.s.out.TrackID(), Cut: true})
		l.play.turn.Heard(h)
	}
	l.play = nil
	// The talk over it is still judged when its transcript comes: an
	// "uh-huh" does not become a question because the answer has gone.
	l.paused = ""
	l.stopResume()
}

func (l *loop) startTurn(t Turn, report func(bool, ...pipeline.Timed)) {
	if l.play != nil {
		l.silence()
	}
	l.turn = t
	l.setState(StateThinking)
	heard, spoken := l.ended[t.UserMessageID()]
	delete(l.ended, t.UserMessageID())
	if l.s.out == nil || !wantsAudio(l.s.room.Members()) {
		// No one can hear it: no synthesis at all. The state goes back to
		// listening when the turn ends.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { report(false, turnTimes{heard: heard}.stages()...) }()
			select {
			case <-t.Done():
			case <-l.ctx.Done():
				return
			}
			l.s.post(func(l *loop) {
				if l.turn == t && l.play == nil {
					l.setState(StateListening)
				}
			})
		}()
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	p := &playback{cancel: cancel, turn: t, times: turnTimes{heard: heard}, report: report, grew: make(chan struct{}, 1)}
	l.play = p
	done := t.Speak()
	if src := l.cue(); src != nil {
		at := heard.speechEnd
		if !spoken {
			at = time.Now()
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.s.playCue(ctx, p, at.Add(l.s.cfg.CueAfter-outputLatency), src)
		}()
	}
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		defer done()
		// Once the cue can write no more: its first audio may be the
		// turn's.
		defer l.s.measured(p)
		defer cancel() // ends the watch below once the answer is spoken
		l.s.play(ctx, p, answerSegment(t))
	}()
	go func() {
		// A stop of speech the engine received (a client's ControlStop).
		defer l.wg.Done()
		select {
		case <-t.SpeechInterrupted():
			l.s.post(func(l *loop) {
				if l.play == p {
					l.hush()
				}
			})
		case <-ctx.Done():
		}
	}()
}
