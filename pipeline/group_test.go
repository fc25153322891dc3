package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/wire"
)

// answeredIn: the final sentence of the answer to user message id was
// sent.
func answeredIn(id string) func([]sentBody) bool {
	return func(b []sentBody) bool {
		answer := ""
		for _, s := range b {
			switch m := s.body.(type) {
			case *wire.StartAnswer:
				if m.PreviousID == id {
					answer = m.ID
				}
			case *wire.AssistantSentence:
				if answer != "" && m.PreviousID == answer && m.IsFinal {
					return true
				}
			}
		}
		return false
	}
}

func userContents(req *llm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			out = append(out, m.Content)
		}
	}
	return out
}

// Two people write in one conversation. The first message reaches the
// model as written; once a second person has written, every user message
// the model reads begins with its author's identity and the system
// prompt says that several people speak. Each stored user message keeps
// its author.
func TestSeveralAuthorsNamedForTheModel(t *testing.T) {
	r := newRig(t, plain)
	face := newFace(streamingFull, pipeline.Member{Identity: "bob", Features: streamingFull.Features})
	send := func(from string, stanza int32, id, text string) {
		r.conv.Handle(face, pipeline.Inbound{From: from, StanzaID: stanza, Body: &wire.UserMessage{ID: id, ConversationID: "conv_fake", Content: text}, Received: time.Now()})
	}
	send("alice", 1, "msg_a", "How far is the moon?")
	face.until(t, "the answer to alice", answeredIn("msg_a"))
	send("bob", 1, "msg_b", "And the sun?")
	face.until(t, "the answer to bob", answeredIn("msg_b"))

	first, second := r.model.request(0), r.model.request(1)
	if got := strings.Join(userContents(first), "|"); got != "How far is the moon?" || strings.Contains(first.System, "Several people") {
		t.Fatalf("one person had written; the model read %q, system %q", got, first.System)
	}
	if got := strings.Join(userContents(second), "|"); got != "alice: How far is the moon?|bob: And the sun?" || !strings.Contains(second.System, "Several people") {
		t.Fatalf("two people had written; the model read %q, system %q", got, second.System)
	}
	h, err := r.store.History(context.Background(), "conv_fake")
	if err != nil {
		t.Fatal(err)
	}
	authors := map[string]string{}
	for _, e := range h {
		if e.Role == "user" {
			authors[e.ID] = e.Author
		}
	}
	if authors["msg_a"] != "alice" || authors["msg_b"] != "bob" {
		t.Fatalf("stored authors %v", authors)
	}
}
