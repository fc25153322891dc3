package voice

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/wire"
)

// Config configures a Stage.
type Config struct {
	Recognizer  Recognizer
	Synthesizer Synthesizer
	Endpoint    EndpointConfig
	// MinInterruption is how long the user must speak over the agent to
	// interrupt it, so that a cough or an "mm-hm" does not. Default
	// 500 ms, LiveKit Agents' min_interruption_duration.
	MinInterruption time.Duration
	// InterimEvery is how often an utterance in progress is recognised
	// for interim transcripts. Default 1 s; negative turns them off (a
	// streaming recogniser still sends its partials).
	InterimEvery time.Duration
	// Language is the recogniser's hint; Voice the synthesiser's voice.
	Language, Voice string
	Logger          *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MinInterruption <= 0 {
		c.MinInterruption = 500 * time.Millisecond
	}
	if c.InterimEvery == 0 {
		c.InterimEvery = time.Second
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
	out    AudioOut
	events *queue.Queue[func(*loop)]
	// done is closed when Run returns, so that callers stop waiting on a
	// stage that is gone.
	done chan struct{}
}

var _ pipeline.Speaker = (*Stage)(nil)

// New builds a stage. out may be nil for a conversation without a voice
// track; nothing is then synthesised.
func New(cfg Config, asker Asker, room Room, out AudioOut) *Stage {
	return &Stage{cfg: cfg.withDefaults(), asker: asker, room: room, out: out,
		events: queue.New[func(*loop)](), done: make(chan struct{})}
}

// loop is the state Run's goroutine owns.
type loop struct {
	s     *Stage
	ctx   context.Context
	wg    sync.WaitGroup
	turn  Turn
	play  *playback
	state State
}

// Run serves the stage until ctx ends, then stops what it started.
func (s *Stage) Run(ctx context.Context) {
	defer close(s.done)
	l := &loop{s: s, ctx: ctx}
	l.setState(StateListening)
	defer l.wg.Wait()
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

// do runs f on Run's goroutine and waits for it.
func (s *Stage) do(ctx context.Context, f func(*loop)) bool {
	ran := make(chan struct{})
	s.post(func(l *loop) { f(l); close(ran) })
	select {
	case <-ran:
		return true
	case <-s.done:
		return false
	case <-ctx.Done():
		return false
	}
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

func (s *Stage) speak(t Turn) { s.post(func(l *loop) { l.startTurn(t) }) }

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
	h := l.play.interrupt(l.s.out)
	l.play.turn.Heard(h)
	l.play = nil
	l.setState(StateListening)
}

// bargeIn: the user has spoken over the agent long enough.
func (l *loop) bargeIn() {
	if l.play == nil {
		return
	}
	l.s.cfg.Logger.Info("voice: barge-in; the agent stops speaking")
	l.stop(wire.StopAll)
}

func (l *loop) startTurn(t Turn) {
	if l.play != nil {
		l.play.interrupt(l.s.out)
		l.play = nil
	}
	l.turn = t
	l.setState(StateThinking)
	if l.s.out == nil || !l.s.room.WantsAudio() {
		// No one can hear it: no synthesis at all. The state goes back to
		// listening when the turn ends.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
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
	p := &playback{cancel: cancel, turn: t}
	l.play = p
	done := t.Speak()
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		defer done()
		defer cancel() // ends the watch below once the answer is spoken
		l.s.play(ctx, p, AnswerSegment(t.UserMessageID()))
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
