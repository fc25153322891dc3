package audio

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

const maxRecording = 12 * time.Second

// squareWave is n samples of a 600 Hz square wave at 48 kHz.
func squareWave(n int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(6000 * ((i/40)%2*2 - 1))
	}
	return out
}

func writtenWebM(t testing.TB, pcm []int16) []byte {
	t.Helper()
	file, err := speechtest.WebM(pcm, 48000)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// A file cut anywhere after its first block decodes to what the whole
// file decodes to, up to the last whole block before the cut; a file
// that ends where an element ends is not cut short.
func wantCutsDecodeToPrefixes(t *testing.T, file []byte, step int) {
	t.Helper()
	whole, err := DecodeWebMOpus(file, micRate, maxRecording)
	if err != nil {
		t.Fatal(err)
	}
	cuts := 0
	for end := len(file) - 1; end > 0; end -= step {
		got, err := DecodeWebMOpus(file[:end], micRate, maxRecording)
		if err != nil {
			continue // before the first whole block
		}
		cuts++
		if len(got.PCM) > len(whole.PCM) || !slices.Equal(got.PCM, whole.PCM[:len(got.PCM)]) {
			t.Fatalf("cut at %d of %d: %d samples that are not the first of the whole file's %d", end, len(file), len(got.PCM), len(whole.PCM))
		}
		if !got.CutShort && len(got.PCM) == len(whole.PCM) && !whole.CutShort {
			t.Fatalf("cut at %d of %d inside its last block, not said to be cut short", end, len(file))
		}
	}
	if cuts < len(file)/step/2 {
		t.Fatalf("only %d of %d cuts decoded", cuts, len(file)/step)
	}
}

// A recording made by Chromium's MediaRecorder and sent by livekit-client
// 2.23.0 as its pre-connect buffer (captured by TestPreconnectFromChromium
// from a fake microphone playing "How far is the moon?"): segment and
// clusters of unknown size, 60 ms packets, and cut short of the
// recorder's last chunk, here a byte into the next cluster's id.
func TestDecodeChromiumRecording(t *testing.T) {
	file, err := os.ReadFile("testdata/chromium-cut.webm")
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeWebMOpus(file, micRate, maxRecording)
	if err != nil {
		t.Fatal(err)
	}
	seconds := float64(len(got.PCM)) / micRate
	t.Logf("%.2f s, cut short %v", seconds, got.CutShort)
	if !got.CutShort || seconds < 1.8 || seconds > 2.1 {
		t.Fatalf("%.2f s, cut short %v; want 1.92 s, cut short", seconds, got.CutShort)
	}
	// The question is in it: loud in the middle, where espeak-ng speaks.
	if rms := speechtest.RMS(got.PCM[micRate/2 : micRate]); rms < 300 {
		t.Fatalf("RMS %.0f where the question is", rms)
	}
	wantCutsDecodeToPrefixes(t, file, 97)
}

// LiveKit's own writer's files, whole or cut anywhere.
func TestDecodeWrittenWebM(t *testing.T) {
	file := writtenWebM(t, squareWave(48000))
	got, err := DecodeWebMOpus(file, micRate, maxRecording)
	if err != nil || got.CutShort || len(got.PCM) != micRate {
		t.Fatalf("%d samples, cut short %v, %v; want %d whole", len(got.PCM), got.CutShort, err, micRate)
	}
	wantCutsDecodeToPrefixes(t, file, 13)
}

// What is not a WebM/Opus recording the clients make is refused, and no
// size it claims is allocated.
func TestDecodeWebMRefuses(t *testing.T) {
	file := writtenWebM(t, squareWave(9600))
	long := writtenWebM(t, squareWave(48000*2))
	for _, c := range []struct {
		name  string
		data  []byte
		limit time.Duration
	}{
		{"not WebM", []byte("not a WebM file"), maxRecording},
		{"PCM", make([]byte, 3200), maxRecording},
		{"cut before any block", file[:60], maxRecording},
		{"longer than the limit", long, time.Second},
		// An empty EBML header, a segment and a cluster of unknown size,
		// and a block that claims a terabyte.
		{"a block claiming 1 TiB", []byte{0x1A, 0x45, 0xDF, 0xA3, 0x80,
			0x18, 0x53, 0x80, 0x67, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
			0x1F, 0x43, 0xB6, 0x75, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
			0xA3, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x81, 0x00, 0x00, 0x80, 1, 2, 3}, maxRecording},
	} {
		if got, err := DecodeWebMOpus(c.data, micRate, c.limit); err == nil {
			t.Errorf("%s: accepted, %d samples", c.name, len(got.PCM))
		}
	}
}

// FuzzDecodeWebMOpus: no file makes the WebM reader panic or allocate
// what it claims.
func FuzzDecodeWebMOpus(f *testing.F) {
	file := writtenWebM(f, squareWave(9600))
	f.Add(file)
	f.Add(file[:len(file)/2])
	if chromium, err := os.ReadFile("testdata/chromium-cut.webm"); err == nil {
		f.Add(chromium[:4096])
	}
	f.Add([]byte{0x1A, 0x45, 0xDF, 0xA3, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		_, _ = DecodeWebMOpus(data, micRate, maxRecording)
	})
}
