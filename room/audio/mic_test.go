package audio

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/livekit/media-sdk/opus"
	"github.com/pion/rtp"
	hopus "gopkg.in/hraban/opus.v2"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

// micRate is the rate the tests decode microphones at, the voice
// stage's.
const micRate = 16000

// countingInput counts the samples a microphone hands on, and the
// writes of decoded audio among them: decoded noise is never all zeros,
// silence filled in is.
type countingInput struct {
	mu               sync.Mutex
	samples, decoded int
}

func (c *countingInput) Write(s []int16) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples += len(s)
	if slices.ContainsFunc(s, func(v int16) bool { return v != 0 }) {
		c.decoded++
	}
	return nil
}

func (c *countingInput) Close() error { return nil }

func (c *countingInput) count() (samples, decoded int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples, c.decoded
}

// A client in DTX is heard as silence at once, not after a wait, and
// again after each comfort-noise packet it sends every 400 ms: the end of
// an utterance is timed by that silence, so any wait makes every answer
// late. The time not covered is set back by hand and filled by a direct
// call, so the test does not wait on the clock.
func TestMicInDTXIsSilenceAtOnce(t *testing.T) {
	in := &countingInput{}
	dec := micDecoder(t, in)
	w := dec.mic
	frames, err := speechtest.Opus(append(speechtest.Render(t, "stop", 140, 48000), speechtest.Silence(600, 48000)...), 48000, true)
	if err != nil {
		t.Fatal(err)
	}
	// The last frame of sound, and the first of DTX after it.
	var sound, dtx opus.Sample
	for _, f := range frames {
		if len(f) > 2 {
			sound = f
		} else if f != nil {
			dtx = f
			break
		}
	}
	if sound == nil || dtx == nil {
		t.Fatal("the encoder never went into DTX")
	}
	const behind = 100 * time.Millisecond
	want := w.samplesOf(behind / micFrame * micFrame) // whole frames
	for _, step := range []struct {
		name    string
		packets []opus.Sample
	}{
		{"after speech", []opus.Sample{sound, dtx}},
		{"after a comfort-noise update", []opus.Sample{sound, dtx}}, // a full frame, as speech is
	} {
		for _, p := range step.packets {
			if err := dec.WriteSample(p); err != nil {
				t.Fatal(err)
			}
		}
		// Counted first: the microphone's own timer may fill the time too.
		before, _ := in.count()
		w.mu.Lock()
		w.covered = time.Now().Add(-behind)
		w.mu.Unlock()
		w.fill()
		after, _ := in.count()
		if got := after - before; got < want {
			t.Errorf("%s: %d samples of silence for the %v a client in DTX sent nothing, want %d", step.name, got, behind, want)
		}
	}
}

// A client without DTX sends a room's noise fifty times a second. Once
// its encoder has marked 200 ms of packets as holding no voice, the rest
// are not decoded, each heard as its length of silence; every packet that
// carries speech is decoded, including the first. With CELT alone, whose
// packets say nothing of voice, everything is decoded.
func TestMicSkipsPacketsWithoutVoice(t *testing.T) {
	const rate, lead, trail = 48000, 50, 50 // packets of noise before and after
	frame := rate / 50
	speech := speechtest.Render(t, "How far is the moon?", 140, rate)
	pcm := slices.Concat(speechtest.Noise(lead*20, rate, 1), speech, speechtest.Noise(trail*20, rate, 2))
	// The room's noise under the speech too, so that every decoded frame
	// is told from a filled one.
	for i, v := range speechtest.Noise(len(speech)*1000/rate, rate, 3) {
		pcm[lead*frame+i] += v
	}
	// Which 20 ms frames of the source carry speech: louder than -40 dBFS,
	// 10 dB above the noise, whatever the encoder thinks of them.
	loud := func(i int) bool { return speechtest.RMS(pcm[i*frame:(i+1)*frame]) > 328 }

	for _, c := range []struct {
		name string
		enc  opusEncoding
		skip bool
	}{
		{"SILK", opusEncoding{app: hopus.AppVoIP}, true},
		{"CELT", opusEncoding{app: hopus.AppRestrictedLowdelay, bitrate: 24000}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc, err := c.enc.encoder(rate)
			if err != nil {
				t.Fatal(err)
			}
			in := &countingInput{}
			dec := micDecoder(t, in)
			// feed encodes a frame and hands it on: the samples written
			// for it, and whether it was decoded.
			buf := make([]byte, maxPacket)
			feed := func(pcm []int16) (samples int, decoded bool) {
				n, err := enc.Encode(pcm, buf)
				if err != nil {
					t.Fatal(err)
				}
				samplesBefore, before := in.count()
				if err := dec.WriteSample(slices.Clone(buf[:n])); err != nil {
					t.Fatal(err)
				}
				samplesAfter, after := in.count()
				return samplesAfter - samplesBefore, after > before
			}
			var leading, trailing, speechSkipped, loudFrames int
			for i := 0; (i+1)*frame <= len(pcm); i++ {
				_, decoded := feed(pcm[i*frame : (i+1)*frame])
				switch {
				case i < lead:
					leading += b2i(decoded)
				case (i+1)*frame > len(pcm)-trail*frame:
					trailing += b2i(decoded)
				case loud(i):
					loudFrames++
					speechSkipped += b2i(!decoded)
				}
			}
			t.Logf("noise decoded: %d of %d packets before the speech, %d of %d after; %d of %d loud packets skipped", leading, lead, trailing, trail, speechSkipped, loudFrames)
			if loudFrames == 0 || speechSkipped > 0 {
				t.Fatalf("%d of %d packets carrying speech were not decoded", speechSkipped, loudFrames)
			}
			if !c.skip {
				if leading+trailing != lead+trail {
					t.Fatalf("%d of %d packets of noise decoded, want all", leading+trailing, lead+trail)
				}
				return
			}
			// The encoder takes a few packets to learn the noise, then
			// the hangover; after that nothing is decoded.
			if leading > 2*dtxHangover || trailing > 2*dtxHangover+10 {
				t.Fatalf("noise decoded: %d of %d packets before the speech, %d of %d after", leading, lead, trailing, trail)
			}
			// A skipped packet is heard as silence of its length at
			// once, as decoded audio is, not on a timer.
			if samples, decoded := feed(speechtest.Noise(20, rate, 4)); decoded || samples != micRate/50 {
				t.Fatalf("a packet of noise after the noise: decoded %v, %d samples; want %d of silence", decoded, samples, micRate/50)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The voice-activity flags are read wherever a packet's layout puts the
// frames: one frame, two of a size, two of coded sizes; a 60 ms SILK
// frame has three flags; CELT alone and code 3 packets are not read.
// The packet's length is what a skipped packet is heard as, in silence.
func TestVoiceActivityFlags(t *testing.T) {
	const silk10, silk20, silk60, hybrid10, hybrid20, celt20 = 8 << 3, 9 << 3, 11 << 3, 12 << 3, 13 << 3, 31 << 3
	for _, c := range []struct {
		name   string
		packet []byte
		active bool
		ms     int // the packet's length
		ok     bool
	}{
		{"one frame, voice", []byte{silk20, 0x80, 0x11}, true, 20, true},
		{"one frame, none", []byte{silk20, 0x7f, 0x11}, false, 20, true},
		{"hybrid, voice", []byte{hybrid20, 0x80}, true, 20, true},
		{"10 ms, none", []byte{silk10, 0x7f}, false, 10, true},
		{"hybrid 10 ms, none", []byte{hybrid10, 0x7f}, false, 10, true},
		{"60 ms, voice in the third", []byte{silk60, 0x20}, true, 60, true},
		{"60 ms, none in three", []byte{silk60, 0x1f}, false, 60, true},
		{"two of a size, voice in the second", []byte{silk20 | 1, 0x00, 0x01, 0x80, 0x01}, true, 40, true},
		{"two of a size, none", []byte{silk20 | 1, 0x00, 0x01, 0x7f, 0x01}, false, 40, true},
		{"two coded, voice in the second", []byte{silk20 | 2, 2, 0x00, 0x01, 0x80}, true, 40, true},
		{"two coded, none", []byte{silk20 | 2, 2, 0x00, 0x01, 0x40}, false, 40, true},
		{"two coded, cut short", []byte{silk20 | 2, 9, 0x00}, false, 0, false},
		{"code 3", []byte{silk20 | 3, 0x02, 0x80, 0x80}, false, 0, false},
		{"CELT alone", []byte{celt20, 0x80}, false, 0, false},
		{"no frame", []byte{silk20}, false, 0, false},
	} {
		active, length, ok := voiceActivity(c.packet)
		if active != c.active || ok != c.ok || length != time.Duration(c.ms)*time.Millisecond {
			t.Errorf("%s: voice %v in %v (read %v), want %v in %d ms (%v)", c.name, active, length, ok, c.active, c.ms, c.ok)
		}
	}
}

// micDecoder is NewMicDecoder at micRate for in, closed when the test
// ends.
func micDecoder(t *testing.T, in Input) *MicDecoder {
	t.Helper()
	dec, err := NewMicDecoder(in, micRate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dec.Close() })
	return dec
}

// recordingInput keeps what a microphone hands on.
type recordingInput struct{ pcm []int16 }

func (r *recordingInput) Write(s []int16) error { r.pcm = append(r.pcm, s...); return nil }
func (r *recordingInput) Close() error          { return nil }

// A stereo microphone (a browser's raw capture often is one, and
// LiveKit's clients send it as stereo Opus) is heard as the mix of its
// channels at their own level, however loud: a tone at -1 dBFS in both
// channels comes out as that tone, not with every sample over half
// scale wrapped around to the other sign.
func TestStereoMicrophoneIsMixedDown(t *testing.T) {
	const rate, hz, amp = 48000, 440, 29000
	enc, err := hopus.NewEncoder(rate, 2, hopus.AppVoIP)
	if err != nil {
		t.Fatal(err)
	}
	in := &recordingInput{}
	dec := micDecoder(t, in)
	frame := make([]int16, 2*rate/50)
	buf := make([]byte, maxPacket)
	for i := 0; i < 50; i++ {
		for j := range rate / 50 {
			v := int16(amp * math.Sin(2*math.Pi*hz*float64(i*rate/50+j)/rate))
			frame[2*j], frame[2*j+1] = v, v
		}
		n, err := enc.Encode(frame, buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := dec.WriteSample(slices.Clone(buf[:n])); err != nil {
			t.Fatal(err)
		}
	}
	// The codec's first frames ramp up; from then on a 440 Hz tone at 16
	// kHz moves at most 2π·440/16000 of its amplitude (5,000) a sample.
	out := in.pcm[micRate/5:]
	var jumps int
	for i := 1; i < len(out); i++ {
		if math.Abs(float64(out[i])-float64(out[i-1])) > 8000 {
			jumps++
		}
	}
	level := 20 * math.Log10(speechtest.RMS(out)/(amp/math.Sqrt2))
	if jumps > 0 || math.Abs(level) > 1 {
		t.Fatalf("%d samples jumped by over 8000; the tone came out at %+.1f dB of its level", jumps, level)
	}
}

// A few corrupt packets are passed over, as if lost; a microphone that
// sends nothing else is given up on with libopus's error.
func TestMicPassesOverCorruptPackets(t *testing.T) {
	enc, err := hopus.NewEncoder(48000, 1, hopus.AppVoIP)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, maxPacket)
	n, err := enc.Encode(speechtest.Noise(20, 48000, 1), buf)
	if err != nil {
		t.Fatal(err)
	}
	good, corrupt := opus.Sample(buf[:n]), opus.Sample{0x0b, 0, 0} // code 3 with no frames
	in := &recordingInput{}
	dec := micDecoder(t, in)
	for i := range maxInvalid {
		if err := dec.WriteSample(corrupt); err != nil {
			t.Fatalf("corrupt packet %d: %v", i+1, err)
		}
	}
	if err := dec.WriteSample(good); err != nil || len(in.pcm) != micRate/50 {
		t.Fatalf("a good packet after corrupt ones: %v, %d samples", err, len(in.pcm))
	}
	for range maxInvalid {
		_ = dec.WriteSample(corrupt)
	}
	if err := dec.WriteSample(corrupt); !errors.Is(err, hopus.ErrInvalidPacket) {
		t.Fatalf("after %d corrupt packets in a row: %v, want libopus's invalid packet", maxInvalid+1, err)
	}
}

// Packets lost on the way are heard as libopus conceals them, the last
// of a run from the next packet's forward error correction, as a
// browser sends it: the microphone's audio keeps the length of what was
// sent (the echo suppressor dates the audio by it), and the lost speech
// is not a hole. A break longer than maxConcealed is left as it is.
func TestLostPacketsAreConcealed(t *testing.T) {
	const rate = 48000
	speech := speechtest.Render(t, "How far is the moon from the earth?", 140, rate)
	packets, err := speechtest.OpusWithFEC(slices.Concat(speechtest.Noise(200, rate, 1), speech, speechtest.Noise(1500, rate, 2)), rate, 10)
	if err != nil {
		t.Fatal(err)
	}
	// heard decodes the packets numbered order, from just before the
	// sequence numbers wrap.
	heard := func(order []int) []int16 {
		in := &recordingInput{}
		dec := micDecoder(t, in)
		for _, i := range order {
			h := &rtp.Header{SequenceNumber: uint16(65530 + i), Timestamp: uint32(1000 + 960*i)}
			if err := dec.HandleRTP(h, packets[i]); err != nil {
				t.Fatal(err)
			}
		}
		return in.pcm
	}
	// hear decodes the packets but the lost ones.
	hear := func(lost func(i int) bool) []int16 {
		var order []int
		for i := range packets {
			if !lost(i) {
				order = append(order, i)
			}
		}
		return heard(order)
	}
	all := hear(func(int) bool { return false })
	frame := micRate / 50
	// Where the speech is loud: lost there, a hole is heard.
	loud := func(i int) bool { return speechtest.RMS(all[i*frame:(i+1)*frame]) > 1000 }
	var one, three int
	for i := 15; i < len(packets)-80; i++ {
		if one == 0 && loud(i) {
			one = i
		} else if one != 0 && i > one+10 && loud(i) && loud(i+1) && loud(i+2) {
			three = i
			break
		}
	}
	if one == 0 || three == 0 {
		t.Fatal("the speech has no loud stretch to lose")
	}
	lossy := hear(func(i int) bool { return i == one || (i >= three && i < three+3) })
	if len(lossy) != len(all) {
		t.Fatalf("with 4 packets lost the microphone gave %d samples, without %d", len(lossy), len(all))
	}
	for _, run := range [][2]int{{one, 1}, {three, 3}} {
		got, want := lossy[run[0]*frame:(run[0]+run[1])*frame], all[run[0]*frame:(run[0]+run[1])*frame]
		level := 20 * math.Log10(speechtest.RMS(got)/speechtest.RMS(want))
		var xy, xx, yy float64
		for i := range got {
			xy += float64(got[i]) * float64(want[i])
			xx += float64(got[i]) * float64(got[i])
			yy += float64(want[i]) * float64(want[i])
		}
		// Concealed by libopus alone (tried), one packet came out 11 dB
		// under the speech lost and uncorrelated with it (0.00), three
		// 31 dB under (0.01); with the next packet's FEC, 0.98 and 0.69.
		corr := xy / math.Sqrt(xx*yy+1)
		t.Logf("%d lost at packet %d: concealed at %+.1f dB of the speech lost, correlated at %.2f", run[1], run[0], level, corr)
		if corr < 0.5 {
			t.Errorf("%d packets lost at %d were concealed at %.1f dB of the speech they held, correlated with it at %.2f", run[1], run[0], level, corr)
		}
	}
	// A packet from before the last one, come again late, is passed over:
	// its time is heard already.
	var order []int
	for i := range packets {
		order = append(order, i)
		if i == 30 {
			order = append(order, 28)
		}
	}
	if stale := heard(order); len(stale) != len(all) {
		t.Errorf("with a stale packet among them the microphone gave %d samples, without %d", len(stale), len(all))
	}
	// A break longer than maxConcealed, as of a track muted and unmuted.
	gap := int(maxConcealed/(20*time.Millisecond)) + 10
	broken := hear(func(i int) bool { return i >= 20 && i < 20+gap })
	if want := len(all) - gap*frame; len(broken) != want {
		t.Errorf("after a break of %d packets the microphone gave %d samples, want %d", gap, len(broken), want)
	}
}
