package pipeline_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

const (
	routedReasoning = "The user asks about the tides. The moon pulls the sea, and so does the sun."
	routedAnswer    = "Tides come from the pull of the moon and the sun."
)

var tideScenario = standin.Scenario{Name: "tides", Match: "(?i)tide", Rounds: []standin.Round{{
	Reasoning: []string{routedReasoning, "I will say so in one sentence."},
	Answer:    routedAnswer,
}}}

// assistantContents are the assistant messages of a chat request.
func assistantContents(b map[string]any) []string {
	var out []string
	msgs, _ := b["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "assistant" {
			s, _ := mm["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

// retractedIDs are the sentences an Acknowledgement took back.
func retractedIDs(b []sentBody) []string {
	var out []string
	for _, a := range all[*wire.Acknowledgement](b) {
		if a.Notes == pipeline.NoteRetracted {
			out = append(out, a.AcknowledgedMessageID)
		}
	}
	return out
}

// A model name that answered with inline <think> tags, then (routed to
// a Thinking-2507 deployment) streams reasoning, a bare </think>, the
// answer: the client is told which sentences were reasoning, gets them as
// reasoning steps, and neither storage nor the next turn's history holds
// them. The turn before, a normal one, retracts nothing.
func TestBareThinkEndRetractsTheAnswerSoFar(t *testing.T) {
	model := testenv.NewRoutedModel(t, tideScenario)
	client, err := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm-noparser/v1", Model: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := testenv.Database(t)
	store, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	store.SaveConversation(storage.Conversation{ID: "conv_routed", Owner: "alice", CreatedAt: time.Now()})
	e := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true}, store)
	conv := e.Open("conv_routed")
	t.Cleanup(conv.Close)

	ask := func(id, text string) []sentBody {
		t.Helper()
		face := newFace(streamingFull)
		turn := conv.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: id, ConversationID: "conv_routed", Content: text})
		if turn == nil {
			t.Fatal("no turn")
		}
		<-turn.Done()
		return face.until(t, "the final sentence", finalOf)
	}

	// The hybrid: inline tags, a normal answer.
	got := ask("msg_1", "Why are there tides?")
	if ids := retractedIDs(got); len(ids) != 0 || answerOf(got) != routedAnswer {
		t.Fatalf("hybrid turn: answer %q, retracted %v; sent %s", answerOf(got), ids, describeBodies(got))
	}

	// The Thinking-2507 deployment behind the same name.
	model.Thinking.Store(true)
	got = ask("msg_2", "And the tide tables?")
	sentences := all[*wire.AssistantSentence](got)
	ids := retractedIDs(got)
	if len(ids) == 0 {
		t.Fatalf("nothing retracted; sent %s", describeBodies(got))
	}
	var kept []string
	for _, s := range sentences {
		if slices.Contains(ids, s.ID) {
			if !strings.Contains(routedReasoning+" I will say so in one sentence.", s.Text) {
				t.Errorf("retracted sentence %q is not reasoning", s.Text)
			}
			continue
		}
		if s.Text != "" {
			kept = append(kept, s.Text)
		}
	}
	if strings.Join(kept, " ") != routedAnswer {
		t.Fatalf("sentences left after the retraction %q; sent %s", kept, describeBodies(got))
	}
	// Every retracted sentence was named once, after it was sent and
	// before the answer's first sentence.
	for _, id := range ids {
		sent := slices.IndexFunc(got, func(b sentBody) bool { s, ok := b.body.(*wire.AssistantSentence); return ok && s.ID == id })
		ack := slices.IndexFunc(got, func(b sentBody) bool {
			a, ok := b.body.(*wire.Acknowledgement)
			return ok && a.AcknowledgedMessageID == id
		})
		answer := slices.IndexFunc(got, func(b sentBody) bool { s, ok := b.body.(*wire.AssistantSentence); return ok && s.Text == routedAnswer })
		if sent < 0 || ack < sent || answer < ack {
			t.Errorf("sentence %s at %d, its retraction at %d, the answer at %d", id, sent, ack, answer)
		}
	}
	var shown []string
	for _, st := range finalSteps(got) {
		shown = append(shown, st.Content)
	}
	if !strings.Contains(strings.Join(shown, "\n\n"), routedReasoning) {
		t.Fatalf("the retracted text is not in the steps %q", shown)
	}

	// The next turn's history holds the answer only.
	ask("msg_3", "Thanks, and the tides again?")
	history := assistantContents(model.Last())
	if len(history) != 2 || history[1] != routedAnswer {
		t.Fatalf("history sent to the model: %q", history)
	}

	// And so does storage, with the reasoning in the steps.
	if err := store.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	reopened, err := storage.OpenPostgres(context.Background(), storage.Config{DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close(context.Background())
	h, err := reopened.History(context.Background(), "conv_routed")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 6 || h[3].Role != "assistant" || h[3].Content != routedAnswer {
		t.Fatalf("stored %+v", h)
	}
	var steps []string
	for _, st := range h[3].Steps {
		steps = append(steps, st.Content)
	}
	if !strings.Contains(strings.Join(steps, "\n\n"), routedReasoning) {
		t.Fatalf("stored steps %q", steps)
	}
}

// A retraction in the round after a tool call keeps what the round before
// said: a sentence it finished, and the start of one it had not finished,
// which the real answer completes. The turn's handle skips what was taken
// back.
func TestRetractionKeepsTheRoundBeforeTheToolCall(t *testing.T) {
	for _, c := range []struct{ name, before, after, want string }{
		{"unfinished", "Let me check the weather", " in Paris. It is sunny.", "Let me check the weather in Paris. It is sunny."},
		// Rounds are joined as they come: the reasoning's first word
		// took the round before's last sentence with it.
		{"finished", "Let me check.", " It is sunny.", "Let me check. It is sunny."},
	} {
		t.Run(c.name, func(t *testing.T) {
			const reasoning = "The user wants the weather. I should answer. "
			r := newRig(t, func(req *llm.Request) []*llm.Event {
				if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
					return []*llm.Event{say("The user wants "), say("the weather. "), say("I should answer. "),
						{Kind: llm.EventRetract, Text: reasoning}, {Kind: llm.EventReasoning, Text: reasoning},
						say(c.after), finish}
				}
				return []*llm.Event{say(c.before), {Kind: llm.EventToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6*7"}`}},
					{Kind: llm.EventFinish, Finish: llm.FinishToolCalls}}
			})
			face := newFace(streamingFull)
			turn := r.conv.Ask(context.Background(), face, "alice", &wire.UserMessage{ID: "msg_1", ConversationID: "conv_fake", Content: "weather"})
			got := face.until(t, "the final sentence", finalOf)
			<-turn.Done()
			ids := retractedIDs(got)
			var kept []string
			for _, s := range all[*wire.AssistantSentence](got) {
				if s.Text != "" && !slices.Contains(ids, s.ID) {
					kept = append(kept, s.Text)
				}
			}
			if strings.Join(kept, " ") != c.want || len(ids) == 0 {
				t.Fatalf("sentences left after the retraction %q (retracted %v); sent %s", kept, ids, describeBodies(got))
			}
			var handed []string
			for s := range turn.Sentences(context.Background()) {
				handed = append(handed, s.Text)
			}
			if !slices.Equal(handed, kept) {
				t.Fatalf("the turn hands out %q; kept %q", handed, kept)
			}
			h, _ := r.store.History(context.Background(), "conv_fake")
			if len(h) != 2 || h[1].Content != c.want {
				t.Fatalf("stored %+v", h)
			}
		})
	}
}
