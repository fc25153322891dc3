package pipeline

import (
	"slices"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/reasoning/sentence"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// answer turns the model's text into the turn's sentences as each
// completes, and sends it: a StartAnswer then the sentences, the last one
// marked final, to the members that stream; one AssistantMessage at the
// end to the others; the raw text to a face that renders it itself.
type answer struct {
	conv             string
	t                *Turn
	face             Face
	delta            DeltaRenderer
	text             strings.Builder
	split            sentence.Splitter
	started          bool
	sequence         int32
	streaming, whole []string
}

func newAnswer(conv string, t *Turn, face Face) *answer {
	a := &answer{conv: conv, t: t, face: face}
	a.delta, _ = face.(DeltaRenderer)
	return a
}

func (a *answer) begin() {
	if a.started {
		return
	}
	a.started = true
	if a.delta != nil {
		return
	}
	for _, m := range a.face.Members() {
		if slices.Contains(m.Features, wire.FeatureStreaming) {
			a.streaming = append(a.streaming, m.Identity)
		} else {
			a.whole = append(a.whole, m.Identity)
		}
	}
	if len(a.streaming) > 0 {
		a.face.Send(&wire.StartAnswer{ID: a.t.ID, PreviousID: a.t.UserID, ConversationID: a.conv, AnswerType: wire.AnswerText}, a.streaming...)
	}
}

func (a *answer) write(delta string) {
	if strings.TrimSpace(delta) != "" {
		// StartAnswer goes out with the first word, not the first sentence.
		a.begin()
	}
	a.text.WriteString(delta)
	if a.delta != nil && delta != "" {
		a.delta.Delta(a.t.ID, delta)
	}
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
		md := markdown(text)
		if text != "" {
			a.t.addSentence(Sentence{Sequence: a.sequence, Text: text, Markdown: md})
		}
		if len(a.streaming) > 0 {
			a.face.Send(&wire.AssistantSentence{ID: wire.NewID("as"), PreviousID: a.t.ID, ConversationID: a.conv,
				Sequence: a.sequence, Text: text, IsFinal: final && i == len(sentences)-1, Markdown: md}, a.streaming...)
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
		a.face.Send(&wire.AssistantMessage{ID: a.t.ID, PreviousID: a.t.UserID, ConversationID: a.conv, Content: a.text.String(),
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
