package voice

import "testing"

// answered is a turn that says its answer's id, as *pipeline.Turn does.
type answered struct {
	Turn
	user, answer string
}

func (a answered) UserMessageID() string { return a.user }
func (a answered) AnswerID() string      { return a.answer }

// Two answers to one message (a regeneration) are two transcript
// segments: a stock LiveKit client keeps the first beside the second.
func TestEachAnswerItsOwnSegment(t *testing.T) {
	first, again := answered{user: "msg_1", answer: "am_1"}, answered{user: "msg_1", answer: "am_2"}
	if answerSegment(first) == answerSegment(again) {
		t.Fatalf("both answers under %q", answerSegment(first))
	}
	if answerSegment(first) != AnswerSegment("am_1") || answerSegment(first) == UserSegment("msg_1") {
		t.Fatalf("segment %q", answerSegment(first))
	}
	// A turn that does not say its answer's id is named by its message.
	if got := answerSegment(answered{user: "msg_1"}); got != AnswerSegment("msg_1") {
		t.Fatalf("segment %q", got)
	}
}
