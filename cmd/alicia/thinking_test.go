package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
)

// The thinking settings: spoken turns think within a budget by default,
// typed turns without one; each can be set apart, and a bad value stops
// the start naming its setting.
func TestThinkingSettings(t *testing.T) {
	for _, k := range []string{"ALICIA_THINKING", "ALICIA_VOICE_THINKING", "ALICIA_VOICE_REASONING_BUDGET", "ALICIA_TYPED_REASONING_BUDGET"} {
		t.Setenv(k, "")
	}
	three := pipeline.Budget{Duration: 3 * time.Second}
	cases := []struct {
		name string
		env  map[string]string
		want pipeline.ThinkingPolicy
		err  string
	}{
		{name: "defaults", want: pipeline.ThinkingPolicy{
			Typed:  pipeline.Thinking{Mode: pipeline.ThinkingOn},
			Spoken: pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: three}}},
		{name: "thinking off reaches voice too", env: map[string]string{"ALICIA_THINKING": "off"}, want: pipeline.ThinkingPolicy{
			Typed:  pipeline.Thinking{Mode: pipeline.ThinkingOff},
			Spoken: pipeline.Thinking{Mode: pipeline.ThinkingOff, Budget: three}}},
		{name: "budgets in tokens and both", env: map[string]string{"ALICIA_VOICE_REASONING_BUDGET": "300 tokens", "ALICIA_TYPED_REASONING_BUDGET": "20s,2000tokens"},
			want: pipeline.ThinkingPolicy{
				Typed:  pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: pipeline.Budget{Duration: 20 * time.Second, Tokens: 2000}},
				Spoken: pipeline.Thinking{Mode: pipeline.ThinkingBudget, Budget: pipeline.Budget{Tokens: 300}}}},
		{name: "voice unlimited", env: map[string]string{"ALICIA_VOICE_THINKING": "on"}, want: pipeline.ThinkingPolicy{
			Typed:  pipeline.Thinking{Mode: pipeline.ThinkingOn},
			Spoken: pipeline.Thinking{Mode: pipeline.ThinkingOn, Budget: three}}},
		{name: "a budget of 0 is no budget", env: map[string]string{"ALICIA_VOICE_REASONING_BUDGET": "0"}, want: pipeline.ThinkingPolicy{
			Typed:  pipeline.Thinking{Mode: pipeline.ThinkingOn},
			Spoken: pipeline.Thinking{Mode: pipeline.ThinkingOn}}},
		{name: "budget mode needs a budget", env: map[string]string{"ALICIA_VOICE_THINKING": "budget", "ALICIA_VOICE_REASONING_BUDGET": "0"}, err: "ALICIA_VOICE_REASONING_BUDGET"},
		{name: "a bad mode", env: map[string]string{"ALICIA_VOICE_THINKING": "sometimes"}, err: "ALICIA_VOICE_THINKING"},
		{name: "a bad budget", env: map[string]string{"ALICIA_TYPED_REASONING_BUDGET": "three seconds"}, err: "typed-reasoning-budget"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			sc, err := parseServeConfig(nil, io.Discard)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.thinkingPolicy(); got != c.want {
				t.Fatalf("policy %+v, want %+v", got, c.want)
			}
		})
	}
}
