package room

import (
	"context"
	"log/slog"
	"sync"

	"github.com/livekit/media-sdk/opus"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// VoiceConfig turns the voice path on: every room gets the agent's voice
// track and listens to its users' microphones.
type VoiceConfig struct {
	Stage voice.Config
	// OutputRate is the synthesiser's sample rate, the voice track's
	// source rate.
	OutputRate int
}

// EnableVoice turns the voice path on for the rooms joined from now on.
func (a *Agent) EnableVoice(cfg VoiceConfig) { a.voice = &cfg }

// voiceJob binds one room's voice stage to LiveKit: the microphones in,
// the voice track out. The stage itself is the conversation's: it asks
// the engine and speaks every turn the engine hands it.
type voiceJob struct {
	cfg  VoiceConfig
	log  *slog.Logger
	mics *mics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    *voiceOut
	leave  func()
}

func newVoiceJob(parent context.Context, cfg VoiceConfig, log *slog.Logger) *voiceJob {
	ctx, cancel := context.WithCancel(parent)
	return &voiceJob{cfg: cfg, log: log, mics: &mics{log: log, tracks: map[string]opus.Writer{}, pre: newPreconnect(log)}, ctx: ctx, cancel: cancel}
}

// start publishes the voice and starts listening, once the room is
// joined.
func (v *voiceJob) start(r *lksdk.Room, sess *Session) {
	conv, ok := sess.conv.(voice.Conversation)
	if !ok {
		v.log.Warn("voice: the conversation engine cannot take spoken turns")
		return
	}
	out, err := publishVoice(r.LocalParticipant, v.cfg.OutputRate)
	if err != nil {
		v.log.Error("voice: publishing the voice track", "err", err)
		return
	}
	v.out = out
	cfg := v.cfg.Stage
	if cfg.Observer == nil {
		cfg.Observer = sess.metrics
	}
	stage, leave := voice.Join(cfg, conv, sess, sess.speech, out)
	out.track.Tap(stage.Sent)
	v.leave = leave
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		stage.Run(v.ctx)
	}()
	v.mics.start(r, stage, sess.listensTo)
}

// stop ends the room's voice and waits for it.
func (v *voiceJob) stop() {
	if v.leave != nil {
		v.leave()
	}
	v.mics.close()
	v.cancel()
	v.wg.Wait()
	if v.out != nil {
		_ = v.out.Close()
	}
}

// mics subscribes the bot to users' microphone tracks (it joins with
// auto-subscribe off) and feeds each to the voice stage.
type mics struct {
	log *slog.Logger
	// pre puts what a microphone recorded before the bot came in front of
	// its live audio (preconnect.go).
	pre *preconnect

	mu     sync.Mutex
	stage  *voice.Stage
	tracks map[string]opus.Writer
	// heard is told of each user whose microphone is listened to.
	heard func(identity string)
}

func isMicPublication(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) bool {
	return pub.Kind() == lksdk.TrackKindAudio && pub.Source() == livekit.TrackSource_MICROPHONE && rp.Kind() != lksdk.ParticipantAgent
}

func (m *mics) subscribe(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	if !isMicPublication(pub, rp) {
		return
	}
	if err := pub.SetSubscribed(true); err != nil {
		m.log.Warn("subscribing to a microphone", "identity", rp.Identity(), "err", err)
	}
}

func (m *mics) published(pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	m.mu.Lock()
	started := m.stage != nil
	m.mu.Unlock()
	if started {
		m.subscribe(pub, rp)
	}
}

func (m *mics) subscribed(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) {
	m.mu.Lock()
	stage, heard := m.stage, m.heard
	m.mu.Unlock()
	if stage == nil || !isUserMic(track, pub, rp) {
		return
	}
	heard(rp.Identity())
	in := m.pre.attach(rp.Identity(), pub.SID(), sendsPreconnect(pub), stage.Listen(rp.Identity(), pub.SID()))
	t, err := listenToMic(track, in)
	if err != nil {
		m.log.Warn("decoding a microphone", "identity", rp.Identity(), "err", err)
		_ = in.Close()
		return
	}
	m.mu.Lock()
	m.tracks[pub.SID()] = t
	m.mu.Unlock()
}

func (m *mics) unsubscribed(_ *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, _ *lksdk.RemoteParticipant) {
	m.mu.Lock()
	t := m.tracks[pub.SID()]
	delete(m.tracks, pub.SID())
	m.mu.Unlock()
	if t != nil {
		_ = t.Close()
	}
}

// start feeds microphones to stage, from those already published on,
// and tells heard of each user listened to.
func (m *mics) start(r *lksdk.Room, stage *voice.Stage, heard func(identity string)) {
	m.mu.Lock()
	m.stage, m.heard = stage, heard
	m.mu.Unlock()
	for _, rp := range r.GetRemoteParticipants() {
		for _, pub := range rp.TrackPublications() {
			if p, ok := pub.(*lksdk.RemoteTrackPublication); ok {
				m.subscribe(p, rp)
			}
		}
	}
}

// close stops decoding every microphone.
func (m *mics) close() {
	m.mu.Lock()
	ts := m.tracks
	m.tracks = map[string]opus.Writer{}
	m.mu.Unlock()
	for _, t := range ts {
		_ = t.Close()
	}
}
