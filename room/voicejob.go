package room

import (
	"context"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/wire"
)

// VoiceConfig turns the voice path on: every room gets the agent's voice
// track and listens to its users' microphones.
type VoiceConfig struct {
	Stage voice.Config
	// OutputRate is the synthesiser's sample rate, the voice track's
	// source rate.
	OutputRate int
}

// EnableVoice turns the voice path on for the rooms joined from now on.
func (a *Agent) EnableVoice(cfg VoiceConfig) { a.voice = &cfg }

// Spoken is what the voice path needs of a conversation beyond
// Conversation; *pipeline.Conversation has it.
type Spoken interface {
	Ask(ctx context.Context, face pipeline.Face, from string, m *wire.UserMessage) *pipeline.Turn
	Watch(f func(*pipeline.Turn)) (cancel func())
}

// voiceJob is one room's voice: its track, its stage and the microphones
// it listens to.
type voiceJob struct {
	cfg  VoiceConfig
	log  *slog.Logger
	mics *Mics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    *VoiceOut
	unwat  func()
}

func newVoiceJob(parent context.Context, cfg VoiceConfig, log *slog.Logger) *voiceJob {
	ctx, cancel := context.WithCancel(parent)
	return &voiceJob{cfg: cfg, log: log, mics: NewMics(ctx, log), ctx: ctx, cancel: cancel}
}

// start publishes the voice and starts listening, once the room is
// joined. Typed turns are spoken too, to clients that play audio.
func (v *voiceJob) start(r *lksdk.Room, sess *Session) {
	sp, ok := sess.conv.(Spoken)
	if !ok {
		v.log.Warn("voice: the conversation engine cannot take spoken turns")
		return
	}
	out, err := PublishVoice(r.LocalParticipant, v.cfg.OutputRate)
	if err != nil {
		v.log.Error("voice: publishing the voice track", "err", err)
		return
	}
	v.out = out
	wants := func() bool {
		for _, m := range sess.Members() {
			if slices.Contains(m.Features, wire.FeatureAudioOutput) {
				return true
			}
		}
		return false
	}
	send := func(_ context.Context, t *wire.Transcription) { sess.Send(t) }
	vr := NewVoiceRoom(r.LocalParticipant, sess.ID, send, wants, v.log)
	eng := &engineTurns{conv: sp, face: sess, conversationID: sess.ID}
	stage := voice.New(v.cfg.Stage, eng, vr, out)
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		stage.Run(v.ctx)
	}()
	// Turns asked by voice are spoken by the stage itself; the others
	// (typed) are handed to it here. Watch calls on the engine's
	// goroutine, so the hand-over goes through a goroutine of its own.
	v.unwat = sp.Watch(func(t *pipeline.Turn) {
		if eng.asked(t.UserID) {
			return
		}
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			stage.Speak(v.ctx, spokenTurn{t}, voice.AnswerSegment(t.UserID))
		}()
	})
	v.mics.Start(r, stage)
}

// stop ends the room's voice and waits for it.
func (v *voiceJob) stop() {
	if v.unwat != nil {
		v.unwat()
	}
	v.mics.Close()
	v.cancel()
	v.wg.Wait()
	if v.out != nil {
		_ = v.out.Close()
	}
}

// engineTurns starts the engine's turns from final transcripts.
type engineTurns struct {
	conv           Spoken
	face           pipeline.Face
	conversationID string

	mu  sync.Mutex
	ids map[string]bool // user message ids asked by voice
}

// asked reports whether voice asked the turn answering user message id,
// once: a later turn on the same message (a regenerated answer) is not.
func (e *engineTurns) asked(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := e.ids[id]
	delete(e.ids, id)
	return ok
}

// StartTurn implements voice.Engine: the final transcript is the user's
// message, with its id, exactly as if typed.
func (e *engineTurns) StartTurn(ctx context.Context, speaker, id, text string) (voice.Turn, error) {
	e.mu.Lock()
	if e.ids == nil {
		e.ids = map[string]bool{}
	}
	e.ids[id] = true
	e.mu.Unlock()
	m := &wire.UserMessage{ID: id, ConversationID: e.conversationID, Content: text, Timestamp: time.Now().UnixMilli()}
	t := e.conv.Ask(ctx, e.face, speaker, m)
	if t == nil {
		return nil, context.Cause(ctx)
	}
	return spokenTurn{t}, nil
}

// spokenTurn is the engine's turn as the voice stage sees it.
type spokenTurn struct{ t *pipeline.Turn }

func (s spokenTurn) Sentences(ctx context.Context) iter.Seq[voice.Sentence] {
	return func(yield func(voice.Sentence) bool) {
		for x := range s.t.Sentences(ctx) {
			if !yield(voice.Sentence{Seq: int(x.Sequence), Text: x.Text,
				Code: slices.Contains(x.Markdown, wire.MarkdownCode), Emphasis: slices.Contains(x.Markdown, wire.MarkdownEmphasis)}) {
				return
			}
		}
	}
}

func (s spokenTurn) Interrupt(kind voice.StopKind) { s.t.Interrupt(wire.StopType(kind)) }
func (s spokenTurn) Speaking() func()              { return s.t.Speak() }
func (s spokenTurn) Hushed() <-chan struct{}       { return s.t.SpeechInterrupted() }
func (s spokenTurn) Done() <-chan struct{}         { return s.t.Done() }

// Heard keeps the answer as heard: the sentences played in full, and the
// one the user interrupted, marked as such.
func (s spokenTurn) Heard(h voice.Heard) {
	text := h.Text
	if h.Partial != "" {
		if text != "" {
			text += " "
		}
		text += "[interrupted by the user during: " + h.Partial + "]"
	}
	s.t.Heard(text)
}
