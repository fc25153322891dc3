package room

import (
	"context"
	"log/slog"
	"sync"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/wire"
)

// VoiceRoom is the LiveKit side of a conversation's voice stage: it
// implements voice.Room with Alicia Transcriptions plus the
// lk.transcription streams and agent-state attribute that stock LiveKit
// clients read.
type VoiceRoom struct {
	lp             *lksdk.LocalParticipant
	conversationID string
	// sendTranscription sends an Alicia Transcription (type 9) to every
	// participant of the conversation.
	sendTranscription func(ctx context.Context, t *wire.Transcription)
	wantsAudio        func() bool
	log               *slog.Logger

	mu       sync.Mutex
	segments map[string]*TextStream // the agent's answers being spoken
}

var _ voice.Room = (*VoiceRoom)(nil)

// NewVoiceRoom binds a voice stage to the room lp is in. send carries
// Transcriptions through the conversation's outbox; wantsAudio reports
// whether a participant announced audio_output.
func NewVoiceRoom(lp *lksdk.LocalParticipant, conversationID string, send func(context.Context, *wire.Transcription), wantsAudio func() bool, log *slog.Logger) *VoiceRoom {
	return &VoiceRoom{lp: lp, conversationID: conversationID, sendTranscription: send, wantsAudio: wantsAudio, log: log,
		segments: map[string]*TextStream{}}
}

// Transcript implements voice.Room. Interim transcripts replace each
// other under the utterance's id; the final one's id is the user
// message's.
func (v *VoiceRoom) Transcript(ctx context.Context, t voice.Transcript) {
	v.sendTranscription(ctx, &wire.Transcription{ID: t.ID, ConversationID: v.conversationID, Text: t.Text, Final: t.Final})
	if err := SendTranscript(v.lp, t.Speaker, t.TrackID, voice.UserSegment(t.ID), t.Text, t.Final, nil); err != nil {
		v.log.Warn("publishing a transcript stream", "err", err)
	}
}

// AgentSpeech implements voice.Room: the sentences of one answer are the
// chunks of one stream, final when the last sentence is spoken.
func (v *VoiceRoom) AgentSpeech(_ context.Context, s voice.AgentSpeech) {
	v.mu.Lock()
	st := v.segments[s.SegmentID]
	var stale []*TextStream
	if st == nil {
		// A new answer: one cut short is closed as not final.
		for id, old := range v.segments {
			stale = append(stale, old)
			delete(v.segments, id)
		}
	}
	v.mu.Unlock()
	for _, old := range stale {
		_ = old.Close(false)
	}
	if st == nil {
		var err error
		if st, err = OpenTranscript(v.lp, "", s.TrackID, s.SegmentID, false, nil); err != nil {
			v.log.Warn("publishing the agent's transcript", "err", err)
			return
		}
		v.mu.Lock()
		v.segments[s.SegmentID] = st
		v.mu.Unlock()
	}
	if s.Text != "" {
		text := s.Text
		if st.next > 0 {
			text = " " + text
		}
		if err := st.Write(text); err != nil {
			v.log.Warn("publishing the agent's transcript", "err", err)
		}
	}
	if s.Final {
		v.mu.Lock()
		delete(v.segments, s.SegmentID)
		v.mu.Unlock()
		_ = st.Close(true)
	}
}

// SetState implements voice.Room.
func (v *VoiceRoom) SetState(_ context.Context, s voice.State) { SetAgentState(v.lp, s) }

// WantsAudio implements voice.Room.
func (v *VoiceRoom) WantsAudio() bool { return v.wantsAudio() }

// WantsAudio reports whether any of the clients' features include
// audio_output.
func WantsAudio(features ...[]string) bool {
	for _, f := range features {
		for _, x := range f {
			if x == wire.FeatureAudioOutput {
				return true
			}
		}
	}
	return false
}

// Mics subscribes the bot to users' microphone tracks (it joins with
// auto-subscribe off) and feeds each to the voice stage.
type Mics struct {
	ctx context.Context
	log *slog.Logger

	mu     sync.Mutex
	stage  *voice.Stage
	tracks map[string]*lkmedia.PCMRemoteTrack
}

// NewMics routes microphones until ctx ends. Bind it to the room's
// callbacks before joining, and Start it once the stage exists.
func NewMics(ctx context.Context, log *slog.Logger) *Mics {
	return &Mics{ctx: ctx, log: log, tracks: map[string]*lkmedia.PCMRemoteTrack{}}
}

func isMicPublication(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) bool {
	return pub.Kind() == lksdk.TrackKindAudio && pub.Source() == livekit.TrackSource_MICROPHONE && rp.Kind() != lksdk.ParticipantAgent
}

func (m *Mics) subscribe(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	if !isMicPublication(pub, rp) {
		return
	}
	if err := pub.SetSubscribed(true); err != nil {
		m.log.Warn("subscribing to a microphone", "identity", rp.Identity(), "err", err)
	}
}

// Bind sets the track callbacks on cb.
func (m *Mics) Bind(cb *lksdk.RoomCallback) {
	cb.OnTrackPublished = func(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		m.mu.Lock()
		started := m.stage != nil
		m.mu.Unlock()
		if started {
			m.subscribe(pub, rp)
		}
	}
	cb.OnTrackSubscribed = func(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
		m.mu.Lock()
		stage := m.stage
		m.mu.Unlock()
		if stage == nil || !IsUserMic(track, pub, rp) {
			return
		}
		t, err := ListenToMic(track, stage.Listen(m.ctx, rp.Identity(), pub.SID()))
		if err != nil {
			m.log.Warn("decoding a microphone", "identity", rp.Identity(), "err", err)
			return
		}
		m.mu.Lock()
		m.tracks[pub.SID()] = t
		m.mu.Unlock()
	}
	cb.OnTrackUnsubscribed = func(_ *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
		m.mu.Lock()
		t := m.tracks[pub.SID()]
		delete(m.tracks, pub.SID())
		m.mu.Unlock()
		if t != nil {
			t.Close()
		}
	}
}

// Start feeds microphones to stage, from those already published on.
func (m *Mics) Start(r *lksdk.Room, stage *voice.Stage) {
	m.mu.Lock()
	m.stage = stage
	m.mu.Unlock()
	for _, rp := range r.GetRemoteParticipants() {
		for _, pub := range rp.TrackPublications() {
			if p, ok := pub.(*lksdk.RemoteTrackPublication); ok {
				m.subscribe(p, rp)
			}
		}
	}
}

// Close stops decoding every microphone.
func (m *Mics) Close() {
	m.mu.Lock()
	ts := m.tracks
	m.tracks = map[string]*lkmedia.PCMRemoteTrack{}
	m.mu.Unlock()
	for _, t := range ts {
		t.Close()
	}
}
