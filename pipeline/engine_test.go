package pipeline_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// fakeFace is an in-memory face: it keeps every body sent, with its
// addressees, and wakes whoever waits for one.
type fakeFace struct {
	mu      sync.Mutex
	members []pipeline.Member
	sent    []sentBody
	more    chan struct{}
}

type sentBody struct {
	body wire.Body
	to   []string
}

func newFace(members ...pipeline.Member) *fakeFace {
	return &fakeFace{members: members, more: make(chan struct{})}
}

func (f *fakeFace) Members() []pipeline.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

func (f *fakeFace) Send(body wire.Body, to ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, sentBody{body, to})
	close(f.more)
	f.more = make(chan struct{})
}

// until waits for pred to hold over what was sent; the face is woken by
// every send, so no polling and no sleeping.
func (f *fakeFace) until(t testing.TB, what string, pred func([]sentBody) bool) []sentBody {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		got, more := slices.Clone(f.sent), f.more
		f.mu.Unlock()
		if pred(got) {
			return got
		}
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; sent %s", what, describeBodies(got))
		}
	}
}

func describeBodies(b []sentBody) string {
	var out []string
	for _, s := range b {
		out = append(out, fmt.Sprintf("%s%v", (&wire.Envelope{Body: s.body}).Type(), s.to))
	}
	return strings.Join(out, " ")
}

func count[T wire.Body](b []sentBody) int {
	n := 0
	for _, s := range b {
		if _, ok := s.body.(T); ok {
			n++
		}
	}
	return n
}

func all[T wire.Body](b []sentBody) []T {
	var out []T
	for _, s := range b {
		if v, ok := s.body.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func finalOf(b []sentBody) bool {
	return slices.ContainsFunc(all[*wire.AssistantSentence](b), func(s *wire.AssistantSentence) bool { return s.IsFinal })
}

// model is a scripted llm.Client: each request gets the events answer
// returns for it; a nil event waits at that point until release is
// closed or the turn is cancelled. It keeps every request.
type model struct {
	mu       sync.Mutex
	requests []*llm.Request
	answer   func(req *llm.Request) []*llm.Event
	release  chan struct{}
	waiting  chan struct{} // closed when a stream reaches a nil event
}

func newModel(answer func(*llm.Request) []*llm.Event) *model {
	return &model{answer: answer, release: make(chan struct{}), waiting: make(chan struct{})}
}

func (m *model) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	m.mu.Lock()
	cp := *req
	cp.Messages = slices.Clone(req.Messages)
	m.requests = append(m.requests, &cp)
	m.mu.Unlock()
	return func(yield func(llm.Event) bool) {
		for _, ev := range m.answer(req) {
			if ev == nil {
				m.mu.Lock()
				select {
				case <-m.waiting:
				default:
					close(m.waiting)
				}
				m.mu.Unlock()
				select {
				case <-m.release:
					continue
				case <-ctx.Done():
					yield(llm.Event{Kind: llm.EventError, Err: &llm.Error{Kind: llm.ErrCancelled}})
					return
				}
			}
			if !yield(*ev) {
				return
			}
		}
	}
}

func (m *model) request(i int) *llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[i]
}

func think(s string) *llm.Event { return &llm.Event{Kind: llm.EventReasoning, Text: s} }
func say(s string) *llm.Event   { return &llm.Event{Kind: llm.EventText, Text: s} }

var finish = &llm.Event{Kind: llm.EventFinish, Finish: llm.FinishStop}

// plain answers every question with two steps and two sentences.
func plain(req *llm.Request) []*llm.Event {
	q := req.Messages[len(req.Messages)-1].Content
	return []*llm.Event{think("First I read the question."), think("\n\n"), think("Then I answer it."), think("\n\n"),
		say("You asked: " + q + ". "), say("That is all."), finish}
}

type rig struct {
	engine *pipeline.Engine
	store  *storage.Memory
	model  *model
	conv   *pipeline.Conversation
}

func newRig(t *testing.T, answer func(*llm.Request) []*llm.Event) *rig {
	return newRigWith(t, answer, nil)
}

// newRigWith is newRig with a thinking policy (nil: Config.Thinking).
func newRigWith(t *testing.T, answer func(*llm.Request) []*llm.Event, policy *pipeline.ThinkingPolicy) *rig {
	store := storage.NewMemory(storage.ReasoningPlain)
	store.SaveConversation(storage.Conversation{ID: "conv_fake", Owner: "alice", CreatedAt: time.Now()})
	m := newModel(answer)
	e := pipeline.NewEngine(pipeline.Config{LLM: m, Thinking: true, ThinkingPolicy: policy}, store)
	c := e.Open("conv_fake")
	t.Cleanup(func() {
		c.Close()
	})
	return &rig{engine: e, store: store, model: m, conv: c}
}

// speakerFunc is a speech consumer that only sees the turns handed to it.
type speakerFunc func(*pipeline.Turn)

func (f speakerFunc) Speak(t *pipeline.Turn) { f(t) }

var streamingFull = pipeline.Member{Identity: "alice", Features: wire.Features{Streaming: true, ReasoningSteps: true}}

func (r *rig) ask(face *fakeFace, stanza int32, id, text string) {
	r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: stanza, Body: &wire.UserMessage{ID: id, ConversationID: "conv_fake", Content: text}, Received: time.Now()})
}

func TestFakeFaceTurnWithStepsAndSentences(t *testing.T) {
	r := newRig(t, plain)
	face := newFace(streamingFull, pipeline.Member{Identity: "bob"})
	r.conv.Configure(context.Background(), "alice", streamingFull.Features)
	var turns []*pipeline.Turn
	var tmu sync.Mutex
	stop := r.conv.Attach(speakerFunc(func(t *pipeline.Turn) { tmu.Lock(); turns = append(turns, t); tmu.Unlock() }))
	defer stop()
	r.ask(face, 1, "msg_1", "why")
	got := face.until(t, "the final sentence", finalOf)
	// Order: Ack, steps, StartAnswer, sentences; bob (no streaming, mode
	// off) gets no step and no sentence, then the whole answer.
	if _, ok := got[0].body.(*wire.Acknowledgement); !ok {
		t.Fatalf("first %s", describeBodies(got))
	}
	steps := all[*wire.ReasoningStep](got)
	if len(steps) < 2 {
		t.Fatalf("steps %s", describeBodies(got))
	}
	for _, s := range got {
		if _, ok := s.body.(*wire.ReasoningStep); ok && slices.Contains(s.to, "bob") {
			t.Fatal("a step reached bob, whose mode is off")
		}
	}
	start := slices.IndexFunc(got, func(s sentBody) bool { _, ok := s.body.(*wire.StartAnswer); return ok })
	lastStep := slices.IndexFunc(got, func(s sentBody) bool {
		st, ok := s.body.(*wire.ReasoningStep)
		return ok && !st.Partial && st.StepIndex == 2
	})
	if start < 0 || lastStep < 0 || lastStep > start {
		t.Fatalf("order %s", describeBodies(got))
	}
	var texts []string
	for _, s := range all[*wire.AssistantSentence](got) {
		if s.Text != "" {
			texts = append(texts, s.Text)
		}
	}
	if strings.Join(texts, "|") != "You asked: why.|That is all." {
		t.Fatalf("sentences %q", texts)
	}
	got = face.until(t, "bob's whole answer", func(b []sentBody) bool { return count[*wire.AssistantMessage](b) == 1 })
	if am := all[*wire.AssistantMessage](got)[0]; am.Content != "You asked: why. That is all." {
		t.Fatalf("whole answer %q", am.Content)
	}
	// The handle yields the same sentences to any reader, afterwards too.
	tmu.Lock()
	turn := turns[0]
	tmu.Unlock()
	<-turn.Done()
	var fromHandle []string
	for s := range turn.Sentences(context.Background()) {
		fromHandle = append(fromHandle, s.Text)
	}
	if !slices.Equal(fromHandle, texts) {
		t.Fatalf("handle sentences %q, sent %q", fromHandle, texts)
	}
	h, _ := r.store.History(context.Background(), "conv_fake")
	if len(h) != 2 || h[1].Status != storage.StatusComplete || len(h[1].Steps) != 2 {
		t.Fatalf("stored %+v", h)
	}
}

// waitingAnswer stops after its first sentence until released.
func waitingAnswer(*llm.Request) []*llm.Event {
	return []*llm.Event{say("One. "), say("Two"), nil, say(" more. "), say("Three."), finish}
}

func TestFakeFaceStopKinds(t *testing.T) {
	for _, kind := range []wire.StopType{wire.StopGeneration, wire.StopSpeech, wire.StopAll} {
		t.Run(string(kind), func(t *testing.T) {
			r := newRig(t, waitingAnswer)
			face := newFace(streamingFull)
			turns := make(chan *pipeline.Turn, 1)
			defer r.conv.Attach(speakerFunc(func(t *pipeline.Turn) { turns <- t }))()
			r.ask(face, 1, "msg_1", "count")
			turn := <-turns
			// Speech plays the turn as its sentences arrive.
			endSpeech := turn.Speak()
			defer endSpeech()
			first := make(chan string, 3)
			go func() {
				for s := range turn.Sentences(context.Background()) {
					first <- s.Text
				}
				close(first)
			}()
			if s := <-first; s != "One." {
				t.Fatalf("first sentence %q", s)
			}
			<-r.model.waiting
			r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 2, Body: &wire.ControlStop{ConversationID: "conv_fake", StopType: kind}})
			if kind == wire.StopSpeech {
				// Speech stops; the model goes on and the answer completes.
				<-turn.SpeechInterrupted()
				close(r.model.release)
				got := face.until(t, "the rest of the answer", finalOf)
				if count[*wire.AssistantSentence](got) < 3 {
					t.Fatalf("speech stop cut the answer: %s", describeBodies(got))
				}
				<-turn.Done()
				face.until(t, "the stop's ack", func(b []sentBody) bool { return count[*wire.Acknowledgement](b) == 2 })
				return
			}
			got := face.until(t, "the stop's ack", func(b []sentBody) bool { return count[*wire.Acknowledgement](b) == 2 })
			<-turn.Done()
			acks := all[*wire.Acknowledgement](got)
			if acks[1].Notes != "stopped" || !finalOf(got) {
				t.Fatalf("after stop: %s (notes %q)", describeBodies(got), acks[1].Notes)
			}
			// The ack follows the turn's last packet.
			if _, ok := got[len(got)-1].body.(*wire.Acknowledgement); !ok {
				t.Fatalf("ack not last: %s", describeBodies(got))
			}
			select {
			case <-turn.SpeechInterrupted():
				if kind == wire.StopGeneration {
					t.Fatal("a generation stop silenced speech")
				}
			default:
				if kind == wire.StopAll {
					t.Fatal("stop all left speech playing")
				}
			}
			h, _ := r.store.History(context.Background(), "conv_fake")
			if h[1].Status != storage.StatusStopped || h[1].Content != "One. Two" {
				t.Fatalf("stored %+v", h[1])
			}
		})
	}
}

// A new message while a turn waits does not wait for it: the new one is
// acknowledged at once, the old one stops, the new one answers.
func TestFakeFaceNewMessageDoesNotBlock(t *testing.T) {
	first := true
	var mu sync.Mutex
	r := newRig(t, func(req *llm.Request) []*llm.Event {
		mu.Lock()
		defer mu.Unlock()
		if first {
			first = false
			return waitingAnswer(req)
		}
		return plain(req)
	})
	face := newFace(streamingFull)
	r.ask(face, 1, "msg_1", "count")
	<-r.model.waiting
	r.ask(face, 2, "msg_2", "next")
	got := face.until(t, "the second answer", func(b []sentBody) bool {
		return slices.ContainsFunc(all[*wire.AssistantSentence](b), func(s *wire.AssistantSentence) bool { return s.Text == "You asked: next." })
	})
	// Both messages are acknowledged, and the first answer is said to be
	// superseded.
	acks := all[*wire.Acknowledgement](got)
	if len(acks) != 3 || acks[0].AcknowledgedMessageID != "msg_1" || acks[1].AcknowledgedMessageID != "msg_2" || acks[2].Notes != pipeline.NoteSuperseded {
		t.Fatalf("%s", describeBodies(got))
	}
	// The second request saw the first turn, as cut.
	req := r.model.request(1)
	if len(req.Messages) != 3 || req.Messages[1].Content != "One. Two" {
		t.Fatalf("second request %+v", req.Messages)
	}
}

func TestFakeFaceVariations(t *testing.T) {
	n := 0
	var mu sync.Mutex
	r := newRig(t, func(req *llm.Request) []*llm.Event {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		return []*llm.Event{say(fmt.Sprintf("Answer %d to %s.", k, req.Messages[len(req.Messages)-1].Content)), finish}
	})
	face := newFace(streamingFull)
	finals := func(k int) func([]sentBody) bool {
		return func(b []sentBody) bool {
			c := 0
			for _, s := range all[*wire.AssistantSentence](b) {
				if s.IsFinal {
					c++
				}
			}
			return c >= k
		}
	}
	r.ask(face, 1, "msg_1", "q")
	face.until(t, "an answer", finals(1))
	r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 2, Body: &wire.ControlVariation{TargetID: "msg_1", Mode: wire.VariationRegenerate}})
	face.until(t, "a regenerated answer", finals(2))
	r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 3, Body: &wire.ControlVariation{TargetID: "msg_1", Mode: wire.VariationContinue}})
	face.until(t, "a continued answer", finals(3))
	if req := r.model.request(2); req.Messages[1].Content != "Answer 2 to q." {
		t.Fatalf("continue saw %+v", req.Messages)
	}
	r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 4, Body: &wire.ControlVariation{TargetID: "msg_1", Mode: wire.VariationEdit}})
	r.ask(face, 5, "msg_2", "edited")
	face.until(t, "the edited answer", finals(4))
	if req := r.model.request(3); len(req.Messages) != 1 || req.Messages[0].Content != "edited" {
		t.Fatalf("edit saw %+v", req.Messages)
	}
	// Only the latest message can be varied.
	r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 6, Body: &wire.ControlVariation{TargetID: "msg_1", Mode: wire.VariationRegenerate}})
	got := face.until(t, "a refusal", func(b []sentBody) bool { return count[*wire.ErrorMessage](b) == 1 })
	if e := all[*wire.ErrorMessage](got)[0]; e.Code != wire.CodeInvalidState {
		t.Fatalf("refusal %+v", e)
	}
	h, _ := r.store.History(context.Background(), "conv_fake")
	var summary []string
	for _, e := range h {
		summary = append(summary, e.Role+":"+e.Status)
	}
	if want := "user:superseded|assistant:complete|assistant:complete|assistant:complete|user:complete|assistant:complete"; strings.Join(summary, "|") != want {
		t.Fatalf("stored %s", strings.Join(summary, "|"))
	}
}

func TestFakeFaceTools(t *testing.T) {
	r := newRig(t, func(req *llm.Request) []*llm.Event {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			return []*llm.Event{say("Result: " + last.Content), finish}
		}
		name := map[string]string{"calc": "calculator", "where": "get_location"}[last.Content]
		args := map[string]string{"calc": `{"expression":"6*7"}`, "where": `{}`}[last.Content]
		return []*llm.Event{{Kind: llm.EventToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: name, Arguments: args}}, {Kind: llm.EventFinish, Finish: llm.FinishToolCalls}}
	})
	member := streamingFull
	member.Tools = []wire.ClientTool{{Name: "get_location", Description: "where the user is"}}
	face := newFace(member)
	r.ask(face, 1, "msg_1", "calc")
	got := face.until(t, "the server tool's answer", finalOf)
	res := all[*wire.ToolUseResult](got)
	if len(res) != 1 || !res[0].Success || !strings.Contains(answerOf(got), `42`) {
		t.Fatalf("server tool: %s answer %q", describeBodies(got), answerOf(got))
	}
	r.ask(face, 2, "msg_2", "where")
	got = face.until(t, "a client tool request", func(b []sentBody) bool { return count[*wire.ToolUseRequest](b) == 2 })
	req := all[*wire.ToolUseRequest](got)[1]
	if req.Execution != wire.ExecutionClient {
		t.Fatalf("request %+v", req)
	}
	r.conv.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 3, Body: &wire.ToolUseResult{RequestID: req.ID, Success: true, Result: map[string]any{"city": "Lyon"}}})
	face.until(t, "the client tool's answer", func(b []sentBody) bool { return strings.Contains(answerOf(b), "Lyon") })
}

func answerOf(b []sentBody) string {
	var s []string
	for _, a := range all[*wire.AssistantSentence](b) {
		s = append(s, a.Text)
	}
	return strings.Join(s, " ")
}

func TestFakeFaceBackendFailure(t *testing.T) {
	r := newRig(t, func(*llm.Request) []*llm.Event {
		return []*llm.Event{say("Half an answer. "), {Kind: llm.EventError, Err: &llm.Error{Kind: llm.ErrTruncated, Message: "the stream broke"}}}
	})
	face := newFace(streamingFull)
	r.ask(face, 1, "msg_1", "q")
	got := face.until(t, "an error", func(b []sentBody) bool { return count[*wire.ErrorMessage](b) == 1 })
	e := all[*wire.ErrorMessage](got)[0]
	if e.Code != wire.CodeServiceUnavailable || !strings.Contains(e.Message, "the stream broke") || !finalOf(got) {
		t.Fatalf("failure: %s %+v", describeBodies(got), e)
	}
	// The error goes out before the store's next batch holds the record.
	var h []storage.Entry
	testenv.Eventually(t, "the failed answer's record", func() bool {
		h, _ = r.store.History(context.Background(), "conv_fake")
		return len(h) > 1 && h[1].Status == storage.StatusFailed
	})
	if h[1].Content != "Half an answer. " {
		t.Fatalf("stored %+v", h[1])
	}
}

// Two faces on one conversation: a turn taken through one is history for
// the other, in this process and (through storage) in another.
func TestFakeFaceTwoFacesShareHistory(t *testing.T) {
	r := newRig(t, plain)
	lk, other := newFace(streamingFull), newFace(pipeline.Member{Identity: "alice", Features: wire.Features{Streaming: true}})
	r.ask(lk, 1, "msg_1", "first")
	lk.until(t, "the first answer", finalOf)
	r.conv.Handle(other, pipeline.Inbound{From: "alice", StanzaID: 1, Body: &wire.UserMessage{ID: "msg_2", Content: "second"}})
	other.until(t, "the second answer", finalOf)
	// A second process (its own engine, the same store) answers next.
	e2 := pipeline.NewEngine(pipeline.Config{LLM: r.model, Thinking: true}, r.store)
	c2 := e2.Open("conv_fake")
	defer c2.Close()
	third := newFace(streamingFull)
	c2.Handle(third, pipeline.Inbound{From: "alice", StanzaID: 1, Body: &wire.UserMessage{ID: "msg_3", Content: "third"}})
	third.until(t, "the third answer", finalOf)
	// And the first face sees the third turn.
	r.ask(lk, 2, "msg_4", "fourth")
	lk.until(t, "the fourth answer", func(b []sentBody) bool { return strings.Contains(answerOf(b), "fourth") })
	var users []string
	for _, m := range r.model.request(3).Messages {
		if m.Role == llm.RoleUser {
			users = append(users, m.Content)
		}
	}
	if strings.Join(users, ",") != "first,second,third,fourth" {
		t.Fatalf("the fourth turn saw %v", users)
	}
}

// A preference set in one conversation is remembered for the user: it
// applies in another conversation the user is in. A client's display
// features never change it; they only limit what that client receives.
func TestFakeFacePreferenceFollowsTheUser(t *testing.T) {
	r := newRig(t, plain)
	other := r.engine.Open("conv_other")
	defer other.Close()
	r.store.SaveConversation(storage.Conversation{ID: "conv_other", Owner: "alice", CreatedAt: time.Now()})
	setSummary := []string{wire.FeatureStreaming, wire.FeatureReasoningSteps, wire.FeaturePartialReasoning, reasoning.PreferenceFeature(reasoning.ModeSummary)}
	if eff := r.conv.Configure(context.Background(), "alice", wire.ParseFeatures(setSummary)); !slices.Equal(eff,
		[]string{wire.FeatureReasoningSummary, wire.FeaturePartialReasoning, "reasoning_preference:summary"}) {
		t.Fatalf("effective features %v", eff)
	}
	if g := other.Greeting(context.Background(), "alice"); !slices.Equal(g, []string{"reasoning_preference:summary"}) {
		t.Fatalf("greeting features elsewhere %v", g)
	}
	// A phone without a reasoning panel configures itself: the preference
	// stays, and the phone receives no step.
	if eff := other.Configure(context.Background(), "alice", wire.Features{Streaming: true}); !slices.Equal(eff, []string{"reasoning_preference:summary"}) {
		t.Fatalf("effective features of a client without a reasoning panel %v", eff)
	}
	if m, _ := r.store.Mode(context.Background(), "alice"); m != reasoning.ModeSummary {
		t.Fatalf("stored preference after a client without reasoning features: %q", m)
	}
	phone := newFace(pipeline.Member{Identity: "alice", Features: wire.Features{Streaming: true}})
	other.Handle(phone, pipeline.Inbound{From: "alice", StanzaID: 1, Body: &wire.UserMessage{ID: "msg_1", Content: "q"}})
	// The steps come before the answer's last sentence: its arrival is
	// the barrier after which none can come.
	got := phone.until(t, "an answer", finalOf)
	if n := count[*wire.ReasoningStep](got); n != 0 {
		t.Fatalf("a client that cannot display reasoning got %d steps", n)
	}
	// A client with a panel, in the other conversation, gets the user's
	// summary (one per step: it takes no partial steps).
	panel := newFace(pipeline.Member{Identity: "alice", Features: wire.Features{Streaming: true, ReasoningSteps: true}})
	other.Handle(panel, pipeline.Inbound{From: "alice", StanzaID: 2, Body: &wire.UserMessage{ID: "msg_2", Content: "q2"}})
	got = panel.until(t, "a second answer", func(b []sentBody) bool {
		return count[*wire.AssistantSentence](b) > 0 && strings.Contains(answerOf(b), "q2") && finalOf(b)
	})
	steps := all[*wire.ReasoningStep](got)
	if len(steps) != 2 || steps[0].Partial || steps[0].Content != reasoning.Summarize("First I read the question.") ||
		steps[1].Content != reasoning.Summarize("Then I answer it.") {
		t.Fatalf("summary steps: %+v", steps)
	}
}

// A user who never chose gets the operator's default; off means no step
// at all, even to a client that can display them.
func TestFakeFacePreferenceDefault(t *testing.T) {
	for _, def := range []reasoning.Mode{reasoning.ModeOff, reasoning.ModeSummary, reasoning.ModeFull} {
		t.Run(string(def), func(t *testing.T) {
			store := storage.NewMemory(storage.ReasoningPlain)
			store.SaveConversation(storage.Conversation{ID: "conv_def", Owner: "alice", CreatedAt: time.Now()})
			e := pipeline.NewEngine(pipeline.Config{LLM: newModel(plain), Thinking: true, ReasoningDefault: def}, store)
			c := e.Open("conv_def")
			defer c.Close()
			if p := e.Preference(context.Background(), "alice"); p != def {
				t.Fatalf("preference of a user who never chose: %q", p)
			}
			face := newFace(streamingFull)
			c.Handle(face, pipeline.Inbound{From: "alice", StanzaID: 1, Body: &wire.UserMessage{ID: "msg_1", Content: "q"}})
			got := face.until(t, "an answer", finalOf)
			steps := all[*wire.ReasoningStep](got)
			switch def {
			case reasoning.ModeOff:
				if len(steps) != 0 {
					t.Fatalf("default off: %d steps", len(steps))
				}
			case reasoning.ModeSummary:
				if len(steps) != 2 || steps[0].Content != reasoning.Summarize("First I read the question.") {
					t.Fatalf("default summary: %+v", steps)
				}
			case reasoning.ModeFull:
				if len(steps) != 2 || steps[0].Content != "First I read the question." {
					t.Fatalf("default full: %+v", steps)
				}
			}
		})
	}
}

// Speech starts a turn from a final transcript: the transcript id is the
// user message id, nothing is acknowledged, and the handle yields the
// answer's sentences in order.
func TestFakeFaceAskFromTranscript(t *testing.T) {
	r := newRig(t, plain)
	face := newFace(streamingFull)
	turn := r.conv.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: "tr_1", ConversationID: "conv_fake", Content: "spoken"})
	var got []string
	for s := range turn.Sentences(context.Background()) {
		got = append(got, s.Text)
	}
	<-turn.Done()
	if strings.Join(got, "|") != "You asked: spoken.|That is all." || turn.UserMessageID() != "tr_1" {
		t.Fatalf("sentences %q of turn answering %s", got, turn.UserMessageID())
	}
	sent := face.until(t, "the final sentence", finalOf)
	if count[*wire.Acknowledgement](sent) != 0 || count[*wire.UserMessage](sent) != 0 {
		t.Fatalf("sent %s", describeBodies(sent))
	}
	// The same id typed again is acknowledged, not answered twice.
	// The conversation is ordered: the answer to a later message is the
	// barrier after which a second answer would have shown.
	r.ask(face, 1, "tr_1", "spoken")
	r.ask(face, 2, "msg_2", "next")
	sent = face.until(t, "the next answer", func(b []sentBody) bool { return strings.Contains(answerOf(b), "next") && finalOf(b[1:]) })
	if count[*wire.StartAnswer](sent) != 2 || count[*wire.Acknowledgement](sent) != 2 {
		t.Fatalf("sent %s", describeBodies(sent))
	}
	h, _ := r.store.History(context.Background(), "conv_fake")
	if len(h) != 4 || h[0].ID != "tr_1" || h[0].Content != "spoken" || h[2].ID != "msg_2" {
		t.Fatalf("stored %+v", h)
	}
}

// The attached speaker is handed every turn of the conversation, typed
// or asked (spoken), once each and in order; detached, it is handed none.
func TestAttachedSpeakerGetsEveryTurn(t *testing.T) {
	r := newRig(t, plain)
	face := newFace(streamingFull)
	turns := make(chan *pipeline.Turn, 4)
	detach := r.conv.Attach(speakerFunc(func(t *pipeline.Turn) { turns <- t }))
	r.ask(face, 1, "msg_typed", "typed")
	spoken := r.conv.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_spoken", Content: "spoken"})
	if got := <-turns; got.UserMessageID() != "msg_typed" {
		t.Fatalf("first turn answers %s", got.UserMessageID())
	}
	if got := <-turns; got != spoken || got.UserMessageID() != "msg_spoken" {
		t.Fatalf("second turn %p answers %s, asked %p", got, got.UserMessageID(), spoken)
	}
	<-spoken.Done()
	detach()
	// The conversation is ordered: the answer to a third message is the
	// barrier after which its turn would have been handed over.
	r.ask(face, 2, "msg_after", "after")
	face.until(t, "the third answer", func(b []sentBody) bool {
		n := 0
		for _, s := range all[*wire.AssistantSentence](b) {
			if s.IsFinal {
				n++
			}
		}
		return n == 3
	})
	if len(turns) != 0 {
		t.Fatalf("a detached speaker was handed %s", (<-turns).UserMessageID())
	}
}

// thinksThenWaits reasons, then waits for release before it answers:
// a model still thinking.
func thinksThenWaits(req *llm.Request) []*llm.Event {
	q := req.Messages[len(req.Messages)-1].Content
	return []*llm.Event{think("Let me see."), think("\n\n"), nil, say("About " + q + ". "), finish}
}

// The same message asked again, whole, while its first form is still
// being thought (a speaker adding to the question) supersedes the
// running turn: clients that saw it begin are told, the user message is
// stored once with its last text, the model never sees the first form,
// and only the second is answered.
func TestAskedAgainWholeSupersedes(t *testing.T) {
	r := newRig(t, thinksThenWaits)
	face := newFace(streamingFull)
	ctx := context.Background()
	first := r.conv.Ask(ctx, face, "alice", &wire.UserMessage{ID: "msg_q", Content: "the weather"})
	<-r.model.waiting
	second := r.conv.Ask(ctx, face, "alice", &wire.UserMessage{ID: "msg_q", Content: "the weather in Paris"})
	close(r.model.release)
	<-first.Done()
	<-second.Done()
	got := face.until(t, "the answer", finalOf)
	notices := slices.DeleteFunc(all[*wire.Acknowledgement](got), func(a *wire.Acknowledgement) bool { return a.Notes != pipeline.NoteSuperseded })
	if len(notices) != 1 || notices[0].AcknowledgedMessageID != first.AnswerID() {
		t.Fatalf("superseded notices %+v (first answer %s): %s", notices, first.AnswerID(), describeBodies(got))
	}
	var sentences []string
	for _, s := range all[*wire.AssistantSentence](got) {
		if s.Text != "" {
			sentences = append(sentences, s.Text)
		}
	}
	if strings.Join(sentences, "|") != "About the weather in Paris." {
		t.Fatalf("sentences %q", sentences)
	}
	req := r.model.request(1)
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser && m.Content == "the weather" {
			t.Fatalf("the model saw the first form: %+v", req.Messages)
		}
	}
	h, _ := r.store.History(ctx, "conv_fake")
	var users, complete, superseded int
	for _, e := range h {
		switch {
		case e.Role == "user" && e.ID == "msg_q" && e.Content == "the weather in Paris":
			users++
		case e.Role == "user":
			t.Fatalf("another user message %+v", e)
		case e.Status == storage.StatusComplete:
			complete++
		case e.Status == storage.StatusSuperseded && e.ID == first.AnswerID():
			superseded++
		}
	}
	if users != 1 || complete != 1 || superseded != 1 {
		t.Fatalf("stored %+v", h)
	}
}
