package room

import (
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

// TranscriptionTopic is where LiveKit's clients read transcripts, and
// the attributes LiveKit Agents sets on them.
const (
	TranscriptionTopic   = "lk.transcription"
	AttrTranscribedTrack = "lk.transcribed_track_id"
	AttrSegmentID        = "lk.segment_id"
	AttrTranscriptFinal  = "lk.transcription_final"
)

// TextStream is one text stream on TranscriptionTopic, hand-built like
// the envelope streams (conn.go): besides the SDK writer's delay, it always
// names the bot as the sender, and transcripts of a user's words must name
// the user, which the server keeps because the bot is an agent.
type TextStream struct {
	lp     *lksdk.LocalParticipant
	id     string
	sender string
	dest   []string
	next   uint64
}

// OpenTranscript starts a text stream with the transcription attributes
// of one segment. sender is whose words they are (a user's identity for
// the user's speech, empty for the bot's own); dest empty means everyone.
// final goes in the header: true for a complete final transcript sent in
// one go, false for a stream whose trailer will say.
func OpenTranscript(lp *lksdk.LocalParticipant, sender, trackID, segmentID string, final bool, dest []string) (*TextStream, error) {
	s := &TextStream{lp: lp, id: uuid.NewString(), sender: sender, dest: dest}
	err := s.send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamHeader{StreamHeader: &livekit.DataStream_Header{
		StreamId:  s.id,
		Timestamp: time.Now().UnixMilli(),
		Topic:     TranscriptionTopic,
		MimeType:  "text/plain",
		Attributes: map[string]string{
			AttrTranscribedTrack: trackID,
			AttrSegmentID:        segmentID,
			AttrTranscriptFinal:  strconv.FormatBool(final),
		},
		ContentHeader: &livekit.DataStream_Header_TextHeader{TextHeader: &livekit.DataStream_TextHeader{
			OperationType: livekit.DataStream_CREATE,
			Generated:     sender != "",
		}},
	}}})
	return s, err
}

// Write appends text to the stream.
func (s *TextStream) Write(text string) error {
	c := &livekit.DataStream_Chunk{StreamId: s.id, ChunkIndex: s.next, Content: []byte(text)}
	s.next++
	return s.send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamChunk{StreamChunk: c}})
}

// Close ends the stream, final or not (an interrupted answer is not).
func (s *TextStream) Close(final bool) error {
	return s.send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamTrailer{StreamTrailer: &livekit.DataStream_Trailer{
		StreamId:   s.id,
		Attributes: map[string]string{AttrTranscriptFinal: strconv.FormatBool(final)},
	}}})
}

func (s *TextStream) send(p *livekit.DataPacket) error {
	p.ParticipantIdentity = s.sender
	return s.lp.PublishDataPacket(streamPacket{p}, lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishDestination(s.dest))
}

// SendTranscript publishes one update of a segment as a whole stream, as
// LiveKit Agents does for a user's interim and final transcripts.
func SendTranscript(lp *lksdk.LocalParticipant, sender, trackID, segmentID, text string, final bool, dest []string) error {
	s, err := OpenTranscript(lp, sender, trackID, segmentID, final, dest)
	if err != nil {
		return err
	}
	if err := s.Write(text); err != nil {
		return err
	}
	return s.Close(final)
}
