package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// The handshake in every join order and client family (issue 16): a
// client sends its Configuration once, right after connecting, which
// reaches nobody when the bot is not in the room yet; what it can display
// must reach the bot anyway, through its participant attributes.

// handshakeRig is a livekit-server, a bot with the engine and the
// stand-in model, and the HTTP API a client asks for its token.
type handshakeRig struct {
	lk    *testenv.LiveKit
	cfg   room.Config
	api   *httptest.Server
	store storage.Store
}

func newHandshakeRig(t *testing.T) *handshakeRig {
	lk := testenv.StartLiveKit(t)
	s, _ := standin.New(nil, standin.Pacing{TTFTMs: 5, TokenMs: 1}, nil)
	model := httptest.NewServer(s.Handler())
	t.Cleanup(model.Close)
	client, _ := llm.New(llm.Config{Backend: "openai", URL: model.URL + "/vllm/v1", Model: "Qwen3-8B"})
	store := storage.NewMemory(storage.ReasoningPlain)
	cfg := room.Config{LiveKitURL: lk.URL, APIKey: lk.APIKey, APISecret: lk.APISecret, AgentName: "alicia-handshake", TokenSecret: "test-token-secret"}
	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	engine := pipeline.NewEngine(pipeline.Config{LLM: client, Thinking: true, Logger: log}, store)
	agent := room.NewAgent(cfg, store, room.NewMetrics(nil), func(id string) room.Conversation { return engine.Open(id) }, log)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/token", agent.TokenHandler())
	mux.Handle("/v1/preferences", storage.PreferenceHandler(store, room.BearerIdentity(cfg.APIKey, cfg.APISecret), engine.Preference, engine.ReasoningDefault()))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-agent.Registered()
	return &handshakeRig{lk: lk, cfg: cfg, api: api, store: store}
}

// askToken is what a client does: POST /v1/token with its features and
// maybe a preference, which the token carries as attributes.
func (r *handshakeRig) askToken(t *testing.T, roomName, identity string, features []string, pref reasoning.Mode) string {
	body, _ := json.Marshal(map[string]any{"room": roomName, "identity": identity, "features": features, "reasoningPreference": pref})
	req, _ := http.NewRequest(http.MethodPost, r.api.URL+"/v1/token", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.cfg.TokenSecret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Token, Error string }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/token: %d %v %s", res.StatusCode, err, out.Error)
	}
	return out.Token
}

// undispatchedToken is a token like POST /v1/token's (same attributes)
// whose room configuration dispatches no bot: the test dispatches it
// once the client is in, which forces "client before bot".
func (r *handshakeRig) undispatchedToken(t *testing.T, roomName, identity string, attrs map[string]string) string {
	grant := &auth.VideoGrant{RoomJoin: true, Room: roomName}
	grant.SetCanUpdateOwnMetadata(true)
	at := auth.NewAccessToken(r.cfg.APIKey, r.cfg.APISecret).SetIdentity(identity).SetValidFor(time.Hour).SetVideoGrant(grant)
	if len(attrs) > 0 {
		at.SetAttributes(attrs)
	}
	tok, err := at.ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (r *handshakeRig) dispatch(t *testing.T, roomName string) {
	r.lk.Dispatch(t, r.cfg.AgentName, roomName)
}

// botFirst creates the room with its dispatch and waits until the bot is
// in it.
func (r *handshakeRig) botFirst(t *testing.T, roomName string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rooms := lksdk.NewRoomServiceClient(r.lk.URL, r.cfg.APIKey, r.cfg.APISecret)
	if _, err := rooms.CreateRoom(ctx, &livekit.CreateRoomRequest{Name: roomName, EmptyTimeout: 60,
		Agents: []*livekit.RoomAgentDispatch{{AgentName: r.cfg.AgentName}}}); err != nil {
		t.Fatalf("create room: %v", err)
	}
	for ctx.Err() == nil {
		res, err := rooms.ListParticipants(ctx, &livekit.ListParticipantsRequest{Room: roomName})
		if err == nil && slices.ContainsFunc(res.Participants, func(p *livekit.ParticipantInfo) bool { return p.Kind == livekit.ParticipantInfo_AGENT }) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the bot did not join the room it was dispatched to")
}

// clientOpts is what one client does; the JavaScript clients read the
// same fields (handshake-logic.mjs).
type clientOpts struct {
	URL        string            `json:"url"`
	Token      string            `json:"token"`
	Room       string            `json:"room"`
	Features   []string          `json:"features"`   // sent once in a Configuration at connect; nil: none
	Attributes map[string]string `json:"attributes"` // set with setAttributes at connect
	Question   string            `json:"question"`
	// AnswerAsked: the Configuration to send when the bot says it waits
	// for one (202); nil: the client ignores it.
	AnswerAsked []string `json:"answerAsked"`
	// Page: the browser client's page (browser family only).
	Page string `json:"page,omitempty"`
}

// clientResult is what a client received, as every family reports it.
type clientResult struct {
	GreetingFeatures []string   `json:"greetingFeatures"`
	Configurations   [][]string `json:"configurations"`
	Errors           []struct {
		Code    int32  `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
	Acks              int      `json:"acks"`
	StartAnswers      int      `json:"startAnswers"`
	Sentences         []string `json:"sentences"`
	AssistantMessages int      `json:"assistantMessages"`
	FinalSteps        []string `json:"finalSteps"`
	PartialSteps      int      `json:"partialSteps"`
	Undecodable       int      `json:"undecodable"`
}

// family runs one client: connected is closed once its Configuration (if
// any) is out.
type family func(t *testing.T, o clientOpts, connected chan<- struct{}) clientResult

// goClient is a Go participant (server-sdk-go), doing what
// handshake-logic.mjs does.
func goClient(t *testing.T, o clientOpts, connected chan<- struct{}) clientResult {
	var mu sync.Mutex
	var got []*wire.Envelope
	notify := make(chan struct{}, 1)
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		if p, ok := data.(*lksdk.UserDataPacket); ok && p.Topic == room.Topic {
			env, err := wire.Unmarshal(p.Payload)
			if err != nil {
				t.Errorf("undecodable: %v", err)
				return
			}
			mu.Lock()
			got = append(got, env)
			mu.Unlock()
			select {
			case notify <- struct{}{}:
			default:
			}
		}
	}
	lr, err := lksdk.ConnectToRoomWithToken(o.URL, o.Token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Disconnect()
	var stanza int32
	send := func(b wire.Body) {
		stanza++
		payload, _ := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: o.Room, Body: b})
		if err := lr.LocalParticipant.PublishDataPacket(lksdk.UserData(payload), lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic(room.Topic)); err != nil {
			t.Fatal(err)
		}
	}
	until := func(what string, pred func([]*wire.Envelope) bool) {
		deadline := time.After(60 * time.Second)
		for {
			mu.Lock()
			envs := slices.Clone(got)
			mu.Unlock()
			if pred(envs) {
				return
			}
			select {
			case <-notify:
			case <-deadline:
				var types []string
				for _, x := range envs {
					types = append(types, fmt.Sprintf("%d:%s%v", x.StanzaID, x.Type(), x.Body))
				}
				t.Fatalf("timed out waiting for %s; got %s", what, strings.Join(types, " "))
			}
		}
	}
	if o.Attributes != nil {
		lr.LocalParticipant.SetAttributes(o.Attributes)
	}
	if o.Features != nil {
		send(&wire.Configuration{Features: o.Features})
	}
	close(connected)
	until("the bot's greeting", func(e []*wire.Envelope) bool {
		return slices.ContainsFunc(e, func(x *wire.Envelope) bool { _, ok := x.Body.(*wire.Configuration); return ok && x.StanzaID < 0 })
	})
	send(&wire.UserMessage{ID: "msg_q1", ConversationID: o.Room, Content: o.Question})
	reconfigured := false
	until("the answer", func(e []*wire.Envelope) bool {
		for _, x := range e {
			if m, ok := x.Body.(*wire.ErrorMessage); ok && m.Code == wire.CodeInvalidState && o.AnswerAsked != nil && !reconfigured {
				reconfigured = true
				send(&wire.Configuration{Features: o.AnswerAsked})
			}
		}
		return finalSentence(e) || has[*wire.AssistantMessage](e) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	var r clientResult
	for _, x := range got {
		switch b := x.Body.(type) {
		case *wire.Configuration:
			if r.GreetingFeatures == nil {
				r.GreetingFeatures = append([]string{}, b.Features...)
			}
			r.Configurations = append(r.Configurations, b.Features)
		case *wire.ErrorMessage:
			r.Errors = append(r.Errors, struct {
				Code    int32  `json:"code"`
				Message string `json:"message"`
			}{b.Code, b.Message})
		case *wire.Acknowledgement:
			r.Acks++
		case *wire.StartAnswer:
			r.StartAnswers++
		case *wire.AssistantSentence:
			r.Sentences = append(r.Sentences, b.Text)
		case *wire.AssistantMessage:
			r.AssistantMessages++
		case *wire.ReasoningStep:
			if b.Partial {
				r.PartialSteps++
			} else {
				r.FinalSteps = append(r.FinalSteps, b.Content)
			}
		}
	}
	return r
}

// nodeFamily runs a script of internal/testenv/node that prints
// "connected" and then the result as one JSON line. Its parts are checked
// here, on the test's goroutine: a client runs on one of its own.
func nodeFamily(t *testing.T, script string) family {
	node := testenv.NodePackages(t, testenv.NodeDir())
	return func(t *testing.T, o clientOpts, connected chan<- struct{}) clientResult {
		arg, _ := json.Marshal(o)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, filepath.Join(testenv.NodeDir(), script), string(arg))
		cmd.Dir = testenv.NodeDir()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var result clientResult
		var last string
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "connected" && !signalled:
				signalled = true
				close(connected)
			case strings.HasPrefix(line, "{"):
				last = line
			}
		}
		if err := cmd.Wait(); err != nil {
			if !signalled {
				close(connected)
			}
			t.Fatalf("%s: %v\n%s", script, err, stderr.String())
		}
		if err := json.Unmarshal([]byte(last), &result); err != nil {
			t.Fatalf("%s printed no result: %v\n%s", script, err, stderr.String())
		}
		return result
	}
}

// wantStreamedWithSteps checks a client that can display full reasoning
// and whose user wants it: streamed sentences, reasoning steps, and no
// sign of being taken for a featureless client.
func wantStreamedWithSteps(t *testing.T, r clientResult) {
	t.Helper()
	if r.StartAnswers != 1 || len(r.Sentences) == 0 || r.AssistantMessages != 0 {
		t.Fatalf("want one streamed answer; got %d StartAnswer, %d sentences, %d AssistantMessage", r.StartAnswers, len(r.Sentences), r.AssistantMessages)
	}
	if len(r.FinalSteps) == 0 {
		t.Fatalf("want reasoning steps; got none (greeting %v)", r.GreetingFeatures)
	}
	if r.Undecodable != 0 {
		t.Fatalf("%d undecodable envelopes", r.Undecodable)
	}
}

var displayFull = []string{wire.FeatureStreaming, wire.FeatureReasoningSteps}

const question = "Why is the sky blue?"

// joinOrders runs a client family in both join orders, and as a client
// that only sets attributes.
func joinOrders(t *testing.T, run family) {
	r := newHandshakeRig(t)
	t.Run("client before bot", func(t *testing.T) {
		name := "conv_hs_cfirst"
		o := clientOpts{URL: r.lk.URL, Room: name, Question: question, Features: displayFull,
			Token: r.undispatchedToken(t, name, "ann", map[string]string{room.AttrFeatures: strings.Join(displayFull, ",")})}
		res := r.withDispatchAfterConnect(t, name, run, o)
		wantStreamedWithSteps(t, res)
		if slices.Contains(res.GreetingFeatures, wire.FeatureAwaitingConfiguration) || len(res.Errors) != 0 {
			t.Fatalf("the bot knew the features from the token, yet: greeting %v, errors %v", res.GreetingFeatures, res.Errors)
		}
	})
	t.Run("bot before client", func(t *testing.T) {
		name := "conv_hs_bfirst"
		r.botFirst(t, name)
		o := clientOpts{URL: r.lk.URL, Room: name, Question: question, Features: displayFull,
			Token: r.askToken(t, name, "bea", displayFull, "")}
		res := run(t, o, make(chan struct{}))
		wantStreamedWithSteps(t, res)
	})
	t.Run("attributes only, client before bot", func(t *testing.T) {
		name := "conv_hs_attrs"
		o := clientOpts{URL: r.lk.URL, Room: name, Question: question,
			Attributes: map[string]string{room.AttrFeatures: strings.Join(displayFull, ",")},
			Token:      r.undispatchedToken(t, name, "ada", nil)}
		res := r.withDispatchAfterConnect(t, name, run, o)
		wantStreamedWithSteps(t, res)
	})
}

// withDispatchAfterConnect runs the client and dispatches the bot only
// once the client has sent its Configuration.
func (r *handshakeRig) withDispatchAfterConnect(t *testing.T, name string, run family, o clientOpts) clientResult {
	connected := make(chan struct{})
	results := make(chan clientResult, 1)
	go func() {
		defer close(results)
		results <- run(t, o, connected)
	}()
	select {
	case <-connected:
	case <-time.After(60 * time.Second):
		t.Fatal("the client did not connect")
	}
	r.dispatch(t, name)
	res, ok := <-results
	if !ok {
		t.FailNow()
	}
	return res
}

// browserFamily runs the handshake page in Chromium, served by the test
// with the npm builds of livekit-client and @msgpack/msgpack.
func browserFamily(t *testing.T) family {
	testenv.Chromium(t)
	dir := testenv.NodeDir()
	files := map[string]string{
		"/":                      "handshake-page.html",
		"/handshake-logic.mjs":   "handshake-logic.mjs",
		"/livekit-client.umd.js": "node_modules/livekit-client/dist/livekit-client.umd.js",
		"/msgpack.min.js":        "node_modules/@msgpack/msgpack/dist.umd/msgpack.min.js",
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		switch filepath.Ext(f) {
		case ".html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		default:
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		http.ServeFile(w, r, filepath.Join(dir, f))
	}))
	t.Cleanup(page.Close)
	run := nodeFamily(t, "handshake-browser.mjs")
	return func(t *testing.T, o clientOpts, connected chan<- struct{}) clientResult {
		o.Page = page.URL + "/"
		return run(t, o, connected)
	}
}

func TestHandshakeGoClient(t *testing.T) { joinOrders(t, goClient) }

func TestHandshakeBrowserClient(t *testing.T) { joinOrders(t, browserFamily(t)) }

func TestHandshakeRTCNodeClient(t *testing.T) { joinOrders(t, nodeFamily(t, "handshake-rtc-node.mjs")) }

// A client that cannot be known from attributes (its Configuration was
// lost, its token names no features) is asked, answers, and has its
// message answered once, streamed, with steps.
func TestHandshakeAsksForALostConfiguration(t *testing.T) {
	r := newHandshakeRig(t)
	name := "conv_hs_lost"
	o := clientOpts{URL: r.lk.URL, Room: name, Question: question, Features: displayFull, AnswerAsked: displayFull,
		Token: r.undispatchedToken(t, name, "lou", nil)}
	res := r.withDispatchAfterConnect(t, name, goClient, o)
	if !slices.Contains(res.GreetingFeatures, wire.FeatureAwaitingConfiguration) {
		t.Fatalf("greeting %v does not say it awaits a Configuration", res.GreetingFeatures)
	}
	if len(res.Errors) != 1 || res.Errors[0].Code != wire.CodeInvalidState || !strings.Contains(res.Errors[0].Message, "Configuration") {
		t.Fatalf("want one 202 naming the Configuration; got %+v", res.Errors)
	}
	wantStreamedWithSteps(t, res)
	if res.Acks != 1 {
		t.Fatalf("the message was acknowledged %d times", res.Acks)
	}
}

// What reaches a client is the user's preference limited to what the
// client can display; display features never change the preference.
func TestHandshakePreferenceAndDisplay(t *testing.T) {
	r := newHandshakeRig(t)
	run := func(name, identity string, features []string, pref reasoning.Mode) clientResult {
		r.botFirst(t, name)
		o := clientOpts{URL: r.lk.URL, Room: name, Question: question, Features: features, Token: r.askToken(t, name, identity, features, pref)}
		return goClient(t, o, make(chan struct{}))
	}
	full := run("conv_pref_full", "fay", displayFull, "")
	wantStreamedWithSteps(t, full)
	// The preference set through the token's attribute: summaries.
	sum := run("conv_pref_sum", "sue", displayFull, reasoning.ModeSummary)
	wantStreamedWithSteps(t, sum)
	if len(sum.FinalSteps) != len(full.FinalSteps) {
		t.Fatalf("%d summary steps for %d full ones", len(sum.FinalSteps), len(full.FinalSteps))
	}
	for i, s := range sum.FinalSteps {
		if s != reasoning.Summarize(full.FinalSteps[i]) {
			t.Fatalf("summary step %d: %q, want %q", i+1, s, reasoning.Summarize(full.FinalSteps[i]))
		}
	}
	// The same user on a client without a reasoning panel: no step (the
	// final sentence follows every step, so it is the barrier), and the
	// preference stays.
	phone := run("conv_pref_phone", "sue", []string{wire.FeatureStreaming}, "")
	if len(phone.FinalSteps) != 0 || phone.PartialSteps != 0 || len(phone.Sentences) == 0 {
		t.Fatalf("a client that cannot display reasoning: %d steps, %d partial, %d sentences", len(phone.FinalSteps), phone.PartialSteps, len(phone.Sentences))
	}
	if m, _ := r.store.Mode(context.Background(), "sue"); m != reasoning.ModeSummary {
		t.Fatalf("sue's preference after her phone: %q", m)
	}
	// Off, chosen through the HTTP API, with a client that can display.
	putPreference(t, r, "oz", reasoning.ModeOff, http.StatusOK)
	off := run("conv_pref_off", "oz", displayFull, "")
	if len(off.FinalSteps) != 0 || off.PartialSteps != 0 || len(off.Sentences) == 0 {
		t.Fatalf("preference off: %d steps, %d partial, %d sentences", len(off.FinalSteps), off.PartialSteps, len(off.Sentences))
	}
}

func userToken(t *testing.T, r *handshakeRig, identity string) string {
	tok, err := room.UserToken(r.cfg, "any", identity, identity, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func putPreference(t *testing.T, r *handshakeRig, identity string, m reasoning.Mode, want int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, r.api.URL+"/v1/preferences", strings.NewReader(fmt.Sprintf(`{"reasoning": %q}`, m)))
	req.Header.Set("Authorization", "Bearer "+userToken(t, r, identity))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("PUT preference %q for %s: %d, want %d", m, identity, res.StatusCode, want)
	}
}
