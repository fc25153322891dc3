package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Scenario is what the stand-in model says to a matching question.
type Scenario struct {
	Name string `json:"name"`
	// Match is a regular expression tried on the last user message; the
	// first scenario that matches answers. Empty matches everything.
	Match string `json:"match,omitempty"`
	// Rounds are the model's successive responses within one user turn:
	// round 0 answers the user message, round N answers after N rounds of
	// tool results.
	Rounds []Round `json:"rounds"`
	Pacing *Pacing `json:"pacing,omitempty"`
	match  *regexp.Regexp
}

// Round is one model response.
type Round struct {
	// Reasoning paragraphs, joined with blank lines as Qwen3 writes them.
	Reasoning []string `json:"reasoning,omitempty"`
	// Answer text. {{question}} is replaced by the user's message and
	// {{toolResult}} by the content of the latest tool message.
	Answer    string     `json:"answer,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Encrypted, for the AG-UI profiles: an opaque value attached to the
	// reasoning message with REASONING_ENCRYPTED_VALUE.
	Encrypted string `json:"encrypted,omitempty"`
	Fault     *Fault `json:"fault,omitempty"`
	// ReasonForMs makes the model go on reasoning after the paragraphs
	// above for about this long at the pacing's time per token, as it does
	// on a hard question: what a reasoning budget is tested against.
	ReasonForMs int `json:"reasonForMs,omitempty"`
}

// ToolCall the model makes.
type ToolCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	// Encrypted, for the AG-UI profiles, is attached to the call.
	Encrypted string `json:"encrypted,omitempty"`
}

// Fault makes a response fail the way real backends do.
type Fault struct {
	// Kind: "error" (the profile's mid-stream error shape), "cut" (the
	// connection closes, no finish), "no-done" (finish but no [DONE]),
	// "http" (an HTTP error before the stream, the profile's body shape),
	// "html" (a proxy's HTML error page), "stall" (silence for StallMs),
	// "raw-tool-call" (tool calls leak into content as <tool_call> text).
	Kind string `json:"kind"`
	// AfterTokens: the fault strikes after this many tokens of output.
	AfterTokens int    `json:"afterTokens,omitempty"`
	Status      int    `json:"status,omitempty"`
	Message     string `json:"message,omitempty"`
	StallMs     int    `json:"stallMs,omitempty"`
}

// Pacing of generation: time to first token, then time per token, each
// varied at random by ±Jitter (a fraction).
type Pacing struct {
	TTFTMs  float64 `json:"ttftMs"`
	TokenMs float64 `json:"tokenMs"`
	Jitter  float64 `json:"jitter"`
}

// RealisticPacing is a small Qwen3 on a data-centre GPU: 30–80 ms to the
// first token, 10–12 ms per token.
var RealisticPacing = Pacing{TTFTMs: 50, TokenMs: 11, Jitter: 0.3}

// DefaultScenario answers any question with a few paragraphs of reasoning
// and a short answer that says what it is.
func DefaultScenario() Scenario {
	return Scenario{
		Name: "default",
		Rounds: []Round{{
			Reasoning: []string{
				`Okay, the user wrote: "{{question}}". Let me think about what they want before I answer.`,
				"I am running as Alicia's stand-in model, not a real Qwen3, so I cannot actually reason about the content. The honest thing is to say so plainly and keep the answer short.",
				"I should still answer in a friendly tone and mention how to connect a real model, since that is what the user needs to get real answers.",
			},
			Answer: `You said: "{{question}}". I am Alicia's stand-in model, so this is a canned reply. Set ALICIA_LLM_URL to a Qwen3 server for real answers.`,
		}},
	}
}

// LoadScenarios reads every *.json file in dir; each holds one scenario or
// an array of them.
func LoadScenarios(dir string) ([]Scenario, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var many []Scenario
		if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
			err = json.Unmarshal(raw, &many)
		} else {
			var one Scenario
			err = json.Unmarshal(raw, &one)
			many = []Scenario{one}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, many...)
	}
	return out, nil
}

func (s *Scenario) compile() error {
	if len(s.Rounds) == 0 {
		return fmt.Errorf("scenario %q has no rounds", s.Name)
	}
	if s.Match != "" {
		re, err := regexp.Compile(s.Match)
		if err != nil {
			return fmt.Errorf("scenario %q: %w", s.Name, err)
		}
		s.match = re
	}
	return nil
}

func (s *Scenario) matches(question string) bool {
	return s.match == nil || s.match.MatchString(question)
}

// tokenRE cuts text into pieces the size of Qwen3's tokens: a word of up
// to six letters with its leading space, one punctuation mark, or a run of
// newlines.
var tokenRE = regexp.MustCompile(`\n+|[ \t]*[\p{L}\p{N}']{1,6}|[ \t]*[^\s\p{L}\p{N}']|\s`)

func tokenize(s string) []string {
	return tokenRE.FindAllString(s, -1)
}
