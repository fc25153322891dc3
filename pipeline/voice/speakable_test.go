package voice_test

import (
	"testing"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

func TestSpeakable(t *testing.T) {
	for _, tc := range []struct {
		in   voice.Sentence
		want string
	}{
		{voice.Sentence{Text: "Paris is sunny today."}, "Paris is sunny today."},
		{voice.Sentence{Text: "Run `go test` to check.", Code: true}, "Run to check."},
		{voice.Sentence{Text: "```go\nfmt.Println(1)\n```", Code: true}, ""},
		{voice.Sentence{Text: "It is **very** warm.", Emphasis: true}, "It is very warm."},
		{voice.Sentence{Text: "See [the forecast](https://example.com/paris) for more."}, "See the forecast for more."},
		{voice.Sentence{Text: "Details at https://example.com/a.b?c=d today."}, "Details at today."},
		{voice.Sentence{Text: "- First, pack an umbrella."}, "First, pack an umbrella."},
		{voice.Sentence{Text: "Use the *_init_* file.", Emphasis: false}, "Use the *_init_* file."},
		{voice.Sentence{Text: `You said: "how far is the moon".`}, "You said: how far is the moon."},
	} {
		if got := voice.Speakable(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in.Text, got, tc.want)
		}
	}
}
