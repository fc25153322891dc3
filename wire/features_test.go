package wire_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/wire"
)

func TestParseFeatures(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []string
		want wire.Features
	}{
		{name: "none", in: nil, want: wire.Features{}},
		{name: "the specification's constants", in: []string{"streaming", "partial_responses", "audio_output", "reasoning_steps", "tool_use", "partial_transcripts"},
			want: wire.Features{Streaming: true, PartialResponses: true, AudioOutput: true, ReasoningSteps: true, ToolUse: true, PartialTranscripts: true}},
		{name: "the specification's synonym for reasoning steps", in: []string{"reasoning_step_display"}, want: wire.Features{ReasoningSteps: true}},
		{name: "Alicia's own", in: []string{"reasoning_summary", "partial_reasoning"}, want: wire.Features{ReasoningSummary: true, PartialReasoning: true}},
		{name: "choices", in: []string{"reasoning_preference:summary", "voice_thinking:budget", "typed_thinking:off", "thinking_cue:phrase"},
			want: wire.Features{ReasoningPreference: "summary", VoiceThinking: "budget", TypedThinking: "off", ThinkingCue: "phrase"}},
		{name: "spaces and empty entries", in: []string{" streaming ", "", "  ", "\taudio_output\n", " thinking_cue : off "},
			want: wire.Features{Streaming: true, AudioOutput: true, ThinkingCue: "off"}},
		{name: "the last value of a choice counts, even one its owner will not know", in: []string{"thinking_cue:off", "thinking_cue:loud"},
			want: wire.Features{ThinkingCue: "loud"}},
		{name: "a value may hold a colon", in: []string{"voice_thinking:budget:3s"}, want: wire.Features{VoiceThinking: "budget:3s"}},
		{name: "repeats", in: []string{"streaming", "streaming", "mystery", "mystery"}, want: wire.Features{Streaming: true, Unknown: []string{"mystery"}}},
		{name: "odd ones are unknown and change nothing", in: []string{"Streaming", "streaming:yes", "thinking_cue:", "thinking_cue", ":off", "future:x", "reasoning_steps,audio_output"},
			want: wire.Features{Unknown: []string{"Streaming", "streaming:yes", "thinking_cue:", "thinking_cue", ":off", "future:x", "reasoning_steps,audio_output"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := wire.ParseFeatures(c.in); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseFeatures(%q)\n got %+v\nwant %+v", c.in, got, c.want)
			}
		})
	}
}

// A client cannot make the server keep more than a few unknown features.
func TestParseFeaturesKeepsFewUnknown(t *testing.T) {
	var in []string
	for i := range 10_000 {
		in = append(in, fmt.Sprintf("x%d", i))
	}
	got := wire.ParseFeatures(append(in, "streaming"))
	if !got.Streaming || len(got.Unknown) != 16 || got.Unknown[0] != "x0" || got.Unknown[15] != "x15" {
		t.Fatalf("streaming %v, unknown %q", got.Streaming, got.Unknown)
	}
}

// The participant attribute's form: comma-separated.
func TestParseFeatureList(t *testing.T) {
	for in, want := range map[string]wire.Features{
		"":   {},
		",,": {},
		"streaming, reasoning_steps ,partial_reasoning,thinking_cue:sound,": {Streaming: true, ReasoningSteps: true, PartialReasoning: true, ThinkingCue: "sound"},
		"none": {Unknown: []string{"none"}},
	} {
		if got := wire.ParseFeatureList(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseFeatureList(%q)\n got %+v\nwant %+v", in, got, want)
		}
	}
}

// List writes what ParseFeatures reads: known features in a fixed order,
// the unknown ones last as they came.
func TestFeaturesList(t *testing.T) {
	f := wire.Features{ThinkingCue: "off", PartialReasoning: true, Streaming: true, ReasoningPreference: "full", Unknown: []string{"zz", "aa"}}
	want := []string{"streaming", "partial_reasoning", "reasoning_preference:full", "thinking_cue:off", "zz", "aa"}
	if got := f.List(); !reflect.DeepEqual(got, want) {
		t.Fatalf("List %q, want %q", got, want)
	}
	if got := wire.ParseFeatures(f.List()); !reflect.DeepEqual(got, f) {
		t.Fatalf("read back %+v, want %+v", got, f)
	}
	if got := (wire.Features{}).List(); got != nil {
		t.Fatalf("no features listed as %q", got)
	}
}

// FuzzParseFeatures: any list reads without panic, and what List writes
// reads back as the same features.
func FuzzParseFeatures(f *testing.F) {
	for _, s := range []string{"", "streaming,reasoning_steps", " thinking_cue : off ,,x", "reasoning_preference:", "a:b:c,a:b:c", "voice_thinking:on,voice_thinking:off"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, got := range []wire.Features{wire.ParseFeatureList(in), wire.ParseFeatures(strings.Split(in, "\n"))} {
			if again := wire.ParseFeatures(got.List()); !reflect.DeepEqual(again, got) {
				t.Fatalf("%q: read %+v, listed %q, read back %+v", in, got, got.List(), again)
			}
		}
	})
}
