package standin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// reflectJSON is how obj was written before it had its own encoder:
// encoding/json for every key and value.
func reflectJSON(t *testing.T, o obj) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func TestObjWritesWhatEncodingJSONWrites(t *testing.T) {
	finish := "stop"
	var none *string
	texts := []string{"", "plain words", "quote \" and \\ backslash", "<tag> & amp", "line\nbreak\ttab\x01",
		"Grüße, 你好", "\u2028 and \u2029", "bad utf-8 \xff\xfe", "emoji 🙂"}
	for _, text := range texts {
		chunk := obj{{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", int64(1700000000)},
			{"choices", []obj{{{"index", 0}, {"delta", obj{{"reasoning", text}, {"content", nil}}}, {"finish_reason", none}}}},
			{"usage", obj{{"n", 3}, {"cost", 0.0000123}, {"ok", true}, {"finish", &finish}, {"list", []any{obj{{"k", text}}, 1.5}}}}}
		got, err := json.Marshal(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if want := reflectJSON(t, chunk); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", text, got, want)
		}
		frame := sseFrame(chunk)
		if want := append(append([]byte("data: "), got...), '\n', '\n'); !bytes.Equal(frame, want) {
			t.Errorf("sseFrame %q:\n got %q\nwant %q", text, frame, want)
		}
	}
}

// Flushed hears every delta the client reads, in order, with its kind.
func TestFlushedHearsEveryDeltaTheClientReads(t *testing.T) {
	s, err := New(nil, Pacing{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	heard := map[string]*strings.Builder{"reasoning": {}, "content": {}}
	s.Flushed = func(_ *http.Request, kind, text string) {
		mu.Lock()
		defer mu.Unlock()
		heard[kind].WriteString(text)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"Qwen3-8B","stream":true,"messages":[{"role":"user","content":"How are you today?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read := map[string]*strings.Builder{"reasoning": {}, "content": {}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Reasoning, Content string }
			}
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			read["reasoning"].WriteString(c.Delta.Reasoning)
			read["content"].WriteString(c.Delta.Content)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, kind := range []string{"reasoning", "content"} {
		if read[kind].Len() == 0 || heard[kind].String() != read[kind].String() {
			t.Errorf("%s: heard %q, client read %q", kind, heard[kind], read[kind])
		}
	}
}
