package room

import (
	"fmt"
	"testing"

	"gopkg.in/hraban/opus.v2"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

// BenchmarkVoiceEncode: what the agent's voice track spends encoding a
// second of synthesised speech at 24 kHz, at libopus's usual complexity,
// at 5 and at the track's (voiceComplexity), in 20 ms frames as it sends
// them.
func BenchmarkVoiceEncode(b *testing.B) {
	const rate = 24000
	pcm := speechtest.Render(b, "The tide rises twice a day, because the moon pulls the oceans toward it as the earth turns.", 160, rate)
	frame := rate / 50
	for _, c := range []int{10, 5, voiceComplexity} {
		b.Run(fmt.Sprintf("complexity=%d", c), func(b *testing.B) {
			enc, err := opus.NewEncoder(rate, 1, opus.AppVoIP)
			if err != nil {
				b.Fatal(err)
			}
			if err := enc.SetComplexity(c); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, maxPacket)
			for b.Loop() {
				for i := 0; i+frame <= len(pcm); i += frame {
					if _, err := enc.Encode(pcm[i:i+frame], buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N)/(float64(len(pcm))/rate), "ms/audio-s")
		})
	}
}
