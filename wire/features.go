package wire

import (
	"slices"
	"strings"
)

// Feature names in Configuration.features. A client states what it can
// display and what it chooses; the server states what is in effect.
const (
	FeatureStreaming          = "streaming"
	FeaturePartialResponses   = "partial_responses"
	FeatureAudioOutput        = "audio_output"
	FeatureReasoningSteps     = "reasoning_steps"
	FeatureToolUse            = "tool_use"
	FeatureReasoningDisplay   = "reasoning_step_display"
	FeaturePartialTranscripts = "partial_transcripts"
	// Alicia's own: reasoning reduced to one sentence per step, and steps
	// re-sent with partial:true while they grow.
	FeatureReasoningSummary = "reasoning_summary"
	FeaturePartialReasoning = "partial_reasoning"

	// Choices are stated as name:value (FeatureChoice). Sent by a client,
	// reasoning_preference:<off|summary|full> sets the user's stored
	// preference; stated by the server, it reports it.
	FeatureReasoningPreference = "reasoning_preference"
	// How the model thinks on the client's own turns, spoken and typed
	// apart: on, off or budget.
	FeatureVoiceThinking = "voice_thinking"
	FeatureTypedThinking = "typed_thinking"
	// What plays while the model thinks: sound, phrase or off.
	FeatureThinkingCue = "thinking_cue"

	// Stated by the server alone. awaiting_configuration marks a greeting
	// to a client whose features are unknown: it is asked for a
	// Configuration before its messages are answered.
	// assumed_configuration marks a Configuration to a client that never
	// sent one and is served with the deployment's assumed features, each
	// listed as assumed:<feature>; the client's own Configuration replaces
	// them like any settings update.
	FeatureAwaitingConfiguration = "awaiting_configuration"
	FeatureAssumedConfiguration  = "assumed_configuration"
	FeatureAssumed               = "assumed"
)

// FeatureChoice is the feature that states value for the choice name
// ("thinking_cue:off").
func FeatureChoice(name, value string) string { return name + ":" + value }

// Features is what a client announced, read once where it arrives (its
// Configuration, or its alicia.features participant attribute) and
// handed on as this value. A choice holds its value as stated ("" when
// none was); whoever owns the setting checks it and ignores one it does
// not know, as it ignores a feature missing.
type Features struct {
	Streaming          bool
	PartialResponses   bool
	AudioOutput        bool
	ReasoningSteps     bool // reasoning_steps, or the specification's reasoning_step_display
	ReasoningSummary   bool
	PartialReasoning   bool
	ToolUse            bool
	PartialTranscripts bool

	ReasoningPreference string
	VoiceThinking       string
	TypedThinking       string
	ThinkingCue         string

	// Unknown are the features this server does not understand, first
	// ones first, without repeats, at most maxUnknown. Like an unknown
	// message type they change nothing; they are kept for the logs and so
	// that List gives back what was stated.
	Unknown []string
}

// maxUnknown bounds what an odd client can make the server keep.
const maxUnknown = 16

// flags and choices are the features Features knows, in List's order.
var flags = []struct {
	name string
	of   func(*Features) *bool
}{
	{FeatureStreaming, func(f *Features) *bool { return &f.Streaming }},
	{FeaturePartialResponses, func(f *Features) *bool { return &f.PartialResponses }},
	{FeatureAudioOutput, func(f *Features) *bool { return &f.AudioOutput }},
	{FeatureReasoningSteps, func(f *Features) *bool { return &f.ReasoningSteps }},
	{FeatureReasoningSummary, func(f *Features) *bool { return &f.ReasoningSummary }},
	{FeaturePartialReasoning, func(f *Features) *bool { return &f.PartialReasoning }},
	{FeatureToolUse, func(f *Features) *bool { return &f.ToolUse }},
	{FeaturePartialTranscripts, func(f *Features) *bool { return &f.PartialTranscripts }},
}

var choices = []struct {
	name string
	of   func(*Features) *string
}{
	{FeatureReasoningPreference, func(f *Features) *string { return &f.ReasoningPreference }},
	{FeatureVoiceThinking, func(f *Features) *string { return &f.VoiceThinking }},
	{FeatureTypedThinking, func(f *Features) *string { return &f.TypedThinking }},
	{FeatureThinkingCue, func(f *Features) *string { return &f.ThinkingCue }},
}

// ParseFeatures reads a Configuration's features. Names match exactly,
// around spaces; a choice stated twice takes its last value.
func ParseFeatures(list []string) Features {
	var f Features
	for _, s := range list {
		f.add(s)
	}
	return f
}

// ParseFeatureList reads features written comma-separated, as in the
// alicia.features participant attribute.
func ParseFeatureList(list string) Features {
	return ParseFeatures(strings.Split(list, ","))
}

func (f *Features) add(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if s == FeatureReasoningDisplay {
		f.ReasoningSteps = true
		return
	}
	for _, k := range flags {
		if s == k.name {
			*k.of(f) = true
			return
		}
	}
	if name, value, ok := strings.Cut(s, ":"); ok {
		if value = strings.TrimSpace(value); value != "" {
			for _, k := range choices {
				if strings.TrimSpace(name) == k.name {
					*k.of(f) = value
					return
				}
			}
		}
	}
	if len(f.Unknown) < maxUnknown && !slices.Contains(f.Unknown, s) {
		f.Unknown = append(f.Unknown, s)
	}
}

// List writes the features as a Configuration states them: the known
// ones in a fixed order, then the unknown ones as they came.
func (f Features) List() []string {
	var out []string
	for _, k := range flags {
		if *k.of(&f) {
			out = append(out, k.name)
		}
	}
	for _, k := range choices {
		if v := *k.of(&f); v != "" {
			out = append(out, FeatureChoice(k.name, v))
		}
	}
	return append(out, f.Unknown...)
}
