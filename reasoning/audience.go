package reasoning

import (
	"context"
	"slices"
	"sync"

	"github.com/alicia-voice/alicia/wire"
)

// Audience is who is in a room, as the reasoning sees them: each member's
// identity and whether its client takes partial steps. Modes come from
// Preferences at every step, so a change made in any room applies from the
// next step on in every room the user is in, and in every room the user
// joins later.
type Audience struct {
	prefs   Preferences
	mu      sync.Mutex
	partial map[string]bool
}

// NewAudience follows one room's members. prefs.Mode is asked at every
// step and must answer from memory (storage's implementation caches).
func NewAudience(prefs Preferences) *Audience {
	return &Audience{prefs: prefs, partial: map[string]bool{}}
}

// Join adds a member; until its client configures itself it receives
// steps in its remembered mode, complete ones only. Join reads the
// remembered mode once, so that steps never wait for it.
func (a *Audience) Join(ctx context.Context, identity string) error {
	_, err := a.prefs.Mode(ctx, identity)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.partial[identity]; !ok {
		a.partial[identity] = false
	}
	return err
}

// Leave removes a member.
func (a *Audience) Leave(identity string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.partial, identity)
}

// Configure applies a client's Configuration features: its reasoning mode
// (remembered for the user) and whether it takes partial steps. It returns
// the reasoning features in effect, for the server's Configuration reply.
func (a *Audience) Configure(ctx context.Context, identity string, features []string) ([]string, error) {
	mode := ModeFromFeatures(features)
	if err := a.prefs.SetMode(ctx, identity, mode); err != nil {
		return nil, err
	}
	partial := slices.Contains(features, wire.FeaturePartialReasoning)
	a.mu.Lock()
	a.partial[identity] = partial
	a.mu.Unlock()
	return mode.Features(partial), nil
}

// Viewers is the members with their current modes; Deliverer asks it when
// a step opens.
func (a *Audience) Viewers() []Viewer {
	a.mu.Lock()
	members := make([]Viewer, 0, len(a.partial))
	for id, p := range a.partial {
		members = append(members, Viewer{Identity: id, Partial: p})
	}
	a.mu.Unlock()
	for i := range members {
		m, err := a.prefs.Mode(context.Background(), members[i].Identity)
		if err != nil || !m.Valid() {
			m = ModeOff // never show reasoning to someone who may not want it
		}
		members[i].Mode = m
	}
	slices.SortFunc(members, func(x, y Viewer) int {
		if x.Identity < y.Identity {
			return -1
		}
		if x.Identity > y.Identity {
			return 1
		}
		return 0
	})
	return members
}
