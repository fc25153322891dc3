package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// BenchmarkPreemptiveGeneration: a spoken question over a real
// livekit-server, answered by the Qwen3 stand-in at a realistic pace
// (standin.RealisticPacing, thinking within the spoken budget): from the
// end of the speech to the first audio out (the thinking cue or the
// answer) and to the answer's first audio, as the client hears them,
// with preemptive generation off and on. Each iteration is one question:
// run it with -benchtime Nx.
func BenchmarkPreemptiveGeneration(b *testing.B) {
	lk := testenv.StartLiveKit(b)
	question := "How far is the moon?"
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("preemptive=%v", on), func(b *testing.B) {
			obs := newPreemptions()
			cfg, _, _, _ := voiceAgentWith(b, lk, modelSetup{pacing: standin.RealisticPacing, telemetry: obs,
				stage: func(c *voice.Config) { c.Preemptive = on }}, question, "you said")
			rec := &frameRecorder{}
			u, mic, _ := listeningUser(b, lk, cfg, fmt.Sprintf("conv_preempt_bench_%v_%d", on, time.Now().UnixNano()), "ivy", rec)
			ctx := context.Background()
			speak(ctx, mic, speechtest.Silence(1000, voice.InputRate))
			speech := trimmed(speechtest.Render(b, question, 140, voice.InputRate))
			toOutput, toAnswer := askRepeatedly(b, u, mic, rec, speech, 1000)
			_, used, _ := obs.counts()
			b.ReportMetric(float64(toOutput.Milliseconds())/float64(b.N), "ms-to-first-audio")
			b.ReportMetric(float64(toAnswer.Milliseconds())/float64(b.N), "ms-to-answer")
			b.ReportMetric(float64(used)/float64(b.N), "preemptive-used/op")
		})
	}
}
