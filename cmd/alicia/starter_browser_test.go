package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/speech"
)

// starterSite serves the starter page, bundled now into a temporary
// folder, and a token route like agent-starter-react's: a token for the
// room and identity asked, with the room configuration the page sends
// (which dispatches the agent by name), plus the recipe's one line, the
// grant to set its own attributes.
func starterSite(t *testing.T, lk *testenv.LiveKit) string {
	t.Helper()
	dir := t.TempDir()
	testenv.Node(t, nil, "starter/build.mjs", dir)
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServer(http.Dir(dir)))
	mux.HandleFunc("POST /api/token", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Room       string          `json:"room_name"`
			Identity   string          `json:"participant_identity"`
			RoomConfig json.RawMessage `json:"room_config"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Room == "" || body.Identity == "" {
			http.Error(w, "room_name and participant_identity, please", http.StatusBadRequest)
			return
		}
		cfg := &livekit.RoomConfiguration{}
		if len(body.RoomConfig) > 0 {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body.RoomConfig, cfg); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		grant := &auth.VideoGrant{RoomJoin: true, Room: body.Room}
		grant.SetCanUpdateOwnMetadata(true)
		tok, err := auth.NewAccessToken(lk.APIKey, lk.APISecret).SetIdentity(body.Identity).SetName(body.Identity).
			SetValidFor(15 * time.Minute).SetVideoGrant(grant).SetRoomConfig(cfg).ToJWT()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"serverUrl": lk.URL, "participantToken": tok})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

type pageStep struct {
	Index int    `json:"index"`
	Level string `json:"level"`
	Text  string `json:"text"`
}

type pageAsked struct {
	AnswerID string     `json:"answerId"`
	Text     string     `json:"text"`
	Steps    []pageStep `json:"steps"`
	Timeline []struct {
		At    float64 `json:"at"`
		Items []struct {
			Kind  string     `json:"kind"`
			Text  string     `json:"text"`
			Steps []pageStep `json:"steps"`
		} `json:"items"`
	} `json:"timeline"`
}

// wantSteps says what is wrong with the steps a page showed at mode.
func wantSteps(steps []pageStep, mode reasoning.Mode) string {
	want := starterSteps(mode)
	if len(steps) != len(want) {
		return "steps " + mustJSON(steps) + ", want " + mustJSON(want)
	}
	for i, s := range steps {
		if s.Index != i+1 || s.Text != want[i] || s.Level != string(mode) {
			return "steps " + mustJSON(steps) + ", want " + mustJSON(want)
		}
	}
	return ""
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// live says whether the page showed the reasoning while it was written:
// a step before the answer's transcript, and the first step shorter than
// it ended.
func live(a pageAsked) (before, grew bool) {
	for _, s := range a.Timeline {
		for _, it := range s.Items {
			if it.Kind == "thinking" && len(it.Steps) > 0 {
				before = true
			}
			if len(it.Steps) > 0 && it.Steps[0].Text != "" && len(it.Steps[0].Text) < len(starterReasoning[0]) && strings.HasPrefix(starterReasoning[0], it.Steps[0].Text) {
				grew = true
			}
		}
	}
	return before, grew
}

// A page built from components-react 2.9.20 as agent-starter-react builds
// it, with the docs/starters.md recipe: the reasoning appears live beside
// the answer at the level its toggle chose, and nothing when off; the
// choice survives a reload; two users in one room each get their own
// level; a user who says nothing is still in the call after 30 s.
func TestStarterReasoning(t *testing.T) {
	testenv.Chromium(t)
	lk, _ := starterServer(t)
	site := starterSite(t, lk)
	answer := starterScenarios[0].Rounds[0].Answer
	input := func(scenario, roomName string) map[string]any {
		return map[string]any{"url": site, "room": roomName, "scenario": scenario, "question": starterQuestion, "answer": answer, "silentMs": 30_000}
	}

	// The silent user mostly waits, so that wait runs beside the others,
	// which share ana's stored preference and so run one after the other.
	t.Run("silent user", func(t *testing.T) {
		t.Parallel()
		var r struct {
			Status    map[string]string `json:"status"`
			States    []string          `json:"states"`
			WatchedMs int               `json:"watchedMs"`
		}
		testenv.Browser(t, context.Background(), "starter-browser.mjs", input("silent", "starter_silent"), &r)
		t.Logf("after %d ms: %v; agent states shown %v", r.WatchedMs, r.Status, r.States)
		if r.Status["connection"] != "connected" || r.Status["agent"] != "listening" || r.Status["failure"] != "" {
			t.Errorf("after %d ms of silence: %v", r.WatchedMs, r.Status)
		}
	})
	t.Run("ana", func(t *testing.T) {
		t.Parallel()
		starterAna(t, input, answer)
	})
	_ = room.AttrReasoningStreams // the page sets it by name, as an app would
}

// starterAna: the levels ana's toggle chooses, then ana beside ben, each
// at their own level.
func starterAna(t *testing.T, input func(scenario, roomName string) map[string]any, answer string) {
	t.Run("levels", func(t *testing.T) {
		var r struct {
			Full           pageAsked `json:"full"`
			Off            pageAsked `json:"off"`
			Summary        pageAsked `json:"summary"`
			ReloadedToggle string    `json:"reloadedToggle"`
			Reloaded       pageAsked `json:"reloaded"`
		}
		testenv.Browser(t, context.Background(), "starter-browser.mjs", input("levels", "starter_levels"), &r)
		for _, c := range []struct {
			name string
			got  pageAsked
			mode reasoning.Mode
		}{{"full", r.Full, reasoning.ModeFull}, {"off", r.Off, reasoning.ModeOff}, {"summary", r.Summary, reasoning.ModeSummary}, {"after the reload", r.Reloaded, reasoning.ModeSummary}} {
			if problem := wantSteps(c.got.Steps, c.mode); problem != "" {
				t.Errorf("%s: %s", c.name, problem)
			}
			if strings.TrimSpace(c.got.Text) != answer {
				t.Errorf("%s: the answer reads %q", c.name, c.got.Text)
			}
		}
		if before, grew := live(r.Full); !before || !grew {
			t.Errorf("full reasoning not shown live: before the answer %v, growing %v", before, grew)
		}
		if r.ReloadedToggle != "summary" {
			t.Errorf("after the reload the toggle shows %q", r.ReloadedToggle)
		}
	})

	t.Run("two users", func(t *testing.T) {
		var r struct{ Ana, Ben pageAsked }
		testenv.Browser(t, context.Background(), "starter-browser.mjs", input("two", "starter_two"), &r)
		if problem := wantSteps(r.Ana.Steps, reasoning.ModeFull); problem != "" {
			t.Errorf("ana (full): %s", problem)
		}
		if problem := wantSteps(r.Ben.Steps, reasoning.ModeSummary); problem != "" {
			t.Errorf("ben (summary): %s", problem)
		}
	})
}

// By voice, through Chromium's fake microphone: the spoken question's
// reasoning appears beside its spoken answer, in full.
func TestStarterReasoningByVoice(t *testing.T) {
	testenv.RealTime(t)
	testenv.SpeechEngines(t)
	testenv.Chromium(t)
	dir := t.TempDir()
	phrases := filepath.Join(dir, "phrases.txt")
	if err := os.WriteFile(phrases, []byte(starterQuestion+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A quiet room while the page joins and its toggle is set, the
	// question, then the room until the answer is over.
	const rate = 48000
	var pcm []int16
	pcm = append(pcm, speechtest.Noise(8000, rate, 1)...)
	pcm = append(pcm, speechtest.Render(t, starterQuestion, 140, rate)...)
	pcm = append(pcm, speechtest.Noise(40000, rate, 2)...)
	wav := filepath.Join(dir, "microphone.wav")
	if err := os.WriteFile(wav, speech.EncodeWAV(pcm, rate), 0o600); err != nil {
		t.Fatal(err)
	}
	lk, _ := starterServer(t, "-speech-standin-phrases", phrases)
	site := starterSite(t, lk)
	answer := starterScenarios[0].Rounds[0].Answer
	var r struct {
		pageAsked
		Heard []string `json:"heard"`
	}
	testenv.Browser(t, context.Background(), "starter-browser.mjs", map[string]any{"url": site, "room": "starter_voice", "scenario": "voice", "answer": answer,
		"chromiumArgs": []string{"--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream", "--use-file-for-fake-audio-capture=" + wav + "%noloop"}}, &r)
	t.Logf("the page heard %q; the answer %q with %d steps", r.Heard, r.Text, len(r.Steps))
	if problem := wantSteps(r.Steps, reasoning.ModeFull); problem != "" {
		t.Error(problem)
	}
	if before, _ := live(r.pageAsked); !before {
		t.Error("the reasoning was not shown before the answer")
	}
}
