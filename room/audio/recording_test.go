package audio

import (
	"encoding/binary"
	"errors"
	"testing"
)

// Recordings are told by their mime type: WebM/Opus from Chrome and
// Firefox, raw PCM from the native SDKs; Safari's MP4 is refused as such.
func TestFormatOf(t *testing.T) {
	for m, want := range map[string]Format{
		"audio/pcm": PCM, "application/octet-stream": PCM, "": PCM,
		"audio/webm;codecs=opus": WebMOpus, "audio/webm": WebMOpus, "audio/opus": WebMOpus,
	} {
		if got, err := FormatOf(m); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", m, got, err, want)
		}
	}
	for _, m := range []string{"video/mp4", "audio/mp4;codecs=mp4a.40.2"} {
		if _, err := FormatOf(m); !errors.Is(err, ErrAAC) {
			t.Errorf("%q: %v, want ErrAAC", m, err)
		}
	}
	for _, m := range []string{"text/plain", "audio/pcm;;"} {
		if _, err := FormatOf(m); err == nil || errors.Is(err, ErrAAC) {
			t.Errorf("%q: %v", m, err)
		}
	}
}

// Interleaved PCM is mixed down and resampled.
func TestDecodePCM(t *testing.T) {
	// Stereo at 48 kHz, one second: one channel loud, one silent.
	stereo := make([]byte, 4*48000)
	for i := range 48000 {
		binary.LittleEndian.PutUint16(stereo[4*i:], uint16(int16(8000)))
	}
	got, err := DecodePCM(stereo, 48000, 2, micRate)
	if err != nil || len(got) < 15900 || len(got) > 16100 || got[8000] < 3900 || got[8000] > 4100 {
		t.Fatalf("%d samples, middle %d, %v", len(got), got[len(got)/2], err)
	}
	if _, err := DecodePCM(stereo[:3], 48000, 2, micRate); err == nil {
		t.Fatal("less than a frame accepted")
	}
}
