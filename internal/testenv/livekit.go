package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/lkserver"
)

var quietSDK sync.Once

// LiveKit is a livekit-server started for one test.
type LiveKit struct {
	*lkserver.Server
}

// StartLiveKit starts a livekit-server on free ports with a fresh key and
// secret, waits until it accepts connections and stops it when the test
// ends.
func StartLiveKit(t testing.TB) *LiveKit {
	t.Helper()
	// The SDK logs every ICE state change; test output wants only failures.
	quietSDK.Do(func() { lksdk.SetLogger(protoLogger.GetDiscardLogger()) })
	if _, err := lkserver.Binary(); err != nil {
		Unavailable(t, "%v", err)
	}
	if _, err := lkserver.NodeIP(); err != nil {
		Unavailable(t, "%v", err)
	}
	s, err := lkserver.StartFresh(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("livekit-server output (last lines):\n%s", s.Logs.String())
		}
		// Killed, not stopped: it holds nothing to save, and a SIGTERM
		// makes it wait out its 2 s grace.
		s.Kill()
	})
	return &LiveKit{s}
}

// Dispatch asks LiveKit to send the agent named agent to room, as an
// operator would through its API.
func (lk *LiveKit) Dispatch(t testing.TB, agent, room string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lksdk.NewAgentDispatchServiceClient(lk.URL, lk.APIKey, lk.APISecret).
		CreateDispatch(ctx, &livekit.CreateAgentDispatchRequest{AgentName: agent, Room: room}); err != nil {
		t.Fatalf("dispatching %s to %s: %v", agent, room, err)
	}
}
