package room

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	"github.com/livekit/media-sdk/rtp"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/room/audio"
)

// voiceOut is the agent's voice: one Opus track (audio.Track), which sends
// what is queued in 20 ms frames on its own clock, so that sentences
// queued back to back play without a gap and nothing is sent faster than
// real time.
type voiceOut struct {
	track *audio.Track
	pub   *lksdk.LocalTrackPublication
	lp    *lksdk.LocalParticipant
	rate  int

	mu sync.Mutex
	// held is what a pause took back from the track and what was
	// written since, played by Resume.
	held   []int16
	paused bool
	// resamplers convert other rates to the track's, one per rate, kept
	// across writes so that chunk edges do not click.
	resamplers map[int]media.PCM16Writer
}

var _ voice.AudioOut = (*voiceOut)(nil)

// publishVoice publishes the agent's voice track. rate is the rate most
// audio will come at (the synthesiser's), so that it needs no extra
// resampling step where Opus can encode it as it is.
func publishVoice(lp *lksdk.LocalParticipant, rate int) (*voiceOut, error) {
	rate = audio.TrackRate(rate)
	track, err := audio.NewTrack(rate)
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
	if rate == v.rate {
		return v.put(samples)
	}
	w, ok := v.resamplers[rate]
	if !ok {
		w = media.ResampleWriter(trackWriter{v}, rate)
		v.resamplers[rate] = w
	}
	return w.WriteSample(samples)
}

// put queues samples at the track's rate, or holds them while paused.
// Called with mu held.
func (v *voiceOut) put(samples []int16) error {
	if v.paused {
		v.held = append(v.held, samples...)
		return nil
	}
	return v.track.WriteSample(samples)
}

func (v *voiceOut) duration(n int) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(v.rate)
}

// Pause implements voice.AudioOut: what the track has not sent yet is
// taken back and held with whatever is written meanwhile.
func (v *voiceOut) Pause() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.paused {
		return
	}
	v.held = append(v.track.Take(), v.held...)
	v.paused = true
}

// Resume implements voice.AudioOut: what was held plays from where it
// paused.
func (v *voiceOut) Resume() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.paused {
		return
	}
	v.paused = false
	held := v.held
	v.held = nil
	if len(held) > 0 {
		_ = v.put(held)
	}
}

// Clear implements voice.AudioOut: the queued and held audio is dropped,
// not played out, and a pause ends.
func (v *voiceOut) Clear() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.track.Take()
	v.held, v.paused = nil, false
	// A resampler may hold a few milliseconds of the old speech.
	v.resamplers = map[int]media.PCM16Writer{}
}

// Keep implements voice.AudioOut.
func (v *voiceOut) Keep(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := int(d * time.Duration(v.rate) / time.Second)
	if v.paused {
		v.held = v.held[:min(n, len(v.held))]
		return
	}
	v.track.Keep(n)
}

// Queued implements voice.AudioOut: what is queued or held and not
// played yet.
func (v *voiceOut) Queued() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.paused {
		return v.duration(len(v.held))
	}
	return v.duration(v.track.Queued())
}

// Close unpublishes the track.
func (v *voiceOut) Close() error {
	err := v.lp.UnpublishTrack(v.pub.SID())
	return errors.Join(err, v.track.Close())
}

// trackWriter lets a resampler write into the voice (paused or not)
// without closing it; it is called within Write, with mu held.
type trackWriter struct{ v *voiceOut }

func (w trackWriter) String() string                        { return "VoiceOut" }
func (w trackWriter) SampleRate() int                       { return w.v.rate }
func (w trackWriter) WriteSample(s media.PCM16Sample) error { return w.v.put(s) }
func (w trackWriter) Close() error                          { return nil }

// isUserMic reports whether a subscribed track is a user's microphone:
// the bot listens to people, never to another agent, and never to screen
// share audio.
func isUserMic(track *webrtc.TrackRemote, pub *lksdk.RemoteTrackPublication, rp *lksdk.RemoteParticipant) bool {
	return track.Kind() == webrtc.RTPCodecTypeAudio && pub.Source() == livekit.TrackSource_MICROPHONE &&
		rp.Kind() != lksdk.ParticipantAgent
}

// listenToMic decodes a user's microphone track at voice.InputRate mono
// for in: LiveKit's media layer receives it (its jitter buffer), and
// libopus decodes it (audio.MicDecoder) at that rate itself, which costs
// less than the SDK's PCMRemoteTrack, which decodes at 48 kHz and
// resamples with soxr (BenchmarkMicCPU), and conceals the packets lost
// on the way. Close the returned decoder to stop; in is closed with it.
func listenToMic(track *webrtc.TrackRemote, in audio.Input) (opus.Writer, error) {
	if track.Codec().MimeType != webrtc.MimeTypeOpus {
		return nil, fmt.Errorf("microphone track is %s, not Opus", track.Codec().MimeType)
	}
	dec, err := audio.NewMicDecoder(in, voice.InputRate)
	if err != nil {
		return nil, err
	}
	// Ends when the track does (its reads fail once it is unsubscribed).
	go func() {
		_ = rtp.HandleLoop(track, rtp.HandleJitter(rtp.NewNopCloser(dec)))
	}()
	return dec, nil
}
