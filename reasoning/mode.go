package reasoning

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/alicia-voice/alicia/reasoning/sentence"
	"github.com/alicia-voice/alicia/wire"
)

// Mode is a user's "show reasoning" preference.
type Mode string

const (
	// ModeOff, the default: the user receives no reasoning at all.
	ModeOff Mode = "off"
	// ModeSummary: each step reduced to its first sentence.
	ModeSummary Mode = "summary"
	// ModeFull: each step as the model wrote it.
	ModeFull Mode = "full"
)

// ModeFromFeatures reads the preference a Configuration's features state:
// reasoning_steps (or the specification's reasoning_step_display) for
// full, reasoning_summary for summary, neither for off.
func ModeFromFeatures(features []string) Mode {
	switch {
	case slices.Contains(features, wire.FeatureReasoningSteps), slices.Contains(features, wire.FeatureReasoningDisplay):
		return ModeFull
	case slices.Contains(features, wire.FeatureReasoningSummary):
		return ModeSummary
	}
	return ModeOff
}

// Features are the reasoning features the server's Configuration reply
// states as in effect.
func (m Mode) Features(partial bool) []string {
	var out []string
	switch m {
	case ModeFull:
		out = append(out, wire.FeatureReasoningSteps)
	case ModeSummary:
		out = append(out, wire.FeatureReasoningSummary)
	default:
		return nil
	}
	if partial {
		out = append(out, wire.FeaturePartialReasoning)
	}
	return out
}

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m == ModeOff || m == ModeSummary || m == ModeFull }

// SummaryMaxRunes bounds a summarised step.
const SummaryMaxRunes = 160

// Summarize reduces a step to its first sentence, at most 160 characters,
// cut at a word boundary (with an ellipsis) when the sentence is longer.
func Summarize(s string) string {
	s = strings.TrimSpace(s)
	if end := sentence.End(s, true); end > 0 {
		s = s[:end]
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= SummaryMaxRunes {
		return s
	}
	// Room for the ellipsis.
	cut := byteIndexOfRune(s, SummaryMaxRunes-1)
	if i := strings.LastIndexFunc(s[:cut+1], unicode.IsSpace); i > 0 {
		cut = i
	}
	return strings.TrimRightFunc(s[:cut], func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) + "…"
}

func byteIndexOfRune(s string, n int) int {
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}
