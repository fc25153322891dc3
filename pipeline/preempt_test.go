package pipeline_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// preemptions counts preemptive turns by outcome and keeps the turns'
// reports: the engine's telemetry, as /metrics hears it.
type preemptions struct {
	mu       sync.Mutex
	outcomes map[string]int
	reports  []pipeline.TurnReport
}

func (p *preemptions) Preempted(outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outcomes == nil {
		p.outcomes = map[string]int{}
	}
	p.outcomes[outcome]++
}

func (p *preemptions) TurnEnded(r pipeline.TurnReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, r)
}

func (p *preemptions) counts() (taken, used, discarded int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outcomes[pipeline.PreemptTaken], p.outcomes[pipeline.PreemptUsed], p.outcomes[pipeline.PreemptDiscarded]
}

// preemptRig is an engine whose model answers a question about the moon
// with reasoning and a first sentence, then waits for release before it
// ends the answer; any other question it answers at once.
func preemptRig(t *testing.T) (*rig, *preemptions) {
	store := storage.NewMemory(storage.ReasoningPlain)
	store.SaveConversation(storage.Conversation{ID: "conv_fake", Owner: "alice", CreatedAt: time.Now()})
	m := newModel(func(req *llm.Request) []*llm.Event {
		q := req.Messages[len(req.Messages)-1].Content
		if strings.HasSuffix(strings.ToLower(strings.TrimRight(q, "?")), "moon") {
			return []*llm.Event{think("Held reasoning."), think("\n\n"), say("Held answer about " + q + ". "), say("Still held. "), say("More. "), nil, say("The end."), finish}
		}
		return plain(req)
	})
	obs := &preemptions{}
	e := pipeline.NewEngine(pipeline.Config{LLM: m, Thinking: true, Telemetry: obs}, store)
	c := e.Open("conv_fake")
	t.Cleanup(c.Close)
	return &rig{engine: e, store: store, model: m, conv: c}, obs
}

func stored(t *testing.T, r *rig) []storage.Entry {
	h, err := r.store.History(context.Background(), "conv_fake")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A turn started while the speaker pauses runs to the model at once but
// stays invisible (nothing sent, stored or handed to speech) until the
// final transcript confirms it; then what it held goes out, in order,
// and it goes on live as the turn asked.
func TestPreemptiveTurnHeldThenUsed(t *testing.T) {
	r, obs := preemptRig(t)
	face := newFace(streamingFull)
	spoken := make(chan *pipeline.Turn, 2)
	r.conv.Attach(speakerFunc(func(t *pipeline.Turn) { spoken <- t }))
	ctx := context.Background()

	held := r.conv.Preempt(ctx, face, "alice", &wire.UserMessage{ID: "msg_1", Content: "how far is the moon"}, pipeline.Spoken())
	if held == nil {
		t.Fatal("the preemptive turn was not taken")
	}
	// The turn has its second sentence: a live turn would have sent its
	// steps, StartAnswer and first sentence, and stored the question, by
	// now (the engine sends a sentence before it makes the next).
	n := 0
	for range held.Sentences(ctx) {
		if n++; n == 2 {
			break
		}
	}
	face.mu.Lock()
	early := slices.Clone(face.sent)
	face.mu.Unlock()
	if len(early) != 0 || len(stored(t, r)) != 0 || len(spoken) != 0 {
		t.Fatalf("a held turn showed: sent %s, stored %+v, spoken %d", describeBodies(early), stored(t, r), len(spoken))
	}

	turn := r.conv.Ask(ctx, face, "alice", &wire.UserMessage{ID: "msg_1", Content: "How far is the moon?"}, pipeline.Spoken())
	if turn != held || !turn.Preemptive() || len(spoken) != 1 || <-spoken != turn {
		t.Fatalf("the confirmed turn %v (preemptive %v) was not the held one handed to speech", turn, turn != nil && turn.Preemptive())
	}
	// What it held is out at once, in order: reasoning, the answer's start
	// and its sentences so far.
	sent := face.until(t, "the held sentences", func(b []sentBody) bool { return len(all[*wire.AssistantSentence](b)) >= 2 })
	types := describeBodies(sent)
	if !strings.HasPrefix(types, "ReasoningStep") || strings.Index(types, "StartAnswer") > strings.Index(types, "AssistantSentence") {
		t.Fatalf("released out of order: %s", types)
	}
	close(r.model.release)
	face.until(t, "the final sentence", finalOf)
	<-turn.Done()
	h := stored(t, r)
	if len(h) != 2 || h[0].ID != "msg_1" || h[0].Content != "how far is the moon" || h[1].Status != storage.StatusComplete || !strings.HasSuffix(h[1].Content, "The end.") {
		t.Fatalf("stored %+v", h)
	}
	r.conv.Close() // a barrier: every turn has ended and reported
	if taken, used, discarded := obs.counts(); taken != 1 || used != 1 || discarded != 0 {
		t.Fatalf("taken %d, used %d, discarded %d", taken, used, discarded)
	}
	if len(obs.reports) != 1 || !obs.reports[0].Preemptive || obs.reports[0].UserMessageID != "msg_1" {
		t.Fatalf("reports %+v", obs.reports)
	}
}

// A held turn whose words the final transcript does not confirm, or
// whose speaker went on talking, is cancelled without a trace: the
// answer to what was really asked is the only one any client sees, the
// store keeps, or telemetry reports.
func TestPreemptiveTurnDiscarded(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then follows the held turn on msg_1 and asks the real question.
		then func(r *rig, face *fakeFace) (id, question string)
	}{
		{"transcript changed", func(r *rig, face *fakeFace) (string, string) {
			r.conv.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_1", Content: "how far is the moon from mars"}, pipeline.Spoken())
			return "msg_1", "how far is the moon from mars"
		}},
		{"speaker went on", func(r *rig, face *fakeFace) (string, string) {
			r.conv.Withdraw("msg_1")
			r.ask(face, 1, "msg_2", "what about mars")
			return "msg_2", "what about mars"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, obs := preemptRig(t)
			face := newFace(streamingFull)
			spoken := make(chan *pipeline.Turn, 2)
			r.conv.Attach(speakerFunc(func(t *pipeline.Turn) { spoken <- t }))
			if r.conv.Preempt(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_1", Content: "how far is the moon"}, pipeline.Spoken()) == nil {
				t.Fatal("the preemptive turn was not taken")
			}
			<-r.model.waiting
			id, question := tc.then(r, face)
			// The conversation is ordered: the real answer is the barrier
			// before which the held one would have shown.
			sent := face.until(t, "the real answer", finalOf)
			r.conv.Close() // and every turn has ended, the held one too
			for _, b := range sent {
				if strings.Contains(describeBodies([]sentBody{b}), "ReasoningStep") {
					if st := b.body.(*wire.ReasoningStep); strings.Contains(st.Content, "Held") {
						t.Fatalf("a discarded step was sent: %+v", st)
					}
				}
			}
			if a := answerOf(sent); strings.Contains(a, "Held") || !strings.Contains(a, question) || count[*wire.StartAnswer](sent) != 1 {
				t.Fatalf("sent %s: answer %q", describeBodies(sent), a)
			}
			h := stored(t, r)
			var ids []string
			for _, e := range h {
				ids = append(ids, e.ID)
				if strings.Contains(e.Content, "Held") || len(e.Steps) > 0 && strings.Contains(e.Steps[0].Content, "Held") {
					t.Fatalf("the discarded turn was stored: %+v", e)
				}
			}
			if len(h) != 2 || h[0].ID != id || h[0].Content != question {
				t.Fatalf("stored %v: %+v", ids, h)
			}
			if len(spoken) != 1 || (<-spoken).Preemptive() {
				t.Fatal("speech was handed the discarded turn")
			}
			if taken, used, discarded := obs.counts(); taken != 1 || used != 0 || discarded != 1 {
				t.Fatalf("taken %d, used %d, discarded %d", taken, used, discarded)
			}
			if len(obs.reports) != 1 || obs.reports[0].Preemptive || obs.reports[0].UserMessageID != id {
				t.Fatalf("reports %+v", obs.reports)
			}
		})
	}
}

// No guess replaces an answer being thought: while a turn runs, a
// preemptive one is refused.
func TestPreemptRefusedWhileATurnRuns(t *testing.T) {
	r, obs := preemptRig(t)
	face := newFace(streamingFull)
	running := r.conv.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_1", Content: "how far is the moon"}, pipeline.Spoken())
	<-r.model.waiting
	if r.conv.Preempt(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_2", Content: "and mars"}, pipeline.Spoken()) != nil {
		t.Fatal("a preemptive turn was taken while a turn ran")
	}
	close(r.model.release)
	<-running.Done()
	if taken, _, _ := obs.counts(); taken != 0 {
		t.Fatalf("taken %d", taken)
	}
}
