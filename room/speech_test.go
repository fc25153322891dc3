package room

import (
	"context"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// settle waits until the writer has run everything queued before it: the
// writer is ordered, so an op that closes a channel is a barrier.
func settle(s *Session) {
	done := make(chan struct{})
	s.post(func() { close(done) })
	<-done
}

// What the voice stage says leaves through the session's one writer, in
// the order it was said, among the envelopes: the Alicia Transcription
// before its lk.transcription stream, the agent's state, the answer's
// stream opened, written and closed final.
func TestSpeechLeavesThroughTheWriterInOrder(t *testing.T) {
	s, rec := testSession(t, storage.NewMemory(storage.ReasoningPlain), "conv_speech")
	configure(t, s, "alice", 1, 0)
	waitFor(t, rec, func(e []*wire.Envelope) bool { return len(e) == 1 })
	ctx := context.Background()
	s.speech.SetState(ctx, voice.StateThinking)
	s.speech.Transcript(ctx, voice.Transcript{ID: "msg_1", Speaker: "alice", TrackID: "TR_alice", Text: "hello there", Final: true})
	s.Send(&wire.Acknowledgement{ConversationID: s.ID, Notes: "between"}, "alice")
	s.speech.AgentSpeech(ctx, voice.AgentSpeech{SegmentID: voice.AnswerSegment("msg_1"), TrackID: "TR_bot", Text: "Hi."})
	s.speech.AgentSpeech(ctx, voice.AgentSpeech{SegmentID: voice.AnswerSegment("msg_1"), TrackID: "TR_bot", Final: true})
	settle(s)

	rec.mu.Lock()
	order, packets, attrs := slices.Clone(rec.order), slices.Clone(rec.packets), slices.Clone(rec.attrs)
	rec.mu.Unlock()
	want := []string{"envelope", "attributes", "envelope", "packet", "packet", "packet", "envelope", "packet", "packet", "packet"}
	if !slices.Equal(order, want) {
		t.Fatalf("published %v, want %v", order, want)
	}
	if attrs[0][AgentStateAttribute] != string(voice.StateThinking) {
		t.Fatalf("attributes %v", attrs)
	}
	envs := rec.envelopes(t)
	if tr, ok := envs[1].Body.(*wire.Transcription); !ok || tr.ID != "msg_1" || !tr.Final || tr.Text != "hello there" {
		t.Fatalf("second envelope %s %+v", envs[1].Type(), envs[1].Body)
	}
	user := packets[0].GetStreamHeader()
	if user == nil || packets[0].ParticipantIdentity != "alice" || user.Topic != TranscriptionTopic ||
		user.Attributes[AttrSegmentID] != voice.UserSegment("msg_1") || user.Attributes[AttrTranscribedTrack] != "TR_alice" || user.Attributes[AttrTranscriptFinal] != "true" {
		t.Fatalf("user transcript header %+v from %q", user, packets[0].ParticipantIdentity)
	}
	if c := packets[1].GetStreamChunk(); c == nil || string(c.Content) != "hello there" {
		t.Fatalf("user transcript chunk %+v", packets[1])
	}
	agent := packets[3].GetStreamHeader()
	if agent == nil || packets[3].ParticipantIdentity != "" || agent.Attributes[AttrSegmentID] != voice.AnswerSegment("msg_1") || agent.Attributes[AttrTranscriptFinal] != "false" {
		t.Fatalf("answer header %+v", agent)
	}
	if c := packets[4].GetStreamChunk(); c == nil || string(c.Content) != "Hi." {
		t.Fatalf("answer chunk %+v", packets[4])
	}
	if tr := packets[5].GetStreamTrailer(); tr == nil || tr.StreamId != agent.StreamId || tr.Attributes[AttrTranscriptFinal] != "true" {
		t.Fatalf("answer trailer %+v", packets[5])
	}
}

// While the room reconnects nothing is published: the Transcription
// waits in the replay log like any envelope, the transcript stream is
// dropped (the Transcription carries the words), and the agent's state is
// published once the room is back.
func TestSpeechWhileTheRoomReconnects(t *testing.T) {
	s, rec := testSession(t, storage.NewMemory(storage.ReasoningPlain), "conv_speech_down")
	configure(t, s, "alice", 1, 0)
	waitFor(t, rec, func(e []*wire.Envelope) bool { return len(e) == 1 })
	ctx := context.Background()
	rec.mu.Lock()
	rec.down = true
	rec.mu.Unlock()
	s.speech.Transcript(ctx, voice.Transcript{ID: "msg_2", Speaker: "alice", TrackID: "TR_alice", Text: "are you there", Final: true})
	s.speech.SetState(ctx, voice.StateSpeaking)
	settle(s)
	rec.mu.Lock()
	rec.down = false
	published := len(rec.order)
	rec.mu.Unlock()
	if published != 1 {
		t.Fatalf("%d things published while down", published)
	}
	s.reconnected(false)
	configure(t, s, "alice", 2, 1) // the client resumes after the greeting reply
	envs := waitFor(t, rec, func(e []*wire.Envelope) bool { return len(e) == 3 })
	settle(s)
	rec.mu.Lock()
	attrs := slices.Clone(rec.attrs)
	rec.mu.Unlock()
	if len(attrs) != 1 || attrs[0][AgentStateAttribute] != string(voice.StateSpeaking) {
		t.Fatalf("attributes after reconnecting %v", attrs)
	}
	if tr, ok := envs[1].Body.(*wire.Transcription); !ok || tr.ID != "msg_2" {
		t.Fatalf("replayed %s %+v", envs[1].Type(), envs[1].Body)
	}
	if _, ok := envs[2].Body.(*wire.Configuration); !ok {
		t.Fatalf("last %s", envs[2].Type())
	}
}
