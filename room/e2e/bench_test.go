package e2e

import (
	"context"
	"fmt"
	"iter"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// clocked wraps the model client and notes when each event reached the
// bot, which is when it left the stand-in plus a loopback hop.
type clocked struct {
	llm.Client
	mu     sync.Mutex
	starts map[string]time.Time   // conversation → model request
	breaks map[string][]time.Time // conversation → each step's closing delta
	text   map[string]time.Time   // conversation → first answer text
}

func (c *clocked) Stream(ctx context.Context, req *llm.Request) iter.Seq[llm.Event] {
	c.mu.Lock()
	c.starts[req.ConversationID] = time.Now()
	c.mu.Unlock()
	return func(yield func(llm.Event) bool) {
		for ev := range c.Client.Stream(ctx, req) {
			now := time.Now()
			c.mu.Lock()
			switch {
			case ev.Kind == llm.EventReasoning && ev.Text == "\n\n":
				c.breaks[req.ConversationID] = append(c.breaks[req.ConversationID], now)
			case ev.Kind == llm.EventText && c.text[req.ConversationID].IsZero():
				// The first answer text also closes the last step.
				c.breaks[req.ConversationID] = append(c.breaks[req.ConversationID], now)
				c.text[req.ConversationID] = now
			}
			c.mu.Unlock()
			if !yield(ev) {
				return
			}
		}
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkConversations runs 50 conversations at once over a real
// livekit-server, each asking one question of the stand-in at a realistic
// pace, with reasoning shown in full. It reports the delay the bot adds
// from a step's last token leaving the model to the ReasoningStep reaching
// the client, from the first answer token to StartAnswer reaching the
// client, and from the user's message to the model request; and CPU and
// heap per conversation (the 50 Go clients run in this process too and
// are counted in both).
func BenchmarkConversations(b *testing.B) {
	const n = 50
	lk := testenv.StartLiveKit(b)
	s, _ := standin.New(nil, standin.RealisticPacing, nil)
	model := httptest.NewServer(s.Handler())
	defer model.Close()
	inner, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	var stepDelay, startDelay, requestDelay []time.Duration
	var cpuPerTurn, heapPerConv []float64
	for iter := 0; iter < b.N; iter++ {
		c := &clocked{Client: inner, starts: map[string]time.Time{}, breaks: map[string][]time.Time{}, text: map[string]time.Time{}}
		cfg := startAgent(b, lk, c, storage.NewMemory(storage.ReasoningPlain))
		users := make([]*user, n)
		for i := range users {
			users[i] = join(b, lk, cfg, fmt.Sprintf("conv_bench_%d_%d", iter, i), "alice")
		}
		for _, u := range users {
			u.greeted()
			u.send(&wire.Configuration{Features: []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}})
		}
		runtime.GC()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		cpu0 := cpuSeconds()
		sent := make([]time.Time, n)
		arrivals := make([]map[int32]time.Time, n)
		startAt := make([]time.Time, n)
		var wg sync.WaitGroup
		for i, u := range users {
			arrivals[i] = map[int32]time.Time{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent[i] = time.Now()
				u.send(&wire.UserMessage{ID: "msg_q", ConversationID: u.room.Name(), Content: "How are you?"})
				seen := 0
				u.until("the answer", func(g []*wire.Envelope) bool {
					for _, e := range g[seen:] {
						switch bd := e.Body.(type) {
						case *wire.ReasoningStep:
							arrivals[i][bd.StepIndex] = time.Now()
						case *wire.StartAnswer:
							startAt[i] = time.Now()
						}
					}
					seen = len(g)
					return finalSentence(g)
				})
			}()
		}
		wg.Wait()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		cpuPerTurn = append(cpuPerTurn, (cpuSeconds()-cpu0)/n)
		heapPerConv = append(heapPerConv, float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/n/1024)
		for i, u := range users {
			conv := u.room.Name()
			c.mu.Lock()
			for idx, at := range arrivals[i] {
				if br := c.breaks[conv]; int(idx) <= len(br) {
					stepDelay = append(stepDelay, at.Sub(br[idx-1]))
				}
			}
			startDelay = append(startDelay, startAt[i].Sub(c.text[conv]))
			requestDelay = append(requestDelay, c.starts[conv].Sub(sent[i]))
			c.mu.Unlock()
			u.room.Disconnect()
		}
	}
	pct := func(d []time.Duration, p int) float64 {
		slices.Sort(d)
		return float64(d[len(d)*p/100].Microseconds()) / 1000
	}
	b.ReportMetric(pct(stepDelay, 50), "step-p50-ms")
	b.ReportMetric(pct(stepDelay, 95), "step-p95-ms")
	b.ReportMetric(pct(startDelay, 50), "startanswer-p50-ms")
	b.ReportMetric(pct(startDelay, 95), "startanswer-p95-ms")
	b.ReportMetric(pct(requestDelay, 50), "msg-to-model-p50-ms")
	b.ReportMetric(pct(requestDelay, 95), "msg-to-model-p95-ms")
	slices.Sort(cpuPerTurn)
	slices.Sort(heapPerConv)
	b.ReportMetric(cpuPerTurn[len(cpuPerTurn)/2], "cpu-s/turn")
	b.ReportMetric(heapPerConv[len(heapPerConv)/2], "heap-KiB/conv")
}
