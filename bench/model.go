package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/llm/standin"
)

// modelClock notes when each token of the stand-in's answers was flushed
// to the bot: the moments the bot's delays are measured from. The
// stand-in runs in the bench process, so its clock is the clients' clock.
type modelClock struct {
	next  http.Handler
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
	reasoning bool
}

// newModelClock serves sv with a clock on its tokens.
func newModelClock(sv *standin.Server) *modelClock {
	m := &modelClock{next: sv.Handler(), turns: map[string]*modelTurn{}}
	sv.Flushed = m.flushed
	return m
}

type turnKey struct{}

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
	m.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), turnKey{}, t)))
}

// turn returns the model's response to a question, once it has ended.
func (m *modelClock) turn(question string) *modelTurn {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turns[question]
}

// flushed stamps a delta the stand-in has just flushed to the bot.
func (m *modelClock) flushed(r *http.Request, kind, text string) {
	t, _ := r.Context().Value(turnKey{}).(*modelTurn)
	if t == nil || text == "" {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch kind {
	case "reasoning":
		t.reasoning = true
		if text == "\n\n" {
			t.stepEnds = append(t.stepEnds, now)
		}
	case "content":
		if t.content.Len() == 0 && t.reasoning {
			// The first answer token is the first moment the bot can know
			// the last step is complete.
			t.stepEnds = append(t.stepEnds, now)
		}
		t.content.WriteString(text)
		for range len(text) {
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
