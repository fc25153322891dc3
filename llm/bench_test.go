package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
)

// BenchmarkParse measures the client's cost per streamed chunk: SSE or
// NDJSON framing, JSON decoding, reasoning separation and event delivery,
// on recorded bytes replayed from memory (no network). "json-only"
// decodes the same vLLM chunks into a struct and nothing else: the floor.
func BenchmarkParse(b *testing.B) {
	long := standin.Scenario{Name: "long", Rounds: []standin.Round{{
		Reasoning: []string{strings.Repeat("The user asks about the weather in Lyon, so I should consider the forecast. ", 20),
			strings.Repeat("Temperatures are given in Celsius in France, which the user will expect. ", 20)},
		Answer: strings.Repeat("Tomorrow will be sunny with a high of 24 degrees. ", 6),
	}}}
	s, _ := standin.New([]standin.Scenario{long}, standin.Pacing{}, nil)
	srv := startServer(b, s)
	for _, p := range profiles {
		if p.name != "vllm" && p.name != "vllm-noparser" && p.name != "ollama-native" && p.name != "agui" && p.name != "dashscope" {
			continue
		}
		rec := &recorder{}
		cfg := p.config(srv)
		cfg.Model = "Qwen3-8B"
		cfg.HTTPClient = &http.Client{Transport: rec}
		client, _ := llm.New(cfg)
		req := &llm.Request{ConversationID: "c", Thinking: true, Messages: user("weather")}
		collectQuiet(client, req)
		chunks := bytes.Count(rec.body, []byte("\n\n"))
		if p.name == "ollama-native" {
			chunks = bytes.Count(rec.body, []byte("\n"))
		}
		cfg.HTTPClient = &http.Client{Transport: &replay{rec: rec}}
		client, _ = llm.New(cfg)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for range client.Stream(context.Background(), req) {
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
			b.ReportMetric(float64(chunks), "chunks")
		})
		if p.name == "vllm" {
			frames := bytes.Split(rec.body, []byte("\n\n"))
			b.Run("json-only", func(b *testing.B) {
				b.ReportAllocs()
				var v struct {
					Choices []struct {
						Delta struct {
							Content   *string `json:"content"`
							Reasoning *string `json:"reasoning"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				for b.Loop() {
					for _, f := range frames {
						if d, ok := bytes.CutPrefix(f, []byte("data: ")); ok && d[0] == '{' {
							_ = json.Unmarshal(d, &v)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
			})
		}
	}
}

func startServer(b *testing.B, s *standin.Server) string {
	srv := newHTTPServer(s)
	b.Cleanup(srv.Close)
	return srv.URL
}
