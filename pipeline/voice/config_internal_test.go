package voice

import (
	"flag"
	"reflect"
	"testing"
)

// A setting has one default: what the flags give unset is what a stage
// built in code gets for a field left zero.
func TestFlagDefaultsAreTheConfigDefaults(t *testing.T) {
	var flagged Config // registering a flag sets its default
	flagged.Flags(flag.NewFlagSet("serve", flag.PanicOnError))
	built := Config{}.withDefaults()
	built.Endpoint = built.Endpoint.withDefaults()
	for _, c := range []struct {
		name         string
		flag, config any
	}{
		{"voice-min-interruption", flagged.MinInterruption, built.MinInterruption},
		{"voice-false-interruption", flagged.FalseInterruption, built.FalseInterruption},
		{"voice-echo-warmup", flagged.EchoWarmup, built.EchoWarmup},
		{"voice-thinking-cue", flagged.Cue, built.Cue},
		{"voice-cue-after", flagged.CueAfter, built.CueAfter},
		{"voice-min-speech", flagged.Endpoint.MinSpeech, built.Endpoint.MinSpeech},
		{"voice-endpoint-silence", flagged.Endpoint.Silence, built.Endpoint.Silence},
		{"voice-endpoint-unfinished-silence", flagged.Endpoint.UnfinishedSilence, built.Endpoint.UnfinishedSilence},
		{"voice-endpoint-adaptive-min", flagged.Endpoint.AdaptiveMin, Config{Endpoint: EndpointConfig{AdaptiveMax: flagged.Endpoint.AdaptiveMax}}.Endpoint.withDefaults().AdaptiveMin},
	} {
		if !reflect.DeepEqual(c.flag, c.config) {
			t.Errorf("-%s defaults to %v, a zero field to %v", c.name, c.flag, c.config)
		}
	}
}
