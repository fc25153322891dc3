package speechtest

import (
	"fmt"

	"gopkg.in/hraban/opus.v2"
)

// Opus encodes mono pcm as the 20 ms Opus frames a WebRTC client sends,
// with libopus's settings for voice. With dtx, as LiveKit's clients
// publish a microphone, the encoder goes quiet in silence: it gives
// packets of a byte or two then, of which the client sends only the first
// of a run, and a comfort-noise update every 400 ms or so; the 20 ms
// frames not sent are nil.
func Opus(pcm []int16, sampleRate int, dtx bool) ([][]byte, error) {
	enc, err := opus.NewEncoder(sampleRate, 1, opus.AppVoIP)
	if err != nil {
		return nil, err
	}
	if err := enc.SetDTX(dtx); err != nil {
		return nil, err
	}
	n := sampleRate / 50
	var out [][]byte
	inDTX := false
	for i := 0; i+n <= len(pcm); i += n {
		buf := make([]byte, 1500)
		size, err := enc.Encode(pcm[i:i+n], buf)
		if err != nil {
			return nil, fmt.Errorf("opus: %w", err)
		}
		quiet := dtx && size <= 2
		if quiet && inDTX {
			out = append(out, nil)
			continue
		}
		inDTX = quiet
		out = append(out, buf[:size:size])
	}
	return out, nil
}
