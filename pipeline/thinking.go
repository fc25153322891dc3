package pipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Budget bounds a turn's reasoning: how long the model may think, how
// many reasoning tokens it may write, or both (whichever runs out first).
// The zero Budget is unlimited. When it runs out the reasoning is cut
// short and the answer asked for at once (llm.AnswerNow).
type Budget struct {
	Duration time.Duration
	// Tokens are estimated from the reasoning's text (about four
	// characters a token, one a CJK character): backends report token
	// counts only at the end.
	Tokens int
}

// Unlimited reports whether b bounds nothing.
func (b Budget) Unlimited() bool { return b.Duration <= 0 && b.Tokens <= 0 }

// ParseBudget reads a budget as settings write it: "0" or "" for
// unlimited, a duration ("3s", "1500ms"), a number of tokens ("300tokens",
// "300 tokens"), or both separated by a comma ("3s,300tokens").
func ParseBudget(s string) (Budget, error) {
	var b Budget
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return b, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if n, ok := strings.CutSuffix(part, "tokens"); ok {
			v, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil || v < 0 {
				return Budget{}, fmt.Errorf("budget %q: %q is not a number of tokens", s, part)
			}
			b.Tokens = v
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil || d < 0 {
			return Budget{}, fmt.Errorf("budget %q: %q is neither a duration (3s) nor tokens (300tokens)", s, part)
		}
		b.Duration = d
	}
	return b, nil
}

func (b Budget) String() string {
	var parts []string
	if b.Duration > 0 {
		parts = append(parts, b.Duration.String())
	}
	if b.Tokens > 0 {
		parts = append(parts, strconv.Itoa(b.Tokens)+"tokens")
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}

func (b Budget) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

func (b *Budget) UnmarshalText(text []byte) error {
	v, err := ParseBudget(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// estimateTokens guesses how many Qwen3 tokens text is: about four
// characters a token for alphabetic scripts, one a character for CJK.
func estimateTokens(text string) int {
	chars, cjk := 0, 0
	for _, r := range text {
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
			cjk++
		} else {
			chars++
		}
	}
	return cjk + (chars+3)/4
}

// ThinkingMode is whether a turn's model reasons before it answers.
type ThinkingMode string

const (
	ThinkingOn  ThinkingMode = "on"
	ThinkingOff ThinkingMode = "off"
	// ThinkingBudget: it reasons, within a budget.
	ThinkingBudget ThinkingMode = "budget"
)

// Valid reports whether m is one of the modes.
func (m ThinkingMode) Valid() bool {
	return m == ThinkingOn || m == ThinkingOff || m == ThinkingBudget
}

// DefaultReasoningBudget is the budget of a turn whose client asks for a
// budget where the deployment configured none: what keeps a spoken answer
// from starting after seconds of silence.
const DefaultReasoningBudget = 3 * time.Second

// Thinking is the thinking of one kind of turn.
type Thinking struct {
	Mode ThinkingMode
	// Budget applies in ThinkingBudget mode.
	Budget Budget
}

// ThinkingPolicy is the deployment's thinking for typed and for spoken
// turns.
type ThinkingPolicy struct {
	Typed, Spoken Thinking
}

// Thinking is the deployment's thinking policy in force: Config's, or
// Config.Thinking for both kinds of turn, without a budget.
func (e *Engine) Thinking() ThinkingPolicy {
	if e.cfg.ThinkingPolicy != nil {
		return *e.cfg.ThinkingPolicy
	}
	t := Thinking{Mode: ThinkingOff}
	if e.cfg.Thinking {
		t.Mode = ThinkingOn
	}
	return ThinkingPolicy{Typed: t, Spoken: t}
}

// Validate says what is wrong with a policy, in its own words.
func (p ThinkingPolicy) Validate() error {
	var errs []error
	for _, k := range []struct {
		name string
		t    Thinking
	}{{"typed", p.Typed}, {"spoken", p.Spoken}} {
		if !k.t.Mode.Valid() {
			errs = append(errs, fmt.Errorf("%s turns: thinking must be on, off or budget, not %q", k.name, k.t.Mode))
		}
	}
	return errors.Join(errs...)
}

// Spoken marks a turn as answering speech: the thinking chosen for spoken
// turns applies (the deployment's, or the asking client's voice_thinking
// feature), so that a spoken answer need not wait for long reasoning.
func Spoken() AskOption { return func(s *spec) { s.spoken = true } }

// WithThinking turns the turn's thinking on or off, whatever the
// deployment and the client chose; on keeps the budget configured for the
// turn's kind.
func WithThinking(on bool) AskOption {
	return func(s *spec) {
		m := ThinkingOff
		if on {
			m = ThinkingOn
		}
		s.thinking = m
	}
}

// WithBudgetedThinking lets the turn's model think within the budget
// configured for the turn's kind (DefaultReasoningBudget where none is).
func WithBudgetedThinking() AskOption { return func(s *spec) { s.thinking = ThinkingBudget } }

// WithReasoningBudget lets the turn's model think for at most d and at
// most tokens reasoning tokens (zero: no bound of that kind); when either
// runs out, the reasoning is cut short and the answer asked for at once.
func WithReasoningBudget(d time.Duration, tokens int) AskOption {
	return func(s *spec) {
		s.thinking = ThinkingBudget
		s.budget = &Budget{Duration: d, Tokens: tokens}
	}
}

// thinkingFor decides a turn's thinking: the asking face's options win,
// then what the asking client chose for turns of this kind, then the
// deployment's choice for them.
func (c *Conversation) thinkingFor(sp *spec, face Roster) (on bool, b Budget) {
	policy := c.e.Thinking()
	kind := policy.Typed
	if sp.spoken {
		kind = policy.Spoken
	}
	mode := kind.Mode
	for _, m := range face.Members() {
		asked := ThinkingMode(m.Features.TypedThinking)
		if sp.spoken {
			asked = ThinkingMode(m.Features.VoiceThinking)
		}
		if m.Identity == sp.from && asked.Valid() {
			mode = asked
		}
	}
	switch sp.thinking {
	case ThinkingOff, ThinkingBudget:
		mode = sp.thinking
	case ThinkingOn:
		if mode != ThinkingBudget {
			mode = ThinkingOn
		}
	}
	switch mode {
	case ThinkingOff:
		return false, Budget{}
	case ThinkingBudget:
		switch {
		case sp.budget != nil:
			return true, *sp.budget
		case !kind.Budget.Unlimited():
			return true, kind.Budget
		}
		return true, Budget{Duration: DefaultReasoningBudget}
	}
	return true, Budget{}
}
