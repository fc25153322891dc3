package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// modelClock sits between the bot and the stand-in model and notes when
// each token left for the bot: the moments the bot's delays are measured
// from. It runs in the bench process, so its clock is the clients' clock.
type modelClock struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	turns map[string]*modelTurn // the user message that asked → its answer
}

// modelTurn is one model response as it streamed.
type modelTurn struct {
	requested time.Time
	// stepEnds: when each reasoning step's last token left (a paragraph
	// break, or for the last step the first answer token).
	stepEnds []time.Time
	// content is the answer so far; contentAt[i] is when its byte i left.
	content   strings.Builder
	contentAt []time.Time
	done      time.Time
}

func newModelClock(target string) (*modelClock, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	m := &modelClock{turns: map[string]*modelTurn{}}
	m.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		FlushInterval: -1, // every token on its way at once
		ModifyResponse: func(resp *http.Response) error {
			t, _ := resp.Request.Context().Value(turnKey{}).(*modelTurn)
			if t != nil {
				resp.Body = &sseTap{ReadCloser: resp.Body, m: m, t: t}
			}
			return nil
		},
	}
	return m, nil
}

type turnKey struct{}

func contextWith(r *http.Request, t *modelTurn) context.Context {
	return context.WithValue(r.Context(), turnKey{}, t)
}

func (m *modelClock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	question := ""
	for _, msg := range req.Messages {
		if s, ok := msg.Content.(string); ok && msg.Role == "user" {
			question = s
		}
	}
	t := &modelTurn{requested: time.Now()}
	m.mu.Lock()
	m.turns[question] = t
	m.mu.Unlock()
	m.proxy.ServeHTTP(w, r.WithContext(contextWith(r, t)))
}

// turn returns the model's response to a question, once it has ended.
func (m *modelClock) turn(question string) *modelTurn {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turns[question]
}

// sseTap reads the stand-in's server-sent events as they pass and stamps
// the ones the bench measures from.
type sseTap struct {
	io.ReadCloser
	m         *modelClock
	t         *modelTurn
	partial   []byte
	reasoning bool
	content   bool
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 {
		now := time.Now()
		s.partial = append(s.partial, p[:n]...)
		for {
			i := bytes.IndexByte(s.partial, '\n')
			if i < 0 {
				break
			}
			s.line(s.partial[:i], now)
			s.partial = s.partial[i+1:]
		}
	}
	if err != nil {
		s.m.mu.Lock()
		s.t.done = time.Now()
		s.m.mu.Unlock()
	}
	return n, err
}

func (s *sseTap) line(l []byte, now time.Time) {
	data, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte("data:"))
	if !ok {
		return
	}
	var chunk struct {
		Choices []struct {
			Delta struct {
				Reasoning        *string `json:"reasoning"`
				ReasoningContent *string `json:"reasoning_content"`
				Content          *string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &chunk) != nil || len(chunk.Choices) == 0 {
		return
	}
	d := chunk.Choices[0].Delta
	reasoning := d.Reasoning
	if reasoning == nil {
		reasoning = d.ReasoningContent
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	t := s.t
	if reasoning != nil && *reasoning != "" {
		s.reasoning = true
		if *reasoning == "\n\n" {
			t.stepEnds = append(t.stepEnds, now)
		}
	}
	if d.Content != nil && *d.Content != "" {
		if !s.content && s.reasoning {
			// The first answer token is the first moment the bot can know
			// the last step is complete.
			t.stepEnds = append(t.stepEnds, now)
		}
		s.content = true
		t.content.WriteString(*d.Content)
		for range len(*d.Content) {
			t.contentAt = append(t.contentAt, now)
		}
	}
}

// sentenceSent is when the last token of a sentence left the model: the
// sentence is found in the answer after the previous one.
func (t *modelTurn) sentenceSent(text string, from int) (time.Time, int, bool) {
	text = strings.TrimSpace(text)
	all := t.content.String()
	if text == "" || from > len(all) {
		return time.Time{}, from, false
	}
	i := strings.Index(all[from:], text)
	if i < 0 {
		return time.Time{}, from, false
	}
	end := from + i + len(text)
	return t.contentAt[end-1], end, true
}
