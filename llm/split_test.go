package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
)

// recorder keeps the bytes of the last response it carried.
type recorder struct {
	status int
	header http.Header
	body   []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r.body, _ = io.ReadAll(resp.Body)
	r.status, r.header = resp.StatusCode, resp.Header
	resp.Body = io.NopCloser(bytes.NewReader(r.body))
	return resp, nil
}

// replay answers every request with recorded bytes, delivered in pieces
// cut at the given offsets.
type replay struct {
	rec  *recorder
	cuts []int
}

func (p *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: p.rec.status, Header: p.rec.header, Request: req,
		Body: io.NopCloser(&pieces{data: p.rec.body, cuts: p.cuts})}, nil
}

type pieces struct {
	data []byte
	cuts []int
	off  int
}

func (p *pieces) Read(b []byte) (int, error) {
	if p.off >= len(p.data) {
		return 0, io.EOF
	}
	end := len(p.data)
	for len(p.cuts) > 0 && p.cuts[0] <= p.off {
		p.cuts = p.cuts[1:]
	}
	if len(p.cuts) > 0 {
		end = p.cuts[0]
	}
	n := copy(b, p.data[p.off:end])
	p.off += n
	return n, nil
}

// comparable drops what legitimately differs between two parses of the
// same bytes: ids the client mints for calls and messages it names itself.
func comparable(events []llm.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		if ev.ToolCall != nil {
			c := *ev.ToolCall
			c.ID = ""
			out[i] = fmt.Sprintf("%s %+v", ev.Kind, c)
			continue
		}
		ev.MessageID = ""
		out[i] = ev.String()
	}
	return out
}

// Every profile's byte stream, cut at every offset (or a large random
// sample of multi-cuts), gives the same events as the stream read whole.
func TestStreamsSplitAnywhere(t *testing.T) {
	base := startStandin(t, standin.Pacing{})
	questions := []string{"plain question", "What's the weather in Lyon tomorrow?", "raw-tool", "fail-error"}
	for _, p := range profiles {
		for _, q := range questions {
			t.Run(p.name+"/"+q, func(t *testing.T) {
				t.Parallel()
				rec := &recorder{}
				cfg := p.config(base)
				cfg.Model = "Qwen3-8B"
				cfg.HTTPClient = &http.Client{Transport: rec}
				if p.name == "vllm-noparser" {
					cfg.Model = "Qwen3-4B-Thinking-2507" // only a closing tag
				}
				client, _ := llm.New(cfg)
				req := &llm.Request{ConversationID: "c", Thinking: true, Messages: user(q)}
				want := comparable(collect(t, client, req))
				n := len(rec.body)
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				var splits [][]int
				for i := 1; i < n; i++ {
					splits = append(splits, []int{i})
				}
				if len(splits) > 150 && p.name != "vllm-noparser" {
					rng.Shuffle(len(splits), func(i, j int) { splits[i], splits[j] = splits[j], splits[i] })
					splits = splits[:150]
				}
				for range 60 {
					var cuts []int
					for range 1 + rng.IntN(40) {
						cuts = append(cuts, 1+rng.IntN(n-1))
					}
					slices.Sort(cuts)
					splits = append(splits, cuts)
				}
				byteByByte := make([]int, n)
				for i := range byteByByte {
					byteByByte[i] = i + 1
				}
				splits = append(splits, byteByByte)
				for _, cuts := range splits {
					cfg.HTTPClient = &http.Client{Transport: &replay{rec: rec, cuts: slices.Clone(cuts)}}
					c, _ := llm.New(cfg)
					got := comparable(collectQuiet(c, req))
					if !slices.Equal(got, want) {
						t.Fatalf("cut at %v:\n got %q\nwant %q", cuts, got, want)
					}
				}
			})
		}
	}
}

func collectQuiet(c llm.Client, req *llm.Request) []llm.Event {
	var events []llm.Event
	for ev := range c.Stream(context.Background(), req) {
		events = append(events, ev)
	}
	return events
}
