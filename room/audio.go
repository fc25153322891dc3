package room

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/protocol/livekit"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	lkmedia "github.com/livekit/server-sdk-go/v2/pkg/media"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// voiceOut is the agent's voice: one Opus track, fed with PCM that
// server-sdk-go's PCMLocalTrack resamples to 48 kHz, encodes and sends in
// 20 ms frames on its own clock. It writes silence whenever its queue is
// empty, so the stream has continuous timestamps, sentences queued back to
// back play without a gap, and nothing is sent faster than real time.
type voiceOut struct {
	track *lkmedia.PCMLocalTrack
	pub   *lksdk.LocalTrackPublication
	lp    *lksdk.LocalParticipant
	rate  int

	mu sync.Mutex
	// playEnd is when everything queued will have played: the queue's
	// length in time, which PCMLocalTrack does not expose.
	playEnd time.Time
	// resamplers convert other rates to the track's, one per rate, kept
	// across writes so that chunk edges do not click.
	resamplers map[int]media.PCM16Writer
}

var _ voice.AudioOut = (*voiceOut)(nil)

// publishVoice publishes the agent's voice track. rate is the rate most
// audio will come at (the synthesiser's), so that it needs no extra
// resampling step.
func publishVoice(lp *lksdk.LocalParticipant, rate int) (*voiceOut, error) {
	track, err := lkmedia.NewPCMLocalTrack(rate, 1, protoLogger.GetLogger())
	if err != nil {
		return nil, err
	}
	pub, err := lp.PublishTrack(track, &lksdk.TrackPublicationOptions{Name: "alicia-voice", Source: livekit.TrackSource_MICROPHONE})
	if err != nil {
		_ = track.Close()
		return nil, fmt.Errorf("publishing the voice track: %w", err)
	}
	return &voiceOut{track: track, pub: pub, lp: lp, rate: rate, resamplers: map[int]media.PCM16Writer{}}, nil
}

// TrackID implements voice.AudioOut.
func (v *voiceOut) TrackID() string { return v.pub.SID() }

// Write implements voice.AudioOut.
func (v *voiceOut) Write(samples []int16, rate int) error {
	if len(samples) == 0 {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	if v.playEnd.Before(now) {
		v.playEnd = now
	}
	v.playEnd = v.playEnd.Add(time.Duration(len(samples)) * time.Second / time.Duration(rate))
	if rate == v.rate {
		return v.track.WriteSample(samples)
	}
	w, ok := v.resamplers[rate]
	if !ok {
		w = media.ResampleWriter(trackWriter{v.track}, rate)
		v.resamplers[rate] = w
	}
	return w.WriteSample(samples)
}

// Clear implements voice.AudioOut: the queued audio is dropped, not played
// out.
func (v *voiceOut) Clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.track.ClearQueue()
	v.playEnd = time.Now()
	// A resampler may hold a few milliseconds of the old speech.
	v.resamplers = map[int]media.PCM16Writer{}
}

// Queued implements voice.AudioOut.
func (v *voiceOut) Queued() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return max(0, time.Until(v.playEnd))
}

// Close unpublishes the track.
func (v *voiceOut) Close() error {
	err := v.lp.UnpublishTrack(v.pub.SID())
	return errors.Join(err, v.track.Close())
}

// trackWriter lets a resampler write into the track without closing it.
type trackWriter struct{ t *lkmedia.PCMLocalTrack }

func (w trackWriter) String() string                        { return "VoiceOut" }
func (w trackWriter) SampleRate() int                       { return w.t.SampleRate() }
func (w trackWriter) WriteSample(s media.PCM16Sample) error { return w.t.WriteSample(s) }
func (w trackWriter) Close() error                          { return nil }

// micInput receives a speaker's audio, 16 kHz mono.
type micInput interface {
	Write(samples []int16) error
	Close() error
}

// isUserMic reports whether a subscribed track is a user's microphone:
// the bot listens to people, never to another agent, and never to screen
// share audio.
func isUserMic(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) bool {
	return track.Kind() == webrtc.RTPCodecTypeAudio && pub.Source() == livekit.TrackSource_MICROPHONE &&
		rp.Kind() != lksdk.ParticipantAgent
}

// listenToMic decodes a user's microphone track (Opus, through libopus)
// and resamples it to voice.InputRate mono for in. Close the returned
// track to stop; in is closed with it.
func listenToMic(track *webrtc.TrackRemote, in micInput) (*lkmedia.PCMRemoteTrack, error) {
	return lkmedia.NewPCMRemoteTrack(track, micWriter{in},
		lkmedia.WithTargetSampleRate(voice.InputRate), lkmedia.WithTargetChannels(1))
}

type micWriter struct{ in micInput }

func (m micWriter) WriteSample(s media.PCM16Sample) error { return m.in.Write(s) }
func (m micWriter) Close() error                          { return m.in.Close() }
