package pipeline_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	aguiface "github.com/alicia-voice/alicia/pipeline/agui"
	"github.com/alicia-voice/alicia/storage"
)

// BenchmarkAGUI measures the AG-UI endpoint against the stand-in with no
// pacing: the time from the request to the first reasoning event, and
// the time per event. "model-direct" reads the same model output with the
// llm client alone: the difference is what the endpoint adds.
func BenchmarkAGUI(b *testing.B) {
	s, _ := standin.New(nil, standin.Pacing{}, nil)
	model := httptest.NewServer(s.Handler())
	defer model.Close()
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	store := storage.NewMemory(storage.ReasoningOff)
	h := aguiface.New(pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true}, store), store,
		func(*http.Request) (string, error) { return "bench", nil })
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"How are you?"}],"forwardedProps":{"reasoning":"full"}}`

	b.Run("agui-endpoint", func(b *testing.B) {
		var first, total time.Duration
		events := 0
		for b.Loop() {
			start := time.Now()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			got := false
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "data: ") {
					events++
					if !got && strings.Contains(line, `"REASONING_MESSAGE_CONTENT"`) {
						first += time.Since(start)
						got = true
					}
				}
			}
			resp.Body.Close()
			total += time.Since(start)
		}
		b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1000, "first-reasoning-ms")
		b.ReportMetric(float64(total.Nanoseconds())/float64(events), "ns/event")
		b.ReportMetric(float64(events)/float64(b.N), "events/run")
	})
	b.Run("model-direct", func(b *testing.B) {
		var first, total time.Duration
		events := 0
		req := &llm.Request{Thinking: true, Messages: []llm.Message{{Role: llm.RoleUser, Content: "How are you?"}}}
		for b.Loop() {
			start := time.Now()
			got := false
			for ev := range client.Stream(context.Background(), req) {
				events++
				if !got && ev.Kind == llm.EventReasoning {
					first += time.Since(start)
					got = true
				}
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(first.Microseconds())/float64(b.N)/1000, "first-reasoning-ms")
		b.ReportMetric(float64(total.Nanoseconds())/float64(events), "ns/event")
		b.ReportMetric(float64(events)/float64(b.N), "events/run")
	})
}
