package pipeline

import (
	"slices"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/reasoning/sentence"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// answer sends the model's answer as it comes: a StartAnswer, then each
// sentence as soon as it is complete, the last one marked final, to the
// clients that stream; one AssistantMessage at the end to the others.
type answer struct {
	s                   *room.Session
	assistantID, userID string
	text                strings.Builder
	split               sentence.Splitter
	started             bool
	sequence            int32
	streaming, whole    []string
}

func (a *answer) begin() {
	if a.started {
		return
	}
	a.started = true
	for _, v := range a.s.Audience().Viewers() {
		if slices.Contains(a.s.ClientFeatures(v.Identity), wire.FeatureStreaming) {
			a.streaming = append(a.streaming, v.Identity)
		} else {
			a.whole = append(a.whole, v.Identity)
		}
	}
	if len(a.streaming) > 0 {
		a.s.Send(&wire.StartAnswer{ID: a.assistantID, PreviousID: a.userID, ConversationID: a.s.ID, AnswerType: wire.AnswerText}, a.streaming...)
	}
}

func (a *answer) write(delta string) {
	if strings.TrimSpace(delta) != "" {
		// StartAnswer goes out with the first word, not the first sentence.
		a.begin()
	}
	a.text.WriteString(delta)
	a.send(a.split.Write(delta), false)
}

func (a *answer) send(sentences []string, final bool) {
	if len(sentences) == 0 && !final {
		return
	}
	a.begin()
	if final && len(sentences) == 0 {
		sentences = []string{""} // the answer ended on a sentence already sent
	}
	for i, text := range sentences {
		a.sequence++
		if len(a.streaming) > 0 {
			a.s.Send(&wire.AssistantSentence{ID: wire.NewID("as"), PreviousID: a.assistantID, ConversationID: a.s.ID,
				Sequence: a.sequence, Text: text, IsFinal: final && i == len(sentences)-1, Markdown: markdown(text)}, a.streaming...)
		}
	}
}

// finish sends the last sentence, marked final, and the whole answer to
// clients that do not stream.
func (a *answer) finish(stopped bool) {
	if a.text.Len() == 0 {
		return
	}
	a.send(a.split.Flush(), true)
	if len(a.whole) > 0 {
		state := storage.StatusComplete
		if stopped {
			state = storage.StatusStopped
		}
		a.s.Send(&wire.AssistantMessage{ID: a.assistantID, PreviousID: a.userID, ConversationID: a.s.ID, Content: a.text.String(),
			Timestamp: time.Now().UnixMilli(), State: state}, a.whole...)
	}
}

// markdown flags what the speech stage must skip or strip.
func markdown(text string) []string {
	var out []string
	sp := sentence.Inspect(text)
	if sp.HasCode {
		out = append(out, wire.MarkdownCode)
	}
	if sp.HasEmphasis {
		out = append(out, wire.MarkdownEmphasis)
	}
	return out
}
