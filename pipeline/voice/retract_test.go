package voice_test

import (
	"context"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/speech"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

const (
	reasoningSpoken = "First I read the question. Then I think of the moon. And of the sun. "
	realAnswer      = "Tides follow the moon."
)

// thinkOpenModel streams reasoning as answer, three sentences, waits at
// the barrier release, then takes them back at a bare </think> (as the
// llm client reports it) and answers.
type thinkOpenModel struct {
	waiting, release chan struct{}
}

func (m *thinkOpenModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq[llm.Event] {
	return func(yield func(llm.Event) bool) {
		for _, s := range []string{"First I read the question. ", "Then I think of the moon. ", "And of the sun. "} {
			if !yield(llm.Event{Kind: llm.EventText, Text: s}) {
				return
			}
		}
		close(m.waiting)
		select {
		case <-m.release:
		case <-ctx.Done():
			yield(llm.Event{Kind: llm.EventError, Err: &llm.Error{Kind: llm.ErrCancelled}})
			return
		}
		for _, ev := range []llm.Event{{Kind: llm.EventRetract, Text: reasoningSpoken}, {Kind: llm.EventReasoning, Text: reasoningSpoken},
			{Kind: llm.EventText, Text: realAnswer}, {Kind: llm.EventFinish, Finish: llm.FinishStop}} {
			if !yield(ev) {
				return
			}
		}
	}
}

// gatedSynth says each sentence as two pieces of audio; for the first
// sentence it asks to speak, it closes taken once the stage has taken
// the first piece, and waits at gate before the second. It keeps the
// text of every request; said gets it once the stage has taken all of
// its audio.
type gatedSynth struct {
	gate, taken chan struct{}
	asked, said chan string

	mu    sync.Mutex
	texts []string
}

// chunk is 200 ms of audio at 16 kHz.
var chunk = make([]int16, 3200)

func (g *gatedSynth) Stream(ctx context.Context, req *speech.SynthesizeRequest) iter.Seq[speech.SynthesizeEvent] {
	g.mu.Lock()
	g.texts = append(g.texts, req.Text)
	first := len(g.texts) == 1
	g.mu.Unlock()
	g.asked <- req.Text
	return func(yield func(speech.SynthesizeEvent) bool) {
		if !yield(speech.SynthesizeEvent{Kind: speech.SynthesizeAudio, Samples: chunk, SampleRate: 16000}) {
			return
		}
		if first {
			close(g.taken)
			select {
			case <-g.gate:
			case <-ctx.Done():
				return
			}
		}
		if !yield(speech.SynthesizeEvent{Kind: speech.SynthesizeAudio, Samples: chunk, SampleRate: 16000}) {
			return
		}
		yield(speech.SynthesizeEvent{Kind: speech.SynthesizeDone})
		g.said <- req.Text
	}
}

// finalFace is a streaming member's face that tells when the answer's
// final sentence is sent.
type finalFace struct{ final chan struct{} }

func (f finalFace) Send(b wire.Body, _ ...string) {
	if s, ok := b.(*wire.AssistantSentence); ok && s.IsFinal {
		close(f.final)
	}
}

func (finalFace) Members() []pipeline.Member {
	return []pipeline.Member{{Identity: "alice", Features: wire.Features{Streaming: true}}}
}

// A spoken answer whose first sentences turn out to be reasoning (a bare
// </think> after them): the sentence playing stops, and those queued
// behind it are never synthesised; the real answer is.
func TestRetractedSentencesAreNotSpoken(t *testing.T) {
	model := &thinkOpenModel{waiting: make(chan struct{}), release: make(chan struct{})}
	engine := pipeline.NewEngine(pipeline.Config{LLM: model}, storage.NewMemory(storage.ReasoningPlain))
	conv := engine.Open("conv_voice_retract")
	defer conv.Close()

	synth := &gatedSynth{gate: make(chan struct{}), taken: make(chan struct{}), asked: make(chan string, 8), said: make(chan string, 8)}
	room := newRoom(true)
	out := &fakeOut{speed: 1}
	cfg := voice.Config{Recognizer: &speech.OpenAIRecognizer{URL: "http://unused.invalid/v1"}, Synthesizer: synth,
		EchoWarmup: -1, Cue: voice.CueOff, Logger: slog.New(slog.DiscardHandler)}
	face := finalFace{final: make(chan struct{})}
	st, leave := voice.Join(cfg, conv, face, room, out)
	defer leave()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Run(ctx) }()
	defer func() { cancel(); <-done }()
	go func() {
		for {
			select {
			case <-room.speech:
			case <-done:
				return
			}
		}
	}()

	turn := conv.Ask(ctx, face, "alice", &wire.UserMessage{ID: "msg_1", ConversationID: "conv_voice_retract", Content: "Why are there tides?"})
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	asked := func() string {
		t.Helper()
		select {
		case s := <-synth.asked:
			return s
		case <-time.After(30 * time.Second):
			t.Fatal("nothing more was synthesised")
			return ""
		}
	}
	// The first sentence plays; the model has streamed all three. Its
	// first piece is queued before the retraction: retracted sooner, it
	// would rightly never be (sound).
	if s := asked(); s != "First I read the question." {
		t.Fatalf("first synthesised %q", s)
	}
	wait("the first sentence's first audio", synth.taken)
	wait("the model's reasoning", model.waiting)
	close(model.release)
	wait("the answer", face.final)
	// Retracted now; the first sentence's synthesis goes on.
	close(synth.gate)
	if s := asked(); s != realAnswer {
		synth.mu.Lock()
		defer synth.mu.Unlock()
		t.Fatalf("synthesised %q after the retraction; all %q", s, synth.texts)
	}
	wait("the turn", turn.Done())
	// Once the answer's audio is all written, the first sentence's second
	// piece would have been too: it must not be.
	select {
	case s := <-synth.said:
		if s != realAnswer {
			t.Fatalf("%q was spoken to its end", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the answer was not spoken")
	}
	// The synthesiser has said it all once the stage wrote its last piece.
	written, _ := out.stats()
	synth.mu.Lock()
	texts := slices.Clone(synth.texts)
	synth.mu.Unlock()
	if keeps := out.kept(); !slices.Equal(texts, []string{"First I read the question.", realAnswer}) || keeps == 0 || written != 600*time.Millisecond {
		t.Fatalf("synthesised %q, %v written, the queue's end dropped %d times", texts, written, keeps)
	}
}
