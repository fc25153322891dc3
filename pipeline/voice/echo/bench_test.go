package echo

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
)

// benchFrame is the microphone's 20 ms, what Process is handed at a time.
const benchFrame = Rate / 50

// BenchmarkSuppressor is the cost of one 20 ms frame of the microphone:
// while an echo of the agent is taken out of it (after its path was
// found), alone and over a quiet room's noise (whose quiet frames are
// analysed too, for the noise in each band), while the user talks over
// that echo the whole time (double talk: every hop the echo leaves
// unexplained is tried at the delays around the locked one too), while
// the agent talks and the microphone is silent (a headset, or a client's
// own echo canceller), and while the agent is silent. It reports the CPU
// a conversation spends on it per second of audio.
func BenchmarkSuppressor(b *testing.B) {
	agent := speechtest.Render(b, answer, 140, trackRate)
	echoed := speechtest.EchoPath{Delay: 300 * time.Millisecond, GainDB: -3}.Of(b, agent, trackRate)
	// The user, in another voice, as loud as the agent's echo; their
	// question again and again, from half a second in.
	var user []int16
	for q := speechtest.RenderAs(b, "en-us+f3", "How far is the moon, and how long would it take to fly there?", 140, Rate); len(user) < len(echoed); {
		user = append(user, q...)
	}
	talkedOver := speechtest.Mix(append([]int16(nil), echoed...), user[:len(echoed)-Rate/2], Rate/2, 0)
	for _, bc := range []struct {
		name  string
		agent []int16
		mic   []int16
	}{
		{"echo", agent, echoed},
		{"echo in a room's noise", agent, speechtest.Mix(append([]int16(nil), echoed...), speechtest.Noise(len(echoed)*1000/Rate+1, Rate, 3), 0, 0)},
		{"double talk", agent, talkedOver},
		{"silent microphone", agent, make([]int16, len(echoed))},
		{"agent silent", nil, echoed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ref := &Reference{}
			s := NewSuppressor(ref, Config{})
			// The call is recorded once, then replayed again and again,
			// each time later, as the track and the microphone would
			// bring it; a whole replay first, for the path to be found.
			type chunk struct {
				pcm  []int16
				at   time.Time
				sent []sentFrame
			}
			var chunks []chunk
			var due []sentFrame
			speechtest.Replay(bc.agent, trackRate, bc.mic, time.Time{}, func(frame []int16, rate int, at time.Time) {
				due = append(due, sentFrame{append([]int16(nil), frame...), at.Sub(time.Time{})})
			}, func(pcm []int16, at time.Time) {
				chunks = append(chunks, chunk{append([]int16(nil), pcm...), at, due})
				due = nil
			})
			span := chunks[len(chunks)-1].at.Sub(time.Time{}) + 2*time.Second
			t0 := time.Unix(1000, 0)
			buf := make([]int16, benchFrame)
			play := func(i int) {
				c := chunks[i%len(chunks)]
				base := t0.Add(time.Duration(i/len(chunks)) * span)
				for _, f := range c.sent {
					ref.Write(f.pcm, trackRate, base.Add(f.at))
				}
				copy(buf, c.pcm)
				s.Process(buf, base.Add(c.at.Sub(time.Time{})))
			}
			for i := range chunks {
				play(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				play(len(chunks) + i)
			}
			perFrame := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perFrame, "ns/frame")
			b.ReportMetric(perFrame*50/1000, "µs/s")
		})
	}
}

type sentFrame struct {
	pcm []int16
	at  time.Duration
}
