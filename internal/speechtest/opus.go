package speechtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"gopkg.in/hraban/opus.v2"
)

// Opus encodes mono pcm as the 20 ms Opus frames a WebRTC client sends,
// with libopus's settings for voice. With dtx, as LiveKit's clients
// publish a microphone, the encoder goes quiet in silence: it gives
// packets of a byte or two then, of which the client sends only the first
// of a run, and a comfort-noise update every 400 ms or so; the 20 ms
// frames not sent are nil.
func Opus(pcm []int16, sampleRate int, dtx bool) ([][]byte, error) {
	enc, err := NewEncoder(sampleRate, dtx)
	if err != nil {
		return nil, err
	}
	return enc.Packets(pcm)
}

// OpusWithFEC is Opus without DTX, and with forward error correction for
// a network that loses lossPercent of the packets, as browsers negotiate
// Opus.
func OpusWithFEC(pcm []int16, sampleRate, lossPercent int) ([][]byte, error) {
	enc, err := NewEncoder(sampleRate, false)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(enc.enc.SetInBandFEC(true), enc.enc.SetPacketLossPerc(lossPercent)); err != nil {
		return nil, err
	}
	return enc.Packets(pcm)
}

// Encoder is Opus for audio made as it is sent, a 20 ms frame at a time,
// as a client's microphone encodes.
type Encoder struct {
	enc        *opus.Encoder
	rate       int
	dtx, inDTX bool
	buf        [1500]byte
}

// NewEncoder is an encoder with Opus's settings for voice, and with dtx
// the client's way of not sending silence (see Opus).
func NewEncoder(sampleRate int, dtx bool) (*Encoder, error) {
	enc, err := opus.NewEncoder(sampleRate, 1, opus.AppVoIP)
	if err != nil {
		return nil, err
	}
	if err := enc.SetDTX(dtx); err != nil {
		return nil, err
	}
	return &Encoder{enc: enc, rate: sampleRate, dtx: dtx}, nil
}

// SetComplexity sets libopus's complexity, 0 to 10: what the encoder
// spends on quality.
func (e *Encoder) SetComplexity(c int) error { return e.enc.SetComplexity(c) }

// Packets encodes pcm 20 ms at a time, each packet its own copy; the
// frames not sent are nil.
func (e *Encoder) Packets(pcm []int16) ([][]byte, error) {
	n := e.rate / 50
	var out [][]byte
	for i := 0; i+n <= len(pcm); i += n {
		f, err := e.Encode(pcm[i : i+n])
		if err != nil {
			return nil, err
		}
		out = append(out, slices.Clip(slices.Clone(f)))
	}
	return out, nil
}

// Encode encodes a 20 ms frame. The packet is valid until the next call;
// nil is a frame not sent.
func (e *Encoder) Encode(frame []int16) ([]byte, error) {
	size, err := e.enc.Encode(frame, e.buf[:])
	if err != nil {
		return nil, fmt.Errorf("opus: %w", err)
	}
	quiet := e.dtx && size <= 2
	if quiet && e.inDTX {
		return nil, nil
	}
	e.inDTX = quiet
	return e.buf[:size], nil
}

// Coded is pcm as a client's microphone sends it and a server hears it:
// Opus-coded for voice, 20 ms at a time, and decoded.
func Coded(t testing.TB, pcm []int16, sampleRate int) []int16 {
	t.Helper()
	enc, err := NewEncoder(sampleRate, false)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := opus.NewDecoder(sampleRate, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := sampleRate / 50
	out := make([]int16, 0, len(pcm))
	frame := make([]int16, n)
	for i := 0; i < len(pcm); i += n {
		clear(frame)
		copy(frame, pcm[i:min(i+n, len(pcm))])
		p, err := enc.Encode(frame)
		got := 0
		if err == nil {
			got, err = dec.Decode(p, frame)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, frame[:got]...)
	}
	return out
}
