package voice_test

import (
	"testing"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/wire"
)

func TestSpeakable(t *testing.T) {
	for _, tc := range []struct {
		in   pipeline.Sentence
		want string
	}{
		{pipeline.Sentence{Text: "Paris is sunny today."}, "Paris is sunny today."},
		{pipeline.Sentence{Text: "Run `go test` to check.", Markdown: []string{wire.MarkdownCode}}, "Run to check."},
		{pipeline.Sentence{Text: "```go\nfmt.Println(1)\n```", Markdown: []string{wire.MarkdownCode}}, ""},
		{pipeline.Sentence{Text: "It is **very** warm.", Markdown: []string{wire.MarkdownEmphasis}}, "It is very warm."},
		{pipeline.Sentence{Text: "See [the forecast](https://example.com/paris) for more."}, "See the forecast for more."},
		{pipeline.Sentence{Text: "Details at https://example.com/a.b?c=d today."}, "Details at today."},
		{pipeline.Sentence{Text: "- First, pack an umbrella."}, "First, pack an umbrella."},
		{pipeline.Sentence{Text: "Use the *_init_* file."}, "Use the *_init_* file."},
		{pipeline.Sentence{Text: `You said: "how far is the moon".`}, "You said: how far is the moon."},
	} {
		if got := voice.Speakable(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in.Text, got, tc.want)
		}
	}
}
