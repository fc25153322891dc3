package audio

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	"github.com/pion/rtp"
	hopus "gopkg.in/hraban/opus.v2"
)

// Input receives a microphone's audio. Write copies what it keeps: the
// samples are reused once it returns.
type Input interface {
	Write(samples []int16) error
	Close() error
}

// NewMicDecoder decodes a microphone's Opus packets into in at rate mono
// (libopus decodes at that rate itself), with silence for the time a
// client in DTX sends nothing (micWriter) and concealment for packets
// lost on the way (HandleRTP).
func NewMicDecoder(in Input, rate int) (*MicDecoder, error) {
	w := &micWriter{in: in, rate: rate, covered: time.Now()}
	dec, err := hopus.NewDecoder(rate, 1)
	if err != nil {
		return nil, err
	}
	pcm := make([]int16, rate*int(maxOpusPacket/time.Millisecond)/1000)
	return &MicDecoder{dtxWatch: dtxWatch{monoDecoder: &monoDecoder{dec: dec, pcm: pcm, w: w}, mic: w}}, nil
}

// MicDecoder decodes a microphone: its RTP packets (HandleRTP), or their
// Opus payloads alone (WriteSample). Close it to close its Input.
type MicDecoder struct {
	dtxWatch
	// seq and ts are the last packet's, once got; frame is how many RTP
	// ticks a packet lasts, as the last two in a row told (0 while none
	// did).
	seq   uint16
	ts    uint32
	frame uint32
	got   bool
}

// maxConcealed is the longest loss concealed: a longer one is a break in
// the stream (a track muted and unmuted, a client that stalled), not
// packets lost.
const maxConcealed = time.Second

// HandleRTP decodes a packet, after the audio of the packets lost before
// it, if any: the Input then has as much audio as the client sent, as it
// does in DTX. Unfilled, a loss is a hole in a word for the recogniser,
// and leaves the microphone's audio short of the time that passed: the
// echo suppressor, which dates the audio by its samples, then judges the
// echo after it against the agent's audio of that much earlier until it
// catches up. A packet from before the last one is passed over: its time
// is heard already, as the loss it was.
func (d *MicDecoder) HandleRTP(h *rtp.Header, payload []byte) error {
	if d.got {
		switch lost, ticks := h.SequenceNumber-d.seq-1, h.Timestamp-d.ts; {
		case lost >= 1<<15:
			return nil
		case lost == 0:
			if !d.mic.dtx.Load() {
				d.frame = ticks
			}
		default:
			d.conceal(ticks, payload)
		}
	}
	d.seq, d.ts, d.got = h.SequenceNumber, h.Timestamp, true
	return d.WriteSample(payload)
}

// conceal writes the audio of the packets lost in the ticks from the
// last packet received to next, less the last packet's own: libopus's
// concealment, the last lost frame taken from next's forward error
// correction where the client sent it (LiveKit's clients do), or silence
// where the client's audio was not decoded (in DTX the time is filled
// already, and unvoiced packets are heard as silence).
func (d *MicDecoder) conceal(ticks uint32, next []byte) {
	if d.frame == 0 || d.mic.dtx.Load() {
		return
	}
	frame := time.Duration(d.frame) * time.Second / opusClock
	missing := time.Duration(ticks)*time.Second/opusClock - frame
	each := d.mic.samplesOf(frame)
	if missing > maxConcealed || each == 0 || each > len(d.pcm) {
		return
	}
	for n := int(missing / frame); n > 0; n-- {
		pcm := d.pcm[:each:each]
		var err error
		switch {
		case d.mic.unvoiced > dtxHangover:
			pcm = silence[:each]
		case n == 1:
			err = d.dec.DecodeFEC(next, pcm)
		default:
			err = d.dec.DecodePLC(pcm)
		}
		if err != nil {
			pcm = silence[:each]
		}
		_ = d.mic.WriteSample(pcm)
	}
}

// monoDecoder decodes a microphone's packets, mono or stereo, into mono.
// libopus mixes a stereo packet down itself. (LiveKit's media-sdk decodes
// a stereo packet as stereo and averages the channels in 16 bits, which
// wraps every sample over half scale around to the other sign: a loud
// voice on a stereo microphone, as a browser's raw capture of some
// devices is, came out as crackle, and the speakerphone test's echo with
// it.)
type monoDecoder struct {
	dec *hopus.Decoder
	pcm []int16
	w   media.PCM16Writer
	// invalid counts the packets in a row libopus refused.
	invalid int
}

// maxOpusPacket is the longest audio one Opus packet holds.
const maxOpusPacket = 120 * time.Millisecond

// maxInvalid is how many packets in a row libopus may refuse before the
// microphone is given up on: a few corrupt ones are passed over, as
// media-sdk's decoder does.
const maxInvalid = 5

func (d *monoDecoder) String() string  { return "Opus(mono) -> " + d.w.String() }
func (d *monoDecoder) SampleRate() int { return d.w.SampleRate() }
func (d *monoDecoder) Close() error    { return d.w.Close() }

func (d *monoDecoder) WriteSample(s opus.Sample) error {
	if len(s) == 0 {
		return nil
	}
	n, err := d.dec.Decode(s, d.pcm)
	if err != nil {
		if d.invalid++; errors.Is(err, hopus.ErrInvalidPacket) && d.invalid <= maxInvalid {
			return nil
		}
		return err
	}
	d.invalid = 0
	return d.w.WriteSample(d.pcm[:n])
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
	*monoDecoder
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
			return w.mic.WriteSample(silence[:min(len(silence), w.mic.samplesOf(length))])
		}
	} else {
		w.mic.unvoiced = 0
	}
	return w.monoDecoder.WriteSample(s)
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
	in   Input
	rate int
	dtx  atomic.Bool // the last packet said the client is in DTX
	// unvoiced counts the packets without voice in a row; dtxWatch's own.
	unvoiced int

	mu      sync.Mutex
	covered time.Time   // the time up to which in has had audio
	timer   *time.Timer // set while the client is in DTX
	closed  bool
}

// silence is what a microphone's silence is written from, a second at
// 16 kHz at most at a time, and a quiet track's DTX frames are encoded
// from (20 ms at 48 kHz at most). It is never written to: an Input copies
// what it keeps, as it must of the decoder's audio, whose buffer the
// decoder reuses.
var silence = make([]int16, 16000)

// samplesOf is how many of the microphone's samples last d.
func (m *micWriter) samplesOf(d time.Duration) int {
	return int(d * time.Duration(m.rate) / time.Second)
}

// watch starts the timer for a client that went into DTX.
func (m *micWriter) watch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer == nil && !m.closed {
		m.timer = time.AfterFunc(max(0, time.Until(m.covered.Add(micFrame))), m.fill)
	}
}

func (m *micWriter) String() string  { return "microphone" }
func (m *micWriter) SampleRate() int { return m.rate }

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
		for n := m.samplesOf(time.Duration(frames) * micFrame); n > 0; {
			k := min(n, len(silence))
			_ = m.in.Write(silence[:k])
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
