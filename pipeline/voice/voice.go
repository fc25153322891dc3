// Package voice is Alicia's speech stage: it listens to each speaker's
// audio, finds where utterances end, turns them into transcripts that start
// turns exactly as typed messages do, speaks the answer's sentences as
// soon as each is complete, and stops speaking when the user talks over
// it.
//
// The stage knows nothing of LiveKit. It speaks every turn of its
// conversation (it is the conversation's pipeline.Speaker) and names the
// ports it needs: an Asker that starts turns from final transcripts, an
// AudioOut that plays PCM at real-time pace, and a Room that carries
// transcripts and the agent's state to the participants. The room
// package binds them to LiveKit tracks and its session's writer; a test
// binds them to memory.
//
// Speech recognition and synthesis sit behind Recognizer and Synthesizer,
// the ports it declares in speech.go, which the speech package's clients
// implement.
package voice

import (
	"context"
	"iter"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/wire"
)

// InputRate is the sample rate the stage wants from its inputs: 16 kHz
// mono, what speech recognisers and the WebRTC VAD expect.
const InputRate = speech.RecognitionRate

// UserSegment and AnswerSegment are the transcript segment ids of a user's
// utterance and of an answer, by its id. LiveKit's clients merge
// transcript updates by segment id, so no two may share one: not an
// utterance and its answer, nor two answers to one message (a stock
// client would replace the earlier answer with the regenerated one).
func UserSegment(messageID string) string  { return "SG_" + messageID }
func AnswerSegment(answerID string) string { return "SG_answer_" + answerID }

// answerSegment is the segment of t's answer; a turn that does not say
// its answer's id (a test's fake) is named by its user message.
func answerSegment(t Turn) string {
	if id := answerID(t); id != "" {
		return AnswerSegment(id)
	}
	return AnswerSegment(t.UserMessageID())
}

// answerID is the id of the answer t writes, if t says it
// (*pipeline.Turn does; a test's fake need not).
func answerID(t Turn) string {
	if a, ok := t.(interface{ AnswerID() string }); ok {
		return a.AnswerID()
	}
	return ""
}

// Turn is a running turn as the engine hands it out: *pipeline.Turn, or a
// test's fake.
type Turn interface {
	// UserMessageID is the message the turn answers.
	UserMessageID() string
	// Sentences yields the answer's sentences in order; the sequence ends
	// when the answer is complete, the generation was interrupted, or ctx
	// is done (speech stopped while the model goes on).
	Sentences(ctx context.Context) iter.Seq[pipeline.Sentence]
	// Interrupt stops the generation (wire.StopGeneration, StopAll) and
	// tells every speech consumer to go quiet (StopSpeech, StopAll).
	Interrupt(kind wire.StopType) bool
	// Speak marks the stage as playing the turn until the returned func
	// is called; meanwhile a stop of speech from elsewhere (a client's
	// ControlStop) closes SpeechInterrupted.
	Speak() (done func())
	SpeechInterrupted() <-chan struct{}
	// Heard tells the engine what the user actually heard of an answer
	// cut short, so that the stored assistant message says so.
	Heard(h pipeline.Heard)
	// Done is closed when the turn has ended and been stored.
	Done() <-chan struct{}
	// Timing is the model's timings so far; Measure holds the turn's
	// report until the stage adds its own stages (pipeline.Turn.Measure).
	Timing() pipeline.Timing
	Measure() (report func(interrupted bool, stages ...pipeline.Timed))
}

var _ Turn = (*pipeline.Turn)(nil)

// Asker starts a turn from a final transcript. id is the final
// Transcription's id, which is the user message's. The turn comes back
// to the stage through Speak, like every other turn of the conversation.
type Asker interface {
	Ask(ctx context.Context, speaker, id, text string) error
}

// Preempter is an Asker that can also start, held, the turn a final
// transcript would start, before the end of the speaker's turn is
// confirmed (pipeline.Conversation.Preempt): nothing of it is seen or
// stored unless Ask follows with the same id and words. Withdraw
// discards it. Neither may wait on the turn.
type Preempter interface {
	Preempt(ctx context.Context, speaker, id, text string) bool
	Withdraw(id string)
}

// preempter is a conversation that takes preemptive turns:
// *pipeline.Conversation.
type preempter interface {
	Preempt(ctx context.Context, face pipeline.Face, from string, m *wire.UserMessage, opts ...pipeline.AskOption) *pipeline.Turn
	Withdraw(id string)
}

// Conversation is the engine's side of a conversation the stage is the
// voice of: *pipeline.Conversation.
type Conversation interface {
	Ask(ctx context.Context, face pipeline.Face, from string, m *wire.UserMessage, opts ...pipeline.AskOption) *pipeline.Turn
	Attach(s pipeline.Speaker) (detach func())
}

// Join makes a new stage the voice of conv: its speakers' final
// transcripts are asked through face, and every turn conv starts, typed
// or spoken, is spoken. Run the stage; leave detaches it.
func Join(cfg Config, conv Conversation, face pipeline.Face, room Room, out AudioOut) (s *Stage, leave func()) {
	s = New(cfg, asker{conv, face}, room, out)
	return s, conv.Attach(s)
}

// asker asks conv through face: a final transcript is the speaker's user
// message, with its id, as if typed, and the turn thinks as spoken turns
// do (within their reasoning budget, by default).
type asker struct {
	conv Conversation
	face pipeline.Face
}

func (a asker) Ask(ctx context.Context, speaker, id, text string) error {
	m := &wire.UserMessage{ID: id, Content: text, Timestamp: time.Now().UnixMilli()}
	if a.conv.Ask(ctx, a.face, speaker, m, pipeline.Spoken()) == nil {
		return context.Cause(ctx)
	}
	return nil
}

func (a asker) Preempt(ctx context.Context, speaker, id, text string) bool {
	p, ok := a.conv.(preempter)
	if !ok {
		return false
	}
	m := &wire.UserMessage{ID: id, Content: text, Timestamp: time.Now().UnixMilli()}
	return p.Preempt(ctx, a.face, speaker, m, pipeline.Spoken()) != nil
}

func (a asker) Withdraw(id string) {
	if p, ok := a.conv.(preempter); ok {
		p.Withdraw(id)
	}
}

// Transcript is recognised speech of one speaker's utterance. Every update
// of one utterance has the same ID. An utterance that asks nothing (noise,
// a listener's "mm-hm") ends with an empty interim update if any interim
// one went out, never with a final one: a final transcript is the user's
// turn.
type Transcript struct {
	ID      string
	Speaker string
	// TrackID is the speaker's microphone track.
	TrackID string
	Text    string
	Final   bool
}

// AgentSpeech is the agent's transcript as its audio plays: each Text
// follows the previous one verbatim (spaces included) and holds the
// words whose audio has begun. The answer's last one has Final set; an
// answer cut short ends with Cut, at the word where its audio stopped.
type AgentSpeech struct {
	// SegmentID is the same for every part of one answer, and for every
	// answer to one user message; AnswerID tells those answers apart
	// (empty for a turn that does not say its answer's id).
	SegmentID string
	AnswerID  string
	TrackID   string
	Text      string
	Final     bool
	Cut       bool
}

// State is the agent's state as LiveKit's clients show it
// (the lk.agent.state attribute).
type State string

const (
	StateInitializing State = "initializing"
	StateListening    State = "listening"
	StateThinking     State = "thinking"
	StateSpeaking     State = "speaking"
)

// Observer hears what the stage decided about talk over the agent, for
// metrics. Its methods must return at once.
type Observer interface {
	// Interrupted: the user talked over the agent and it stopped.
	Interrupted()
	// FalseInterruption: talk over the agent that held no words (a cough,
	// an "mm-hm", noise); its speech resumed.
	FalseInterruption()
	// Unrecognised: speech that gave no transcript; no turn started.
	Unrecognised()
	// NoiseIgnored: a sound over the agent that was not voice (a cough,
	// a click, a door); the agent did not pause for it.
	NoiseIgnored()
	// EchoRejected: sound in a user's microphone that was the agent's
	// own voice coming back; it neither paused nor stopped the agent.
	EchoRejected()
}

type noObserver struct{}

func (noObserver) Interrupted()       {}
func (noObserver) FalseInterruption() {}
func (noObserver) Unrecognised()      {}
func (noObserver) NoiseIgnored()      {}
func (noObserver) EchoRejected()      {}

// Room carries what the stage says to the participants.
type Room interface {
	// Transcript sends an interim or final transcript.
	Transcript(ctx context.Context, t Transcript)
	// AgentSpeech publishes a sentence the agent is speaking.
	AgentSpeech(ctx context.Context, s AgentSpeech)
	// SetState publishes the agent's state.
	SetState(ctx context.Context, s State)
	// SpeechProblem tells the participants that speech is unavailable;
	// the stage says it once per outage.
	SpeechProblem(ctx context.Context, p SpeechProblem)
	// Members are the participants with what each client announced, as
	// data: the stage decides from their features whether anyone hears
	// it (audio_output) and what cue they asked for.
	Members() []pipeline.Member
}

// AudioOut plays PCM at real-time pace.
type AudioOut interface {
	// Write queues samples at rate after those already queued, resampling
	// them to the output's rate.
	Write(samples []int16, rate int) error
	// Pause stops playing at once and holds what is queued, and whatever
	// is written meanwhile, for Resume, which plays it from where it
	// stopped: talk over the agent that may be only a cough.
	Pause()
	Resume()
	// Clear drops every queued or held sample at once, and ends a pause.
	Clear()
	// Keep drops what is queued or held beyond the next d of it, and
	// leaves a pause a pause: the end of an answer taken back.
	Keep(d time.Duration)
	// Queued is how much queued audio has not been played yet.
	Queued() time.Duration
	// TrackID names the published track, for transcripts.
	TrackID() string
}
