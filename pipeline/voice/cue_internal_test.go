package voice

import (
	"testing"

	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/wire"
)

// With several clients the quietest cue asked for wins; an unknown one
// is not a choice.
func TestAskedCue(t *testing.T) {
	member := func(features ...string) pipeline.Member {
		return pipeline.Member{Features: wire.ParseFeatures(features)}
	}
	for _, tc := range []struct {
		members []pipeline.Member
		want    CueMode
	}{
		{nil, ""},
		{[]pipeline.Member{member(wire.FeatureAudioOutput)}, ""},
		{[]pipeline.Member{member("thinking_cue:sound"), member("thinking_cue:off")}, CueOff},
		{[]pipeline.Member{member("thinking_cue:phrase"), member("thinking_cue:sound")}, CuePhrase},
		{[]pipeline.Member{member("thinking_cue:loud")}, ""},
	} {
		if got := askedCue(tc.members); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.members, got, tc.want)
		}
	}
}
