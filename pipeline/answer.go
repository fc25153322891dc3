package pipeline

import (
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
	// sent is every sentence given out, for a retraction to name;
	// consumed is where the splitter's text starts in text, just after
	// the last sentence given out.
	sent     []sentSentence
	consumed int
}

// sentSentence is a sentence given out: end is where its text ends in the
// answer text, so that a retraction of the text's end knows whether the
// sentence holds any of it.
type sentSentence struct {
	id        string
	sequence  int32
	end       int
	retracted bool
}

// NoteRetracted is the notes of the Acknowledgement that takes back an
// AssistantSentence (acknowledgedMessageId is the sentence's id): the
// model's template had opened its thinking in the prompt, and what it
// streamed before a bare </think> was reasoning, not answer. The same
// text follows as ReasoningSteps; a client removes the sentence.
const NoteRetracted = "retracted"

// DeltaRetractor is a DeltaRenderer that can tell its client that the
// text streamed so far for answerID (since the last retraction) was
// reasoning: the text it streams next is a new message.
type DeltaRetractor interface {
	Retract(answerID string)
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
		if m.Features.Streaming {
			a.streaming = append(a.streaming, m.Identity)
		} else {
			a.whole = append(a.whole, m.Identity)
		}
	}
	if len(a.streaming) > 0 {
		a.face.Send(&wire.StartAnswer{ID: a.t.answerID, PreviousID: a.t.userMessageID, ConversationID: a.conv, AnswerType: wire.AnswerText}, a.streaming...)
	}
}

func (a *answer) write(delta string) {
	if strings.TrimSpace(delta) != "" {
		// StartAnswer goes out with the first word, not the first sentence.
		a.begin()
	}
	a.text.WriteString(delta)
	if a.delta != nil && delta != "" {
		a.delta.Delta(a.t.answerID, delta)
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
		id := wire.NewID("as")
		if text != "" {
			a.t.addSentence(Sentence{Sequence: a.sequence, Text: text, Markdown: md})
			// The splitter's sentences are its text trimmed, in order.
			a.consumed += strings.Index(a.text.String()[a.consumed:], text) + len(text)
			a.sent = append(a.sent, sentSentence{id: id, sequence: a.sequence, end: a.consumed})
		}
		if len(a.streaming) > 0 {
			a.face.Send(&wire.AssistantSentence{ID: id, PreviousID: a.t.answerID, ConversationID: a.conv,
				Sequence: a.sequence, Text: text, IsFinal: final && i == len(sentences)-1, Markdown: md}, a.streaming...)
		}
	}
}

// retract takes back the end of the answer, text, which was reasoning:
// it leaves the answer as stored and as the model sees it again, and each
// sentence already sent that holds any of it is taken back from speech
// (Sentence.Retracted) and named to the streaming clients with an
// Acknowledgement (NoteRetracted). Speech cannot unsay what it played,
// but it leaves those sentences out of what it says was heard.
func (a *answer) retract(text string) {
	s := a.text.String()
	start := len(s) - len(text)
	if start < 0 || s[start:] != text {
		start = 0 // not the text's end: the model's whole text is suspect
	}
	a.text.Reset()
	a.text.WriteString(s[:start])
	kept := 0
	var seqs []int32
	var ids []string
	for i := range a.sent {
		st := &a.sent[i]
		switch {
		case st.end <= start && !st.retracted:
			kept = st.end
		case st.end > start && !st.retracted:
			st.retracted = true
			seqs, ids = append(seqs, st.sequence), append(ids, st.id)
		}
	}
	// Speech first: by the time a client hears of the retraction, no
	// consumer of the turn is handed those sentences any more.
	a.t.retract(seqs)
	for _, id := range ids {
		if len(a.streaming) > 0 {
			a.face.Send(&wire.Acknowledgement{ConversationID: a.conv, AcknowledgedMessageID: id, Notes: NoteRetracted}, a.streaming...)
		}
	}
	if r, ok := a.face.(DeltaRetractor); ok && a.delta != nil {
		r.Retract(a.t.answerID)
	}
	// The splitter holds the retracted text's unfinished sentence, which
	// may have begun with kept text (a round before a tool call that had
	// not finished its sentence): that text is what it holds now.
	a.consumed = kept
	a.split = sentence.Splitter{}
	a.send(a.split.Write(s[kept:start]), false)
}

// finish sends the last sentence, marked final, and the whole answer to
// clients that do not stream. A StartAnswer whose sentences were all
// retracted still gets its final sentence, so that clients close it.
func (a *answer) finish(stopped bool) {
	if a.text.Len() == 0 && !(a.started && len(a.streaming) > 0) {
		return
	}
	a.send(a.split.Flush(), true)
	if len(a.whole) > 0 && a.text.Len() > 0 {
		state := storage.StatusComplete
		if stopped {
			state = storage.StatusStopped
		}
		a.face.Send(&wire.AssistantMessage{ID: a.t.answerID, PreviousID: a.t.userMessageID, ConversationID: a.conv, Content: a.text.String(),
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
