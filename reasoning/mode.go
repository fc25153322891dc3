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
	// ModeUnset: the user never chose; the operator's default applies.
	ModeUnset Mode = ""
	// ModeOff: the user receives no reasoning at all.
	ModeOff Mode = "off"
	// ModeSummary: each step reduced to its first sentence.
	ModeSummary Mode = "summary"
	// ModeFull: each step as the model wrote it.
	ModeFull Mode = "full"
)

// ModeFromFeatures reads what a client can display from its features:
// reasoning steps for full, reasoning_summary for summary, neither for
// off. It is a capability, not the user's wish (see Preference).
func ModeFromFeatures(f wire.Features) Mode {
	switch {
	case f.ReasoningSteps:
		return ModeFull
	case f.ReasoningSummary:
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

// PreferenceFeature is the feature stating m as the user's preference.
func PreferenceFeature(m Mode) string {
	return wire.FeatureChoice(wire.FeatureReasoningPreference, string(m))
}

// PreferenceFromFeatures finds an explicit "set my preference" among a
// client's features; ok is false when there is none (or it is invalid).
func PreferenceFromFeatures(f wire.Features) (m Mode, ok bool) {
	m = Mode(f.ReasoningPreference)
	return m, m.Valid()
}

// Cap limits m to what a client can display: the lesser of the two.
func (m Mode) Cap(limit Mode) Mode {
	rank := func(x Mode) int { return slices.Index([]Mode{ModeOff, ModeSummary, ModeFull}, x) }
	if rank(limit) < rank(m) {
		return limit
	}
	if rank(m) < 0 {
		return ModeOff
	}
	return m
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
