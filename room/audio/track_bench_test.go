package audio

import (
	"math"
	"math/cmplx"
	"testing"
	"time"

	"gopkg.in/hraban/opus.v2"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

// BenchmarkVoiceEncode: what the agent's voice track spends encoding a
// second of synthesised speech at 24 kHz in 20 ms frames, as it sends
// them, how far the decoded speech is from what was synthesised (the
// mean log-spectral distance up to 8 kHz, and the segmental SNR of the
// waveform, in dB) and how late it comes out of the decoder (the codec's
// delay): the track's encoding against the same at complexity 4, where
// libopus's CELT encoder drops its pitch pre-filter, libwebrtc's
// defaults for a mono voice and the track's earlier encoding.
func BenchmarkVoiceEncode(b *testing.B) {
	const rate = 24000
	pcm := speechtest.Render(b, "The tide rises twice a day, because the moon pulls the oceans toward it as the earth turns.", 160, rate)
	frame := rate / 50
	for _, c := range []struct {
		name string
		opusEncoding
	}{
		{"track", trackEncoding},
		{"complexity-4", opusEncoding{app: trackEncoding.app, complexity: 4, bitrate: trackEncoding.bitrate}},
		{"libwebrtc", opusEncoding{app: opus.AppVoIP, complexity: 9, bitrate: 32000}},
		{"earlier", opusEncoding{app: opus.AppVoIP, complexity: 3}},
	} {
		b.Run(c.name, func(b *testing.B) {
			enc, err := c.encoder(rate)
			if err != nil {
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
			decoded := roundTrip(b, c.opusEncoding, pcm, rate)
			distance, lag := spectralDistance(b, pcm, decoded, rate)
			b.ReportMetric(distance, "dB-LSD")
			b.ReportMetric(segmentalSNR(pcm, decoded[lag:], rate), "dB-segSNR")
			b.ReportMetric(float64(lag)*1000/rate, "ms-delay")
		})
	}
}

// pauseLevel is the mean square of a frame quieter than −50 dBFS: a
// pause, which neither measure of a codec counts.
const pauseLevel = 1e5

// segmentalSNR is the mean signal-to-noise ratio, in dB, of got against
// ref over their 20 ms frames with sound: how
// closely a codec keeps the waveform, where the spectral distance sees
// only the spectrum's shape.
func segmentalSNR(ref, got []int16, rate int) float64 {
	n := rate / 50
	total, frames := 0.0, 0
	for off := 0; off+n <= len(ref) && off+n <= len(got); off += n {
		var signal, noise float64
		for i := off; i < off+n; i++ {
			signal += float64(ref[i]) * float64(ref[i])
			d := float64(ref[i]) - float64(got[i])
			noise += d * d
		}
		if signal/float64(n) < pauseLevel {
			continue
		}
		total += 10 * math.Log10(signal/(noise+1))
		frames++
	}
	return total / float64(max(frames, 1))
}

// roundTrip encodes pcm with a fresh encoder and decodes it.
func roundTrip(b *testing.B, e opusEncoding, pcm []int16, rate int) []int16 {
	enc, err := e.encoder(rate)
	if err != nil {
		b.Fatal(err)
	}
	dec, err := opus.NewDecoder(rate, 1)
	if err != nil {
		b.Fatal(err)
	}
	frame := rate / 50
	buf := make([]byte, maxPacket)
	out := make([]int16, 0, len(pcm))
	for i := 0; i+frame <= len(pcm); i += frame {
		n, err := enc.Encode(pcm[i:i+frame], buf)
		if err != nil {
			b.Fatal(err)
		}
		d := make([]int16, frame)
		m, err := dec.Decode(buf[:n], d)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, d[:m]...)
	}
	return out
}

// spectralDistance is the mean log-spectral distance between ref and got,
// up to 8 kHz, over the 20 ms frames of ref that carry sound, once got is
// aligned to ref; lag is by how many samples the codec delayed it.
func spectralDistance(b *testing.B, ref, got []int16, rate int) (distance float64, lag int) {
	best := math.Inf(-1)
	for l := range rate / 20 { // Opus delays by far less than 50 ms
		s := 0.0
		for i := 0; i+l < len(got) && i < len(ref); i++ {
			s += float64(ref[i]) * float64(got[i+l])
		}
		if s > best {
			lag, best = l, s
		}
	}
	got = got[lag:]
	n := rate / 50
	bins := n * 8000 / rate
	window := make([]float64, n)
	for i := range window {
		window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n))
	}
	spectrum := func(x []int16) []float64 {
		p := make([]float64, bins)
		for k := 1; k < bins; k++ {
			var sum complex128
			for i, v := range x {
				sum += complex(window[i]*float64(v), 0) * cmplx.Rect(1, -2*math.Pi*float64(k*i)/float64(n))
			}
			p[k] = real(sum)*real(sum) + imag(sum)*imag(sum) + 1
		}
		return p
	}
	total, frames := 0.0, 0
	for off := 0; off+n <= len(ref) && off+n <= len(got); off += n {
		energy := 0.0
		for _, v := range ref[off : off+n] {
			energy += float64(v) * float64(v)
		}
		if energy/float64(n) < pauseLevel {
			continue
		}
		pr, pg := spectrum(ref[off:off+n]), spectrum(got[off:off+n])
		d := 0.0
		for k := 1; k < bins; k++ {
			x := 10 * math.Log10(pr[k]/pg[k])
			d += x * x
		}
		total += math.Sqrt(d / float64(bins-1))
		frames++
	}
	if frames == 0 {
		b.Fatal("no frame with sound")
	}
	return total / float64(frames), lag
}

// BenchmarkQuietTracks: what a voice track costs while the agent is
// silent, most of a conversation: the CPU of 25 tracks that went quiet
// after a frame of sound, per track and second, their DTX frames
// included.
func BenchmarkQuietTracks(b *testing.B) {
	const n, span = 25, 2 * time.Second
	var tracks []*Track
	for range n {
		tr, err := NewTrack(24000)
		if err != nil {
			b.Fatal(err)
		}
		_ = tr.WriteSample(make([]int16, tr.frame))
		tr.start.Do(func() { go tr.run() }) // as Bind starts it
		tracks = append(tracks, tr)
	}
	defer func() {
		for _, tr := range tracks {
			_ = tr.Close()
		}
	}()
	time.Sleep((1 + trailingSilence) * voiceFrame * 2) // until they are quiet
	var used time.Duration
	for b.Loop() {
		start := ProcessCPU()
		time.Sleep(span)
		used += ProcessCPU() - start
	}
	b.ReportMetric(float64(used.Microseconds())/(float64(b.N)*n*span.Seconds()), "µs-CPU/track-s")
}
