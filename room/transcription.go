package room

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/wire"
)

// TranscriptionTopic is where LiveKit's clients read transcripts, and
// the attributes LiveKit Agents sets on them.
const (
	TranscriptionTopic   = "lk.transcription"
	AttrTranscribedTrack = "lk.transcribed_track_id"
	AttrSegmentID        = "lk.segment_id"
	AttrTranscriptFinal  = "lk.transcription_final"
	// AttrAnswerID names the assistant message an answer's transcript
	// (or a reasoning step) is of; an answer's segment is named after it
	// too (voice.AnswerSegment).
	AttrAnswerID = "alicia.answer_id"
)

// AgentStateAttribute is the participant attribute in which LiveKit
// agents publish their state (initializing, listening, thinking,
// speaking), as LiveKit's client components read it.
const AgentStateAttribute = "lk.agent.state"

// textStream is one text stream on TranscriptionTopic, hand-built like
// the envelope streams (conn.go): besides the SDK writer's delay, it always
// names the bot as the sender, and transcripts of a user's words must name
// the user, which the server keeps because the bot is an agent. It is
// written on the session's writer only.
type textStream struct {
	out    publisher
	id     string
	sender string
	dest   []string
	next   uint64
}

// openTranscript starts a text stream with the transcription attributes
// of one segment. sender is whose words they are (a user's identity for
// the user's speech, empty for the bot's own); dest empty means everyone.
// final goes in the header: true for a complete final transcript sent in
// one go, false for a stream whose trailer will say.
// answerID, for an answer's transcript, goes in AttrAnswerID.
func openTranscript(out publisher, sender, trackID, segmentID, answerID string, final bool, dest []string) (*textStream, error) {
	attrs := map[string]string{
		AttrTranscribedTrack: trackID,
		AttrSegmentID:        segmentID,
		AttrTranscriptFinal:  strconv.FormatBool(final),
	}
	if answerID != "" {
		attrs[AttrAnswerID] = answerID
	}
	return openTextStream(out, TranscriptionTopic, sender, attrs, sender != "", dest)
}

// openTextStream starts a text stream on topic with attrs in its header.
// generated marks text a machine wrote on a person's behalf.
func openTextStream(out publisher, topic, sender string, attrs map[string]string, generated bool, dest []string) (*textStream, error) {
	s := &textStream{out: out, id: uuid.NewString(), sender: sender, dest: dest}
	err := s.send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamHeader{StreamHeader: &livekit.DataStream_Header{
		StreamId:   s.id,
		Timestamp:  time.Now().UnixMilli(),
		Topic:      topic,
		MimeType:   "text/plain",
		Attributes: attrs,
		ContentHeader: &livekit.DataStream_Header_TextHeader{TextHeader: &livekit.DataStream_TextHeader{
			OperationType: livekit.DataStream_CREATE,
			Generated:     generated,
		}},
	}}})
	return s, err
}

// write appends text to the stream.
func (s *textStream) write(text string) error {
	c := &livekit.DataStream_Chunk{StreamId: s.id, ChunkIndex: s.next, Content: []byte(text)}
	s.next++
	return s.send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamChunk{StreamChunk: c}})
}

// close ends the stream, final or not (an interrupted answer is not).
func (s *textStream) close(final bool) error {
	return s.end(map[string]string{AttrTranscriptFinal: strconv.FormatBool(final)})
}

// end ends the stream with attrs in its trailer.
func (s *textStream) end(attrs map[string]string) error {
	return s.send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamTrailer{StreamTrailer: &livekit.DataStream_Trailer{
		StreamId:   s.id,
		Attributes: attrs,
	}}})
}

func (s *textStream) send(p *livekit.DataPacket) error {
	p.ParticipantIdentity = s.sender
	return s.out.publishPacket(p, s.dest)
}

// sendTranscript publishes one update of a segment as a whole stream, as
// LiveKit Agents does for a user's interim and final transcripts.
func sendTranscript(out publisher, sender, trackID, segmentID, text string, final bool) error {
	s, err := openTranscript(out, sender, trackID, segmentID, "", final, nil)
	if err != nil {
		return err
	}
	if err := s.write(text); err != nil {
		return err
	}
	return s.close(final)
}

// speech is the session's voice.Room: what the voice stage says to the
// participants (Alicia Transcriptions, the lk.transcription streams, the
// agent's state) leaves through the session's writer like every
// envelope, in one order, and waits out a reconnecting room the same way.
type speech struct {
	s *Session
	// The writer's: the open streams of the agent's answers being
	// spoken, by answer; every word released of each answer not ended
	// yet, published or not; the answers whose transcript ended, oldest
	// first; the state to show, and whether LiveKit has it.
	answers map[string]*textStream
	said    map[string]string
	ended   []string
	state   voice.State
	stale   bool
}

// endedAnswers bounds the answers remembered as ended: a late Cut comes
// right after its answer's end, never after many more answers.
const endedAnswers = 32

var _ voice.Room = (*speech)(nil)

// Transcript implements voice.Room. Interim transcripts replace each
// other under the utterance's id; the final one's id is the user
// message's. Each names its speaker, as the lk.transcription stream
// does by its sender, for a room of several people.
func (v *speech) Transcript(_ context.Context, t voice.Transcript) {
	v.s.Send(&wire.Transcription{ID: t.ID, ConversationID: v.s.ID, Text: t.Text, Final: t.Final, Speaker: t.Speaker})
	v.s.post(func() {
		if err := sendTranscript(v.s.out, t.Speaker, t.TrackID, voice.UserSegment(t.ID), t.Text, t.Final); err != nil {
			v.s.log.Warn("publishing a transcript stream", "err", err)
		}
	})
}

// AgentSpeech implements voice.Room: the sentences of one answer are the
// chunks of one stream, final when the last sentence is spoken.
func (v *speech) AgentSpeech(_ context.Context, sp voice.AgentSpeech) {
	v.s.post(func() { v.agentSpeech(sp) })
}

// agentSpeech publishes one answer's transcript as exactly one stream.
// An answer cut before a word of it was heard still gets one, empty and
// closed not final: a client shows the answer as generated until its
// transcript says how much was heard, and the stored answer then holds
// nothing. A second stream for an answer whose transcript has ended
// would tell a client that none of it was heard, so an answer's end is
// remembered and what comes after it dropped.
func (v *speech) agentSpeech(sp voice.AgentSpeech) {
	if v.said == nil {
		v.said = map[string]string{}
	}
	key := sp.AnswerID
	if key == "" {
		// Without the answer's id a late Cut looks like one before any
		// word, and every answer to one message shares the segment: a Cut
		// closes only what is open, and an ended segment may start again.
		key = sp.SegmentID
		if _, known := v.said[key]; !known && sp.Cut {
			return
		}
	} else if slices.Contains(v.ended, key) {
		return
	}
	said, known := v.said[key]
	if !known {
		// A new answer: an earlier one not ended was cut short.
		for k := range v.said {
			if old := v.answers[k]; old != nil {
				_ = old.close(false)
			}
			v.end(k)
		}
	}
	said += sp.Text
	v.said[key] = said
	st, text := v.answers[key], sp.Text
	if st == nil && (sp.Text != "" || sp.Final || sp.Cut) {
		var err error
		if st, err = openTranscript(v.s.out, "", sp.TrackID, sp.SegmentID, sp.AnswerID, false, nil); err != nil {
			v.s.log.Warn("publishing the agent's transcript", "err", err)
			if sp.Final || sp.Cut {
				v.end(key)
			}
			return
		}
		// Opened after an open that failed while the room was
		// reconnecting, it starts with every word released so far: a
		// client shows what was heard from it.
		v.answers[key], text = st, said
	}
	if text != "" {
		if err := st.write(text); err != nil {
			v.s.log.Warn("publishing the agent's transcript", "err", err)
		}
	}
	if sp.Final || sp.Cut {
		_ = st.close(sp.Final)
		v.end(key)
	}
}

// end forgets an answer's transcript and remembers that it ended.
func (v *speech) end(key string) {
	delete(v.answers, key)
	delete(v.said, key)
	v.ended = append(v.ended, key)
	if len(v.ended) > endedAnswers {
		v.ended = slices.Delete(v.ended, 0, len(v.ended)-endedAnswers)
	}
}

// SetState implements voice.Room.
func (v *speech) SetState(_ context.Context, st voice.State) { v.s.post(func() { v.setState(st) }) }

// setState publishes the agent's state as its participant attribute. A
// room that is reconnecting gets it once it is back (reconnected).
func (v *speech) setState(st voice.State) {
	v.state = st
	v.stale = v.s.out.setAttributes(map[string]string{AgentStateAttribute: string(st)}) != nil
}

// reconnected re-publishes the state LiveKit missed.
func (v *speech) reconnected() {
	if v.stale {
		v.setState(v.state)
	}
}

// SpeechProblem implements voice.Room: an ErrorMessage to everyone in the
// conversation, service unavailable (503), a warning the conversation
// goes on after (typed messages are still answered).
func (v *speech) SpeechProblem(_ context.Context, p voice.SpeechProblem) {
	v.s.Send(wire.NewError(v.s.ID, wire.CodeServiceUnavailable, p.Message))
}

// Members implements voice.Room.
func (v *speech) Members() []pipeline.Member { return v.s.Members() }
