package room

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	"github.com/livekit/media-sdk/rtp"
	"github.com/livekit/protocol/livekit"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/pion/webrtc/v4"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// voiceOut is the agent's voice: one Opus track (voiceTrack), which sends
// what is queued in 20 ms frames on its own clock, so that sentences
// queued back to back play without a gap and nothing is sent faster than
// real time.
type voiceOut struct {
	track *voiceTrack
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
	rate = voiceRate(rate)
	track, err := newVoiceTrack(rate)
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
	v.held = append(v.track.take(), v.held...)
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
	v.track.take()
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
	v.track.keep(n)
}

// Queued implements voice.AudioOut: what is queued or held and not
// played yet.
func (v *voiceOut) Queued() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.paused {
		return v.duration(len(v.held))
	}
	return v.duration(v.track.queued())
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

// micInput receives a speaker's audio, 16 kHz mono. Write copies what it
// keeps: the samples are reused once it returns.
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
// at voice.InputRate mono for in, through LiveKit's media layer: its
// jitter buffer, RTP depacketiser and decoder. libopus decodes at that
// rate itself, which costs less than the SDK's PCMRemoteTrack, which
// decodes at 48 kHz and resamples with soxr (BenchmarkMicCPU). Close
// the returned decoder to stop; in is closed with it.
func listenToMic(track *webrtc.TrackRemote, in micInput) (opus.Writer, error) {
	if track.Codec().MimeType != webrtc.MimeTypeOpus {
		return nil, fmt.Errorf("microphone track is %s, not Opus", track.Codec().MimeType)
	}
	dec, err := newMicDecoder(in)
	if err != nil {
		return nil, err
	}
	// Ends when the track does (its reads fail once it is unsubscribed).
	go func() {
		_ = rtp.HandleLoop(track, rtp.HandleJitter(rtp.NewNopCloser(rtp.NewMediaStreamIn[opus.Sample](dec))))
	}()
	return dec, nil
}

// newMicDecoder decodes Opus packets into in at voice.InputRate mono,
// with silence for the time a client in DTX sends nothing (micWriter).
func newMicDecoder(in micInput) (opus.Writer, error) {
	w := &micWriter{in: in, covered: time.Now()}
	dec, err := opus.Decode(w, 1, protoLogger.GetLogger())
	if err != nil {
		return nil, err
	}
	return dtxWatch{Writer: dec, mic: w}, nil
}

// micFrame is the silence written at a time, and how often.
const micFrame = 20 * time.Millisecond

// dtxWatch tells micWriter whether the client is in Opus DTX: WebRTC
// stops sending in silence, and sends the first packet of a byte or two
// that the encoder makes then, which says so. A client that sends without
// DTX is taken as silent once its encoder has marked dtxHangover packets
// in a row as holding no voice: they are not decoded, and each is heard
// as silence of its length. Decoding them was most of what such a client
// cost more than one in DTX (the voice benchmark in the README), for
// audio the stage only ever hears as silence; the first packet with
// voice in it is decoded again.
type dtxWatch struct {
	opus.Writer
	mic *micWriter
}

// dtxHangover is how many packets without voice must come in a row before
// they are skipped: libopus's own DTX waits as long (200 ms of 20 ms
// packets), so that a pause inside a word is heard as it was.
const dtxHangover = 10

func (w dtxWatch) WriteSample(s opus.Sample) error {
	dtx := len(s) <= 2
	w.mic.dtx.Store(dtx)
	if dtx {
		w.mic.watch()
		return nil
	}
	if active, length, ok := voiceActivity(s); ok && !active {
		w.mic.unvoiced++
		if w.mic.unvoiced > dtxHangover {
			// In place of the audio it would have decoded to, at the
			// time it would have: the packets keep coming, and they are
			// the clock, as when they are decoded.
			return w.mic.WriteSample(micSilence[:min(len(micSilence), samplesOf(length))])
		}
	} else {
		w.mic.unvoiced = 0
	}
	return w.Writer.WriteSample(s)
}

// voiceActivity reads an Opus packet's voice-activity flags, which its
// SILK layer carries for each of its frames (RFC 6716 §4.2.3), and how
// long the packet is; ok is false when it has no flags to read (CELT
// alone, or a packet of more than two frames, which WebRTC does not
// send), and the packet is then decoded. The flags are the first
// symbols of the range-coded frame, each of probability one half, which
// makes them its first bits.
func voiceActivity(p []byte) (active bool, length time.Duration, ok bool) {
	if len(p) < 2 {
		return false, 0, false
	}
	config := p[0] >> 3
	if config >= 16 {
		return false, 0, false // CELT only
	}
	// SILK frames per Opus frame: one per 20 ms, one for 10 ms; hybrid
	// frames are 10 or 20 ms, SILK's 10 to 60.
	n, each := 1, [2]time.Duration{10, 20}[config%2]*time.Millisecond
	if config < 12 {
		n, each = max(1, int(config%4)), [4]time.Duration{10, 20, 40, 60}[config%4]*time.Millisecond
	}
	voiced := func(frame []byte) bool { return len(frame) > 0 && frame[0]>>(8-n) != 0 }
	switch body := p[1:]; p[0] & 3 {
	case 0:
		return voiced(body), each, len(body) > 0
	case 1: // two frames of the same size
		half := len(body) / 2
		return voiced(body[:half]) || voiced(body[half:]), 2 * each, half > 0
	case 2: // two frames, the first's size in one or two bytes
		size, hdr := int(body[0]), 1
		if size >= 252 {
			if len(body) < 2 {
				return false, 0, false
			}
			size, hdr = size+4*int(body[1]), 2
		}
		if hdr+size > len(body) {
			return false, 0, false
		}
		return voiced(body[hdr:hdr+size]) || voiced(body[hdr+size:]), 2 * each, true
	}
	return false, 0, false
}

// micWriter hands decoded audio to in, and silence for the stretches
// when the client sends nothing. LiveKit's clients publish microphones
// with Opus DTX: in silence (a muted track too) they send a packet every
// 400 ms. The stage hears time only through samples, so without them
// the silence that ends an utterance would come 20 ms every 400 ms.
// Once a client has said it is in DTX, the time it sends nothing is
// written as silence as it passes, until audio comes again: what was
// decoded and what was filled add up to the time that passed. It is not
// held back: the end of an utterance is timed from the silence as it
// arrives, so silence written late makes every answer late. (Waiting
// 200 ms before filling, as this did, cost 200 ms after each of the
// comfort-noise packets a client in DTX sends every 400 ms, and 0.3 s
// at the median from the end of speech to the first audio in the voice
// benchmark.) Only in DTX: packets late for any other reason (the
// network, or a bot too busy to read them in time) are speech on its
// way, and silence written in their place would cut an utterance in
// two. The timer runs only while the client is in DTX; a packet skipped
// for holding no voice (dtxWatch) is written as its own silence.
type micWriter struct {
	in  micInput
	dtx atomic.Bool // the last packet said the client is in DTX
	// unvoiced counts the packets without voice in a row; dtxWatch's own.
	unvoiced int

	mu      sync.Mutex
	covered time.Time   // the time up to which in has had audio
	timer   *time.Timer // set while the client is in DTX
	closed  bool
}

// micSilence is the silence written, a second at most at a time. It is
// never written to: a micInput copies what it keeps, as it must of the
// decoder's audio, whose buffer the decoder reuses.
var micSilence = make([]int16, voice.InputRate)

// samplesOf is how many of a microphone's samples last d.
func samplesOf(d time.Duration) int { return int(d * voice.InputRate / time.Second) }

// watch starts the timer for a client that went into DTX.
func (m *micWriter) watch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer == nil && !m.closed {
		m.timer = time.AfterFunc(max(0, time.Until(m.covered.Add(micFrame))), m.fill)
	}
}

func (m *micWriter) String() string  { return "microphone" }
func (m *micWriter) SampleRate() int { return voice.InputRate }

func (m *micWriter) WriteSample(s media.PCM16Sample) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.covered = time.Now()
	return m.in.Write(s)
}

// fill runs on the timer: it writes the time not covered as silence,
// in whole frames, and sets the timer for the next, until the client
// leaves DTX.
func (m *micWriter) fill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if !m.dtx.Load() {
		m.timer = nil
		return
	}
	now := time.Now()
	if frames := int(now.Sub(m.covered) / micFrame); frames > 0 {
		// Written under mu, so that it never lands between a packet's
		// audio and the next; in.Write does not block.
		for n := samplesOf(time.Duration(frames) * micFrame); n > 0; {
			k := min(n, len(micSilence))
			_ = m.in.Write(micSilence[:k])
			n -= k
		}
		m.covered = m.covered.Add(time.Duration(frames) * micFrame)
	}
	m.timer.Reset(m.covered.Add(micFrame).Sub(now))
}

func (m *micWriter) Close() error {
	m.mu.Lock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
	m.mu.Unlock()
	return m.in.Close()
}
