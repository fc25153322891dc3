package room

import (
	"context"
	"slices"
	"testing"

	"github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// agentStream is one answer's lk.transcription stream as published.
type agentStream struct {
	attrs map[string]string
	text  string
	final string // the trailer's lk.transcription_final; "" while open
}

// agentStreams reads the streams of the bot's own transcripts out of
// what the session published, in the order they were opened.
func agentStreams(rec *recorder) []agentStream {
	rec.mu.Lock()
	packets := slices.Clone(rec.packets)
	rec.mu.Unlock()
	var out []agentStream
	at := map[string]int{}
	for _, p := range packets {
		switch v := p.Value.(type) {
		case *livekit.DataPacket_StreamHeader:
			at[v.StreamHeader.StreamId] = len(out)
			out = append(out, agentStream{attrs: v.StreamHeader.Attributes})
		case *livekit.DataPacket_StreamChunk:
			out[at[v.StreamChunk.StreamId]].text += string(v.StreamChunk.Content)
		case *livekit.DataPacket_StreamTrailer:
			out[at[v.StreamTrailer.StreamId]].final = v.StreamTrailer.Attributes[AttrTranscriptFinal]
		}
	}
	return out
}

// An answer cut before a word of it was heard gets its stream all the
// same, empty and closed not final, naming the answer: a client showing
// the text as generated learns that none of it was heard, and which
// answer that was. Every answer gets exactly one stream: a Cut after the
// answer's final transcript (the next turn starting as its audio ends)
// publishes nothing more, and a regeneration, under the same segment,
// gets a stream of its own.
func TestTranscriptOfAnAnswerCutBeforeAWord(t *testing.T) {
	s, rec := configuredSession(t, "conv_cut")
	ctx := context.Background()
	seg := voice.AnswerSegment("msg_1")
	say := func(answer, text string, final, cut bool) {
		s.speech.AgentSpeech(ctx, voice.AgentSpeech{SegmentID: seg, AnswerID: answer, TrackID: "TR_bot", Text: text, Final: final, Cut: cut})
	}
	say("am_1", "", false, true)
	say("am_2", "Hi", false, false)
	say("am_2", " there.", true, false)
	say("am_2", "", false, true) // late: am_2 was heard whole
	say("am_3", "Hello", false, false)
	say("am_3", "", false, true)
	settle(s)

	got := agentStreams(rec)
	want := []agentStream{
		{text: "", final: "false"},
		{text: "Hi there.", final: "true"},
		{text: "Hello", final: "false"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d streams %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		answer := []string{"am_1", "am_2", "am_3"}[i]
		if g.text != w.text || g.final != w.final || g.attrs[AttrSegmentID] != seg || g.attrs[AttrAnswerID] != answer || g.attrs[AttrTranscriptFinal] != "false" {
			t.Errorf("stream %d: %+v, want %q closed final=%s for %s", i, g, w.text, w.final, answer)
		}
	}
}

// A stream whose open failed while the room was reconnecting is opened
// again with the next word, holding every word released so far: a client
// shows from it what was heard, which is what the answer is stored as.
func TestTranscriptOpenedLateHoldsEveryWordHeard(t *testing.T) {
	s, rec := configuredSession(t, "conv_late")
	ctx := context.Background()
	seg := voice.AnswerSegment("msg_1")
	rec.mu.Lock()
	rec.down = true
	rec.mu.Unlock()
	s.speech.AgentSpeech(ctx, voice.AgentSpeech{SegmentID: seg, AnswerID: "am_1", TrackID: "TR_bot", Text: "Once"})
	settle(s)
	rec.mu.Lock()
	rec.down = false
	rec.mu.Unlock()
	s.speech.AgentSpeech(ctx, voice.AgentSpeech{SegmentID: seg, AnswerID: "am_1", TrackID: "TR_bot", Text: " upon"})
	s.speech.AgentSpeech(ctx, voice.AgentSpeech{SegmentID: seg, AnswerID: "am_1", TrackID: "TR_bot", Cut: true})
	settle(s)

	got := agentStreams(rec)
	if len(got) != 1 || got[0].text != "Once upon" || got[0].final != "false" {
		t.Fatalf("streams %+v, want one with every word heard, closed not final", got)
	}
}

// configuredSession is a session in which alice's Configuration has been
// answered, so that what follows reaches her.
func configuredSession(t *testing.T, id string) (*Session, *recorder) {
	t.Helper()
	s, rec := testSession(t, storage.NewMemory(storage.ReasoningPlain), id)
	configure(t, s, "alice", 1, 0)
	waitFor(t, rec, func(e []*wire.Envelope) bool { return len(e) == 1 })
	return s, rec
}
