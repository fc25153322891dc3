package testenv

import (
	"sync"
	"testing"

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
