package audio_test

import (
	"testing"
	"time"

	"github.com/livekit/media-sdk"
	"github.com/livekit/media-sdk/opus"
	protoLogger "github.com/livekit/protocol/logger"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/room/audio"
)

// micRate is the rate the voice stage hears microphones at.
const micRate = 16000

type countingSink struct{ n int }

func (c *countingSink) String() string                        { return "count" }
func (c *countingSink) SampleRate() int                       { return micRate }
func (c *countingSink) WriteSample(s media.PCM16Sample) error { c.n += len(s); return nil }
func (c *countingSink) Close() error                          { return nil }
func (c *countingSink) Write(s []int16) error                 { c.n += len(s); return nil }

// BenchmarkMicCPU: the CPU the media layer of the voice path costs the
// bot per second of audio: for each user's microphone, Opus decoding with
// libopus at 16 kHz (native-16k, what the bot does), against decoding at
// 48 kHz and resampling to 16 kHz with soxr (48k-resampled, what the
// SDK's PCMRemoteTrack does). The bot's own voice is BenchmarkVoiceEncode's.
func BenchmarkMicCPU(b *testing.B) {
	speech := speechtest.Render(b, "What is the weather like in Paris today?", 140, 48000)
	length := time.Duration(len(speech)) * time.Second / 48000
	packets, err := speechtest.Opus(speech, 48000, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		decoder func(*countingSink) (opus.Writer, error)
	}{
		{"native-16k", func(s *countingSink) (opus.Writer, error) { return audio.NewMicDecoder(s, micRate) }},
		{"48k-resampled", func(s *countingSink) (opus.Writer, error) {
			return opus.Decode(media.ResampleWriter(s, 48000), 1, protoLogger.GetLogger())
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			sink := &countingSink{}
			dec, err := c.decoder(sink)
			if err != nil {
				b.Fatal(err)
			}
			start := audio.ProcessCPU()
			for b.Loop() {
				for _, p := range packets {
					if err := dec.WriteSample(p); err != nil {
						b.Fatal(err)
					}
				}
			}
			used := audio.ProcessCPU() - start
			// Stops its DTX timer, were one running.
			_ = dec.Close()
			b.ReportMetric(float64(used.Microseconds())/(float64(b.N)*length.Seconds()), "µs-CPU-decode/audio-s")
			// The resampler holds a frame back.
			if want := b.N * len(packets) * micRate / 50; sink.n < want-micRate/50 || sink.n > want {
				b.Fatalf("decoded %d samples of %d packets, want %d at %d Hz", sink.n, b.N*len(packets), want, micRate)
			}
		})
	}
}
