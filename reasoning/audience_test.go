package reasoning

import (
	"context"
	"slices"
	"testing"

	"github.com/alicia-voice/alicia/wire"
)

// A preference set in one room is remembered for the user: it applies in
// another room the user is already in and in a room joined later.
func TestPreferenceFollowsTheUser(t *testing.T) {
	ctx := context.Background()
	prefs := NewMemory()
	roomA, roomB := NewAudience(prefs), NewAudience(prefs)
	roomA.Join(ctx, "alice")
	roomB.Join(ctx, "alice")
	roomB.Join(ctx, "bob")
	if v := roomA.Viewers(); v[0].Mode != ModeOff {
		t.Fatalf("default mode %s, want off", v[0].Mode)
	}
	eff, err := roomA.Configure(ctx, "alice", []string{wire.FeatureStreaming, wire.FeatureReasoningSummary, wire.FeaturePartialReasoning})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(eff, []string{wire.FeatureReasoningSummary, wire.FeaturePartialReasoning}) {
		t.Fatalf("effective features %v", eff)
	}
	if v := roomB.Viewers(); v[0] != (Viewer{Identity: "alice", Mode: ModeSummary}) || v[1].Mode != ModeOff {
		t.Fatalf("room B sees %+v", v)
	}
	roomC := NewAudience(prefs)
	roomC.Join(ctx, "alice")
	if v := roomC.Viewers(); v[0].Mode != ModeSummary {
		t.Fatalf("a room joined later sees %+v", v)
	}
	// A Configuration with neither feature turns reasoning off.
	if eff, _ := roomC.Configure(ctx, "alice", []string{wire.FeatureStreaming}); eff != nil {
		t.Fatalf("effective features %v", eff)
	}
	if v := roomA.Viewers(); v[0].Mode != ModeOff || !v[0].Partial {
		t.Fatalf("room A sees %+v", v)
	}
	roomA.Leave("alice")
	if len(roomA.Viewers()) != 0 {
		t.Fatal("a member that left is still a viewer")
	}
}
