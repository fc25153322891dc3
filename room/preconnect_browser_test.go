package room

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	speechclient "github.com/alicia-voice/alicia/speech"
)

// A question asked in a browser before the agent is in the room is
// answered: a page enables its microphone with livekit-client's
// pre-connect buffer, as LiveKit's starters do, while it connects to a
// room without an agent; Chromium's fake microphone plays the question;
// once it is said the agent is sent for. livekit-client then sends its
// MediaRecorder's WebM/Opus recording, cut short of its last chunk, and
// the live microphone carries only silence: the answer can only come
// from the recording.
func TestPreconnectFromChromium(t *testing.T) {
	testenv.RealTime(t)
	lk := testenv.StartLiveKit(t)
	const question, conv = "How far is the moon?", "conv_preconnect_chromium"
	a, store := preconnectAgent(t, lk, question)

	const rate = 48000
	speech := slices.Concat(speechtest.Silence(300, rate), speechtest.Render(t, question, 140, rate), speechtest.Silence(300, rate))
	wav := filepath.Join(t.TempDir(), "question.wav")
	if err := os.WriteFile(wav, speechclient.EncodeWAV(speech, rate), 0o600); err != nil {
		t.Fatal(err)
	}
	grant := &auth.VideoGrant{RoomJoin: true, Room: conv}
	token, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity("alice").SetVideoGrant(grant).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := testenv.NodeDir()
	files := map[string]string{
		"/":                      "preconnect-page.html",
		"/livekit-client.umd.js": "node_modules/livekit-client/dist/livekit-client.umd.js",
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/dispatch" {
			if _, err := a.dispatch.CreateDispatch(r.Context(), &livekit.CreateAgentDispatchRequest{AgentName: a.cfg.AgentName, Room: conv}); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
			}
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(f, ".js") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		http.ServeFile(w, r, filepath.Join(dir, f))
	}))
	defer page.Close()

	var out struct {
		Answer string `json:"answer"`
	}
	testenv.Browser(t, ctx, "preconnect-browser.mjs", map[string]any{
		"page": page.URL + "/", "url": lk.URL, "token": token, "answerPrefix": "You said",
		"speakMs": len(speech) * 1000 / rate,
		"chromiumArgs": []string{"--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
			"--use-file-for-fake-audio-capture=" + wav + "%noloop"},
	}, &out)
	t.Logf("the agent began to say %q", out.Answer)
	wantQuestionHeard(ctx, t, store, conv, question)
}
