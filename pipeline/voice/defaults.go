package voice

import "time"

// The turn-taking settings' defaults, for the flags (Config.Flags) and for
// a field left zero (withDefaults). Config's and EndpointConfig's fields
// say where each comes from.
const (
	defaultMinInterruption   = 2 * time.Second
	defaultFalseInterruption = 2 * time.Second
	defaultCueAfter          = time.Second
	defaultEchoWarmup        = 0
	defaultMinSpeech         = 120 * time.Millisecond
	defaultUnpitchedSpeech   = 500 * time.Millisecond
	defaultSilence           = 500 * time.Millisecond
	defaultUnfinishedSilence = 1500 * time.Millisecond
	defaultAdaptiveMin       = 250 * time.Millisecond
)
