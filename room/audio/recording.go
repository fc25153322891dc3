package audio

import (
	"errors"
	"fmt"
	"mime"

	"github.com/livekit/media-sdk"
)

// Format is how a recording made before an agent joined is encoded.
type Format int

const (
	// PCM is raw 16-bit little-endian PCM, what LiveKit's native SDKs
	// record; its rate and channels come beside it.
	PCM Format = iota
	// WebMOpus is what a MediaRecorder makes in Chrome and Firefox.
	WebMOpus
)

// ErrAAC is a recording in MP4, which only Safari's MediaRecorder makes:
// its AAC is not decoded, for want of a maintained Go decoder.
var ErrAAC = errors.New("MP4/AAC recordings (Safari's) are not decoded")

// FormatOf tells a recording's format by its mime type. PCM comes as
// audio/pcm or with the byte streams' default type.
func FormatOf(mimeType string) (Format, error) {
	mt := ""
	if mimeType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(mimeType); err != nil {
			return 0, fmt.Errorf("mime type %q: %w", mimeType, err)
		}
	}
	switch mt {
	case "audio/webm", "audio/opus":
		return WebMOpus, nil
	case "", "audio/pcm", "application/octet-stream":
		return PCM, nil
	case "video/mp4", "audio/mp4":
		return 0, ErrAAC
	}
	return 0, fmt.Errorf("unsupported mime type %q", mimeType)
}

// DecodePCM mixes interleaved 16-bit little-endian PCM down to mono and
// resamples it from rate to outRate. A trailing partial frame is dropped.
func DecodePCM(data []byte, rate, channels, outRate int) ([]int16, error) {
	frames := len(data) / (2 * channels)
	if frames == 0 {
		return nil, errors.New("no audio")
	}
	mono := make([]int16, frames)
	for i := range mono {
		var sum int
		for c := range channels {
			o := 2 * (i*channels + c)
			sum += int(int16(uint16(data[o]) | uint16(data[o+1])<<8))
		}
		mono[i] = int16(sum / channels)
	}
	if rate == outRate {
		return mono, nil
	}
	var out media.PCM16Sample
	w := media.ResampleWriter(media.NewPCM16BufferWriter(&out, outRate), rate)
	err := w.WriteSample(mono)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("resampling %d Hz: %w", rate, err)
	}
	return out, nil
}
