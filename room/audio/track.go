package audio

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"gopkg.in/hraban/opus.v2"
)

// Track sends an agent's voice as Opus in 20 ms frames on its own
// clock, through the libopus binding LiveKit's media layer uses. It
// differs from server-sdk-go's PCMLocalTrack in two things that matter at
// a hundred conversations (see the voice benchmark in the README):
//   - An agent is silent most of the time, and PCMLocalTrack encodes fifty
//     frames of silence a second for each (two thirds of the bot's CPU).
//     This track stops sending when its queue runs dry, as an Opus
//     encoder's DTX does: a few frames of silence to end the sound
//     cleanly, then one every 400 ms; the RTP timestamps jump over the gap
//     while sequence numbers stay continuous, which is how receivers tell
//     discontinuous transmission from loss.
//   - It encodes with Opus's CELT layer alone (libopus's restricted
//     low-delay mode) at 40 kbit/s and complexity 5, not with SILK or
//     the hybrid of both, which libopus picks for VoIP: 2.2 against 5.7
//     ms of CPU per second of speech at the complexity 3 this track used
//     before, and 16 at libwebrtc's defaults for a mono voice (VoIP,
//     complexity 9, 32 kbit/s). Encoding was a third of the bot's CPU
//     in a voice conversation. What reaches the listener is no further
//     from the synthesised speech, by log-spectral distance up to 8 kHz,
//     than libwebrtc's (6.6 against 6.7 dB, and 8.1 at the old setting;
//     BenchmarkVoiceEncode), and the speech is recognised on the far side
//     (TestVoiceTracksOverLiveKit). CELT's lower delay takes 4 ms off
//     every answer too. Complexity 5 is the least at which libopus's
//     CELT encoder keeps its pitch pre-filter: at 4 it costs a third less
//     and keeps the waveform 1.3 dB worse (segmental SNR). It spends as
//     many bytes on silence as on sound, which costs little here: the
//     track sends little silence, and while quiet it does not even wake
//     but for its DTX frames.
type Track struct {
	*webrtc.TrackLocalStaticRTP
	encoder *opus.Encoder
	rate    int
	frame   int // samples per 20 ms at rate
	// tap is handed each frame of sound as it is sent.
	tap atomic.Pointer[Tap]

	mu    sync.Mutex
	queue []int16
	// queued wakes a quiet track when samples come.
	queued chan struct{}

	start, stop sync.Once
	done        chan struct{}
	stopped     chan struct{}

	// Owned by run. due is when the next frame is to be sent.
	due       time.Time
	seq       uint16
	timestamp uint32
	silent    int  // frames since the queue ran dry
	skipped   int  // frames not sent since the last packet
	talking   bool // the last packet sent carried sound
}

const (
	voiceFrame = 20 * time.Millisecond
	// opusClock is Opus's RTP clock, whatever rate it encodes.
	opusClock = 48000
	// frameTicks is a frame's length on that clock.
	frameTicks = opusClock * uint32(voiceFrame/time.Millisecond) / 1000
	// trailingSilence is how many silent frames follow speech before the
	// track goes quiet, and dtxInterval how often it then sends one.
	trailingSilence = 5
	dtxInterval     = 20
	// maxPacket is more than a 20 ms Opus frame can take at any bitrate.
	maxPacket = 1500
)

// opusEncoding is how libopus encodes a track.
type opusEncoding struct {
	app        opus.Application
	complexity int // 0–10
	bitrate    int // bit/s; 0 leaves it to libopus
}

// trackEncoding is the agent's voice track's.
var trackEncoding = opusEncoding{app: opus.AppRestrictedLowdelay, complexity: 5, bitrate: 40000}

func (e opusEncoding) encoder(rate int) (*opus.Encoder, error) {
	enc, err := opus.NewEncoder(rate, 1, e.app)
	if err != nil {
		return nil, err
	}
	if err := enc.SetComplexity(e.complexity); err != nil {
		return nil, err
	}
	if e.bitrate > 0 {
		if err := enc.SetBitrate(e.bitrate); err != nil {
			return nil, err
		}
	}
	return enc, nil
}

// opusRates are the input rates libopus encodes.
var opusRates = []int{8000, 12000, 16000, 24000, 48000}

// TrackRate is the track rate for audio that mostly comes at rate: rate
// itself where Opus takes it, sparing a resampling step; else 48 kHz.
func TrackRate(rate int) int {
	if slices.Contains(opusRates, rate) {
		return rate
	}
	return opusClock
}

// NewTrack makes a track fed at rate, one of opusRates.
func NewTrack(rate int) (*Track, error) {
	track, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: opusClock, Channels: 2}, "voice", "alicia")
	if err != nil {
		return nil, err
	}
	enc, err := trackEncoding.encoder(rate)
	if err != nil {
		return nil, err
	}
	return &Track{TrackLocalStaticRTP: track, encoder: enc, rate: rate, frame: rate * int(voiceFrame/time.Millisecond) / 1000,
		queued: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{}),
		seq: uint16(rand.Uint32()), timestamp: rand.Uint32()}, nil
}

// Tap is handed each frame of sound a Track sends, at the track's rate,
// and when it was sent. It runs on the track's clock: it must return at
// once, and not keep the frame, which is reused.
type Tap func(frame []int16, rate int, at time.Time)

// Tap sets what is handed every frame of sound from now on: what the
// agent's voice sent, exactly, for the stage to tell its echo in a
// microphone. A frame not sent (the queue dry, or taken back by a pause)
// is not handed.
func (t *Track) Tap(f Tap) { t.tap.Store(&f) }

// Bind starts the clock when the track is first negotiated: before, there
// is nobody to send to.
func (t *Track) Bind(ctx webrtc.TrackLocalContext) (webrtc.RTPCodecParameters, error) {
	p, err := t.TrackLocalStaticRTP.Bind(ctx)
	if err == nil {
		t.start.Do(func() { go t.run() })
	}
	return p, err
}

// WriteSample queues samples at the track's rate.
func (t *Track) WriteSample(samples []int16) error {
	t.mu.Lock()
	t.queue = append(t.queue, samples...)
	t.mu.Unlock()
	select {
	case t.queued <- struct{}{}:
	default: // a wake-up is pending already
	}
	return nil
}

// Take removes what has not been sent yet and returns it: a pause holds
// it, a barge-in drops it.
func (t *Track) Take() []int16 {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queue
	t.queue = nil
	return q
}

// Keep drops what is queued beyond its first n samples.
func (t *Track) Keep(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) > n {
		t.queue = t.queue[:n]
	}
}

// Queued is how many samples have not been sent yet.
func (t *Track) Queued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue)
}

// Close stops the clock.
func (t *Track) Close() error {
	t.stop.Do(func() {
		close(t.done)
		t.start.Do(func() { close(t.stopped) }) // never started
	})
	<-t.stopped
	return nil
}

func (t *Track) run() {
	defer close(t.stopped)
	t.due = time.Now().Add(voiceFrame)
	timer := time.NewTimer(voiceFrame)
	defer timer.Stop()
	f := make([]int16, t.frame)
	buf := make([]byte, maxPacket)
	// asleep: the timer was set past frames that owed nothing.
	asleep := false
	for {
		select {
		case <-t.done:
			return
		case <-timer.C:
		case <-t.queued:
		}
		now := time.Now()
		if asleep {
			t.passQuiet(now, buf)
		}
		t.sendDue(now, f, buf)
		wake := t.wakeAt()
		asleep = wake.After(t.due)
		timer.Reset(wake.Sub(now))
	}
}

// wakeAt is when run must next wake, unless samples come first: for the
// next frame while the track has sound to send or silence to end it with;
// once quiet, for the next DTX frame. A quiet track woke fifty times a
// second to find nothing to send, and an agent is quiet most of the time.
func (t *Track) wakeAt() time.Time {
	if t.silent < trailingSilence || t.Queued() > 0 {
		return t.due
	}
	return t.due.Add(time.Duration(dtxInterval-1-t.silent%dtxInterval) * voiceFrame)
}

// passQuiet passes the frames due by now that run slept through: nothing
// was queued at their time, since samples wake it, so each is silence,
// skipped or sent as a DTX frame where one is owed. Samples that woke it
// go out in the next frame, as they did when it woke for every frame.
func (t *Track) passQuiet(now time.Time, buf []byte) {
	for ; !t.due.After(now); t.due = t.due.Add(voiceFrame) {
		if !t.owesSilence() || now.Sub(t.due) > maxCatchUp {
			t.skipped++
			continue
		}
		t.transmit(silence[:t.frame], buf, false)
	}
}

// maxCatchUp is the most a track sends at once to catch up. A longer
// stall is a gap (the process was stopped): its frames are skipped, and
// the RTP timestamps jump over them as over the silence a track leaves.
const maxCatchUp = 200 * time.Millisecond

// sendDue sends the frames due by now. A track whose goroutine ran late
// (a busy machine) sends the frames it owes at once, each stamped with
// its due time: their RTP timestamps are contiguous, so a client's
// jitter buffer plays them back to back, and the tap tells the echo
// reference they were sent back to back, as the client will play them.
// A ticker dropped those ticks instead: the track fell 20 ms behind for
// good, and the reference, seeing a frame 40 ms after the last, put 20
// ms of silence between two frames that the client played without one,
// so the echo came 20 ms sooner than the delay the suppressor had locked.
func (t *Track) sendDue(now time.Time, f []int16, buf []byte) {
	if late := now.Sub(t.due); late > maxCatchUp {
		n := int(late / voiceFrame)
		t.skipped += n
		t.due = t.due.Add(time.Duration(n) * voiceFrame)
	}
	for ; !t.due.After(now); t.due = t.due.Add(voiceFrame) {
		t.sendFrame(f, buf, t.due)
	}
}

// sendFrame sends the next frame, due at at, unless the track is quiet
// and owes no DTX frame.
func (t *Track) sendFrame(f []int16, buf []byte, at time.Time) {
	send, sound := t.next(f)
	if !send {
		t.skipped++
		return
	}
	if tap := t.tap.Load(); tap != nil && sound {
		(*tap)(f, t.rate, at)
	}
	t.transmit(f, buf, sound)
}

// transmit encodes a frame into buf and sends it as the next packet.
func (t *Track) transmit(f []int16, buf []byte, sound bool) {
	if n, err := t.encoder.Encode(f, buf); err == nil {
		_ = t.send(buf[:n], sound)
	}
}

// next fills f with the next frame to encode, padded with silence, and
// says whether one is to be sent and whether it carries sound.
func (t *Track) next(f []int16) (send, sound bool) {
	t.mu.Lock()
	n := copy(f, t.queue)
	clear(f[n:])
	t.queue = t.queue[n:]
	if len(t.queue) == 0 {
		t.queue = nil // lets go of a whole answer's audio
	}
	t.mu.Unlock()
	if n > 0 {
		t.silent = 0
		return true, true
	}
	return t.owesSilence(), false
}

// owesSilence counts a frame with nothing to send, and says whether it is
// sent all the same: to end the sound, or as a DTX frame.
func (t *Track) owesSilence() bool {
	t.silent++
	return t.silent <= trailingSilence || t.silent%dtxInterval == 0
}

// send sends one encoded frame as one RTP packet.
func (t *Track) send(frame []byte, sound bool) error {
	// The first packet of sound after silence starts a talkspurt
	// (RFC 3551 §4.1).
	marker := sound && !t.talking
	t.talking = sound
	t.timestamp += uint32(t.skipped) * frameTicks
	t.skipped = 0
	err := t.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, Marker: marker, SequenceNumber: t.seq, Timestamp: t.timestamp}, Payload: frame})
	t.seq++
	t.timestamp += frameTicks
	return err
}
