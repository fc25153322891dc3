package speechtest

import (
	"bytes"
	"io"
	"time"

	mediaopus "github.com/livekit/media-sdk/opus"
)

// WebM encodes mono pcm as LiveKit's Go WebM writer does: Opus in 20 ms
// frames, in a file whose segment and clusters have unknown sizes, as a
// MediaRecorder writes them.
func WebM(pcm []int16, sampleRate int) ([]byte, error) {
	frames, err := Opus(pcm, sampleRate, false)
	if err != nil {
		return nil, err
	}
	var file bytes.Buffer
	w := mediaopus.NewWebmWriter(nopCloser{&file}, sampleRate, 1, 20*time.Millisecond)
	for _, f := range frames {
		if err := w.WriteSample(mediaopus.Sample(f)); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return file.Bytes(), nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
