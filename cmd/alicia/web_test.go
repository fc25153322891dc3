package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/llm/standin"
	"github.com/alicia-voice/alicia/reasoning"
	"github.com/alicia-voice/alicia/speech"
	speechstandin "github.com/alicia-voice/alicia/speech/standin"
	"github.com/alicia-voice/alicia/wire"
)

// The long answer gives the tests time to stop it or to drop the
// connection in the middle of it.
const longAnswer = "Once upon a time there was a lighthouse keeper named Ada. Every night she climbed one hundred steps to light the lamp. " +
	"One stormy evening the lamp would not light. Ada found that a gull had built a nest inside the lantern room. " +
	"She moved the nest to a sheltered ledge, lit the lamp and watched the ships pass safely. " +
	"The gull returned in the morning and sat beside her on the ledge. From then on they kept the light together. " +
	"Sailors along the coast still tell the story of the keeper and her bird."

const moonAnswer = "The moon is about three hundred and eighty four thousand kilometres from the earth. " +
	"Light covers that distance in a little more than one second. " +
	"Its orbit is not a perfect circle, so the distance changes by about fifty thousand kilometres over a month. " +
	"The astronauts of Apollo eleven needed three days to get there. " +
	"The moon is also moving away from us, by about four centimetres every year."

var webScenarios = []standin.Scenario{{
	Name:  "story",
	Match: "(?i)story",
	Rounds: []standin.Round{{
		Reasoning: []string{
			"The user wants a story. A short one about a lighthouse will do, with a clear beginning, middle and end.",
			"I will keep the sentences simple so that they read well aloud.",
		},
		Answer: longAnswer,
	}},
}, {
	// Long enough to be still speaking when the voice test talks over it;
	// it would think for 8 s, longer than a spoken turn's budget.
	Name:  "moon",
	Match: "(?i)moon",
	Rounds: []standin.Round{{
		Reasoning:   []string{"The user asks about the distance to the moon."},
		ReasonForMs: 8000,
		Answer:      moonAnswer,
	}},
}, {
	// Its first sentence is never synthesised (heldSynthesis): the text
	// reaches the page, and none of it is ever heard.
	Name:   "held",
	Match:  "(?i)quietly",
	Rounds: []standin.Round{{Answer: "This answer is " + heldMarker + " before a word of it is heard. Its text reaches the page all the same."}},
}, {
	Name:  "failure",
	Match: "(?i)break",
	Rounds: []standin.Round{{
		Answer: "Here is the start of an answer that never ends.",
		Fault:  &standin.Fault{Kind: "error", AfterTokens: 6, Message: "out of GPU memory"},
	}},
}}

// webServer starts alicia serve as a newcomer would (its own
// livekit-server, no database) with the stand-in at a pace a person can
// watch, and returns the page's address and access key.
// args are more flags for alicia serve.
func webServer(t *testing.T, args ...string) (string, string) {
	t.Helper()
	if _, err := lkserver.Binary(); err != nil {
		testenv.StartLiveKit(t) // fails (or skips) with the reason
	}
	testenv.Chromium(t)
	base, srv, ln, err := standinServer("127.0.0.1:0", webScenarios, standin.Pacing{TTFTMs: 50, TokenMs: 25, Jitter: 0.2}, nil, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for k, v := range map[string]string{"ALICIA_LIVEKIT_URL": "", "ALICIA_DATABASE_URL": "", "ALICIA_TOKEN_SECRET": "", "ALICIA_LIVEKIT_API_SECRET": "",
		"ALICIA_LLM_URL": base + "/vllm/v1", "ALICIA_LLM_MODEL": "Qwen3-8B", "ALICIA_LLM_BACKEND": "openai"} {
		t.Setenv(k, v)
	}
	out := serveForTest(t, append([]string{"-http-addr", "127.0.0.1:0"}, args...)...)
	m := waitFor(t, out, "the web client's link", regexp.MustCompile(`(http://\S+)/#key=(\S+)`))
	return m[1], m[2]
}

type pageAnswer struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Done    bool   `json:"done"`
	Open    *bool  `json:"open"`
	Stopped bool   `json:"stopped"`
	Failed  bool   `json:"failed"`
	// Voice is how far the answer's audio got (speaking, heard, cut);
	// Interrupted says the page shows its interruption.
	Voice       string `json:"voice"`
	Interrupted bool   `json:"interrupted"`
	Steps       []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Lines int    `json:"lines"`
	} `json:"steps"`
}

type snapshot struct {
	At    float64 `json:"at"`
	Open  *bool   `json:"open"`
	Steps []struct {
		Index   int    `json:"index"`
		Text    string `json:"text"`
		Partial bool   `json:"partial"`
	} `json:"steps"`
	Text string  `json:"text"`
	Top  float64 `json:"top"`
	Done bool    `json:"done"`
}

// envelopes decodes the Alicia envelopes a page received ("in") or sent
// ("out") from its data-channel capture.
func envelopes(t *testing.T, pkts []testenv.CapturedPacket, dir string) []*wire.Envelope {
	t.Helper()
	var out []*wire.Envelope
	for _, p := range testenv.UserPackets(pkts) {
		if p.Dir != dir || p.Topic != "alicia" {
			continue
		}
		env, err := wire.Unmarshal(p.Payload)
		if err != nil {
			t.Errorf("the page %s an envelope Go cannot decode: %v", map[string]string{"in": "received", "out": "sent"}[dir], err)
			continue
		}
		out = append(out, env)
	}
	return out
}

func count(envs []*wire.Envelope, typ wire.Type) int {
	n := 0
	for _, e := range envs {
		if e.Type() == typ {
			n++
		}
	}
	return n
}

// metric reads a counter from the server's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return counterIn(t, string(body), name)
}

// counterIn reads a counter from a /metrics page.
func counterIn(t *testing.T, page, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// norm is what a recogniser's words are compared by: lower case, without
// punctuation.
func norm(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(c rune) rune {
		if strings.ContainsRune("?.,!", c) {
			return -1
		}
		return c
	}, strings.ToLower(s))), " ")
}

func defaultAnswer(q string) string {
	return `You said: "` + q + `". I am Alicia's stand-in model, so this is a canned reply. Set ALICIA_LLM_URL to a Qwen3 server for real answers.`
}

// The web client in Chromium against alicia serve, livekit-server and the
// stand-in: each subtest is one person's session in the browser.
func TestWebClient(t *testing.T) {
	url, key := webServer(t)
	res, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(page), `<script type="module" src="app.js">`) {
		t.Fatalf("GET / gave %d:\n%s", res.StatusCode, page)
	}
	input := func(name, scenario string) map[string]any {
		return map[string]any{"url": url, "key": key, "name": name, "scenario": scenario,
			"question": "What is a lighthouse?", "question2": "And who keeps it?", "long": "Tell me a story, please.", "offlineMs": 2500,
			// It thinks for 8 s: long enough to be stopped while it thinks on
			// a machine so busy that a click takes half a second.
			"thinksLong": "How far is the moon?",
			"failing":    "Please break.",
			// A microphone without a person: Chromium's fake capture device,
			// allowed without a prompt.
			"chromiumArgs": []string{"--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"}}
	}

	t.Run("answer", func(t *testing.T) {
		var r struct {
			Final        pageAnswer               `json:"final"`
			Timeline     []snapshot               `json:"timeline"`
			Reopened     bool                     `json:"reopened"`
			Packets      []testenv.CapturedPacket `json:"packets"`
			PhoneHistory pageAnswer               `json:"phoneHistory"`
			Overflow     bool                     `json:"overflow"`
			Shots        []string                 `json:"shots"`
		}
		testenv.Browser(t, context.Background(), "web-client.mjs", input("Ana María", "answer"), &r)
		t.Logf("screenshots: %v", r.Shots)
		want := defaultAnswer("What is a lighthouse?")
		if words(r.Final.Text) != want {
			t.Errorf("answer %q, want %q", r.Final.Text, want)
		}
		if len(r.Final.Steps) < 2 {
			t.Fatalf("the panel has %d steps, want several", len(r.Final.Steps))
		}
		for i, s := range r.Final.Steps {
			if s.Index != i+1 {
				t.Errorf("step %d is labelled %d", i+1, s.Index)
			}
		}
		if r.Final.Open == nil || *r.Final.Open {
			t.Error("the reasoning panel is not collapsed once the answer is there")
		}
		if !r.Reopened {
			t.Error("the reasoning panel did not open from the keyboard")
		}
		// The timeline: steps 1..n fill the open panel in order, a step
		// grows in place, then the sentences come with the panel closed.
		var maxSteps, texts int
		grew, openWhileThinking := false, false
		lastText := ""
		top := -1.0
		grown := map[int]string{}
		for _, s := range r.Timeline {
			if len(s.Steps) < maxSteps {
				t.Fatalf("steps went from %d to %d", maxSteps, len(s.Steps))
			}
			maxSteps = len(s.Steps)
			for i, st := range s.Steps {
				if st.Index != i+1 {
					t.Fatalf("the panel showed step %d in place %d", st.Index, i+1)
				}
				if old, ok := grown[st.Index]; ok && len(st.Text) > len(old) && strings.HasPrefix(st.Text, strings.TrimSuffix(old, "…")[:min(len(old), 10)]) {
					grew = true
				}
				grown[st.Index] = st.Text
			}
			if s.Text == "" && len(s.Steps) > 0 && s.Open != nil && *s.Open {
				openWhileThinking = true
			}
			if s.Text != "" {
				if s.Open == nil || *s.Open {
					t.Fatalf("the panel is open while the answer streams: %+v", s)
				}
				if !strings.HasPrefix(want, words(s.Text)) {
					t.Fatalf("the answer showed %q, not a beginning of %q", s.Text, want)
				}
				if s.Text != lastText {
					texts++
					lastText = s.Text
				}
				if top < 0 {
					top = s.Top
				} else if s.Top != top {
					t.Errorf("the answer's text moved from %v to %v while it streamed", top, s.Top)
				}
			}
		}
		if len(r.Timeline) > 0 {
			// Figures, not assertions: when the page showed what, counted
			// from the first step on screen.
			t0, firstStep, firstText, done := r.Timeline[0].At, -1.0, -1.0, -1.0
			for _, s := range r.Timeline {
				if firstStep < 0 && len(s.Steps) > 0 {
					firstStep = s.At - t0
				}
				if firstText < 0 && s.Text != "" {
					firstText = s.At - t0
				}
				if done < 0 && s.Done {
					done = s.At - t0
				}
			}
			t.Logf("page timeline (stand-in at 25 ms a token): first step at %.0f ms, first sentence at %.0f ms, answer complete at %.0f ms, %d DOM changes",
				firstStep, firstText, done, len(r.Timeline))
		}
		if !openWhileThinking {
			t.Error("the panel was never open with steps while Alicia was thinking")
		}
		if !grew {
			t.Error("no step grew in place while it was being written")
		}
		if texts < 3 {
			t.Errorf("the answer appeared in %d pieces, want it sentence by sentence", texts)
		}
		in := envelopes(t, r.Packets, "in")
		if count(in, wire.TypeReasoningStep) == 0 || count(in, wire.TypeAssistantSentence) < 3 {
			t.Errorf("capture: %d steps, %d sentences", count(in, wire.TypeReasoningStep), count(in, wire.TypeAssistantSentence))
		}
		out := envelopes(t, r.Packets, "out")
		for i, e := range out {
			if e.StanzaID != int32(i+1) {
				t.Errorf("the page's envelope %d has stanza %d; clients count 1, 2, 3…", i+1, e.StanzaID)
			}
		}
		if len(out) == 0 || out[0].Type() != wire.TypeConfiguration {
			t.Errorf("the page did not start with its Configuration: %v", out)
		}
		// Reopened on a phone: the earlier turn with its stored reasoning.
		if words(r.PhoneHistory.Text) != want || len(r.PhoneHistory.Steps) != len(r.Final.Steps) {
			t.Errorf("the reopened page shows %q with %d steps", r.PhoneHistory.Text, len(r.PhoneHistory.Steps))
		}
		if r.Overflow {
			t.Error("the phone layout scrolls sideways")
		}
	})

	t.Run("preference", func(t *testing.T) {
		var r struct {
			AfterReload   string                   `json:"afterReload"`
			OffAnswer     pageAnswer               `json:"offAnswer"`
			OffPackets    []testenv.CapturedPacket `json:"offPackets"`
			OtherDevice   string                   `json:"otherDevice"`
			SummaryAnswer pageAnswer               `json:"summaryAnswer"`
			SummaryPacket []testenv.CapturedPacket `json:"summaryPackets"`
			Shots         []string                 `json:"shots"`
		}
		testenv.Browser(t, context.Background(), "web-client.mjs", input("bob", "preference"), &r)
		t.Logf("screenshots: %v", r.Shots)
		if r.AfterReload != "off" {
			t.Errorf("after a reload the page shows %q, want off", r.AfterReload)
		}
		if r.OtherDevice != "off" {
			t.Errorf("another device shows %q, want off", r.OtherDevice)
		}
		in := envelopes(t, r.OffPackets, "in")
		if n := count(in, wire.TypeReasoningStep); n != 0 || len(r.OffAnswer.Steps) != 0 {
			t.Errorf("with reasoning off the page received %d ReasoningStep envelopes and shows %d steps", n, len(r.OffAnswer.Steps))
		}
		if count(in, wire.TypeAssistantSentence) < 3 || words(r.OffAnswer.Text) != defaultAnswer("What is a lighthouse?") {
			t.Errorf("the capture holds %d sentences; the page shows %q", count(in, wire.TypeAssistantSentence), r.OffAnswer.Text)
		}
		if len(r.SummaryAnswer.Steps) < 2 {
			t.Fatalf("summary shows %d steps", len(r.SummaryAnswer.Steps))
		}
		for _, s := range r.SummaryAnswer.Steps {
			if s.Lines != 1 {
				t.Errorf("summary step %d takes %d lines: %q", s.Index, s.Lines, s.Text)
			}
		}
		for _, e := range envelopes(t, r.SummaryPacket, "in") {
			if st, ok := e.Body.(*wire.ReasoningStep); ok && !st.Partial {
				if utf8.RuneCountInString(st.Content) > reasoning.SummaryMaxRunes || st.Content != reasoning.Summarize(st.Content) {
					t.Errorf("a summary step is not one short sentence: %q", st.Content)
				}
			}
		}
	})

	t.Run("controls", func(t *testing.T) {
		var r struct {
			StoppedThinking  pageAnswer               `json:"stoppedThinking"`
			StoppedAnswering pageAnswer               `json:"stoppedAnswering"`
			StoppedLater     string                   `json:"stoppedLater"`
			Third            pageAnswer               `json:"third"`
			Regenerated      pageAnswer               `json:"regenerated"`
			Position         string                   `json:"position"`
			Previous         pageAnswer               `json:"previous"`
			PreviousPosition string                   `json:"previousPosition"`
			Next             pageAnswer               `json:"next"`
			Packets          []testenv.CapturedPacket `json:"packets"`
			Shots            []string                 `json:"shots"`
		}
		testenv.Browser(t, context.Background(), "web-client.mjs", input("carol", "controls"), &r)
		t.Logf("screenshots: %v", r.Shots)
		if !r.StoppedThinking.Stopped || r.StoppedThinking.Text != "" {
			t.Errorf("stopped while thinking: %+v", r.StoppedThinking)
		}
		if !r.StoppedAnswering.Stopped || r.StoppedAnswering.Text == "" || !strings.HasPrefix(longAnswer, words(r.StoppedAnswering.Text)) || words(r.StoppedAnswering.Text) == longAnswer {
			t.Errorf("stopped while answering: %+v", r.StoppedAnswering)
		}
		if r.StoppedLater != r.StoppedAnswering.Text {
			t.Errorf("the stopped answer went on: %q, then %q", r.StoppedAnswering.Text, r.StoppedLater)
		}
		if r.Position != "2 / 2" || r.PreviousPosition != "1 / 2" {
			t.Errorf("variant positions %q then %q", r.Position, r.PreviousPosition)
		}
		if r.Regenerated.ID == r.Third.ID || r.Regenerated.ID == "" {
			t.Errorf("regenerate gave the same answer id %q", r.Regenerated.ID)
		}
		if r.Previous.ID != r.Third.ID || r.Previous.Text != r.Third.Text || r.Next.ID != r.Regenerated.ID {
			t.Errorf("paging: previous %q (want %q), next %q (want %q)", r.Previous.ID, r.Third.ID, r.Next.ID, r.Regenerated.ID)
		}
		out := envelopes(t, r.Packets, "out")
		stops, variations := 0, 0
		for _, e := range out {
			switch b := e.Body.(type) {
			case *wire.ControlStop:
				stops++
				if b.StopType != wire.StopAll {
					t.Errorf("stop type %q", b.StopType)
				}
			case *wire.ControlVariation:
				variations++
				if b.Mode != wire.VariationRegenerate {
					t.Errorf("variation mode %q", b.Mode)
				}
			}
		}
		if stops != 2 || variations != 1 {
			t.Errorf("the page sent %d stops and %d variations", stops, variations)
		}
	})

	t.Run("voice and errors", func(t *testing.T) {
		var r struct {
			MicPressed string                   `json:"micPressed"`
			MicTrack   string                   `json:"micTrack"`
			MicMuted   string                   `json:"micMuted"`
			Error      string                   `json:"error"`
			Failed     pageAnswer               `json:"failed"`
			Packets    []testenv.CapturedPacket `json:"packets"`
			Shots      []string                 `json:"shots"`
		}
		testenv.Browser(t, context.Background(), "web-client.mjs", input("erin", "extras"), &r)
		t.Logf("screenshots: %v", r.Shots)
		if r.MicPressed != "true" || r.MicTrack == "" || r.MicMuted != "false" {
			t.Errorf("microphone: pressed %q, published track %q, after muting %q", r.MicPressed, r.MicTrack, r.MicMuted)
		}
		var audio []bool
		for _, e := range envelopes(t, r.Packets, "out") {
			if c, ok := e.Body.(*wire.Configuration); ok {
				audio = append(audio, slices.Contains(c.Features, wire.FeatureAudioOutput))
			}
		}
		if len(audio) < 2 || !audio[0] || audio[len(audio)-1] {
			t.Errorf("audio_output in the page's Configurations: %v; want it on, then off once Alicia is muted", audio)
		}
		if !strings.Contains(r.Error, "The assistant is unavailable.") || !strings.Contains(r.Error, "out of GPU memory") {
			t.Errorf("the failure reads %q", r.Error)
		}
		if !r.Failed.Done || !r.Failed.Failed || !strings.HasPrefix("Here is the start of an answer that never ends.", words(r.Failed.Text)) {
			t.Errorf("the failed answer: %+v", r.Failed)
		}
	})

	t.Run("reconnect", func(t *testing.T) {
		var r struct {
			Before    pageAnswer `json:"before"`
			Final     pageAnswer `json:"final"`
			Sentences [][][2]any `json:"sentences"`
			Resumed   pageAnswer `json:"resumed"`
			PageStats struct {
				Received map[string]int `json:"received"`
				Applied  map[string]int `json:"applied"`
			} `json:"pageStats"`
			Packets []testenv.CapturedPacket `json:"packets"`
			Shots   []string                 `json:"shots"`
		}
		replayedBefore := metric(t, url, "alicia_room_envelopes_replayed_total")
		testenv.Browser(t, context.Background(), "web-client.mjs", input("dan", "reconnect"), &r)
		// What the page missed while it was offline reached it by replay.
		if replayed := metric(t, url, "alicia_room_envelopes_replayed_total") - replayedBefore; replayed == 0 {
			t.Error("the server replayed nothing after the drop")
		}
		t.Logf("screenshots: %v", r.Shots)
		if r.Before.Done || words(r.Before.Text) == longAnswer {
			t.Fatalf("the connection dropped after the answer was complete: %+v", r.Before)
		}
		if words(r.Final.Text) != longAnswer {
			t.Errorf("after the drop the answer reads %q\nwant %q", r.Final.Text, longAnswer)
		}
		if len(r.Sentences) != 1 {
			t.Fatalf("the question has %d answers, want one", len(r.Sentences))
		}
		seqs := map[float64]bool{}
		for _, kv := range r.Sentences[0] {
			seqs[kv[0].(float64)] = true
		}
		for i := 1; i <= len(seqs); i++ {
			if !seqs[float64(i)] {
				t.Errorf("sentence %d is missing from %v", i, seqs)
			}
		}
		if words(r.Resumed.Text) != longAnswer {
			t.Errorf("after a resumed connection the answer reads %q", r.Resumed.Text)
		}
		t.Logf("sentences received %d, applied %d", r.PageStats.Received["16"], r.PageStats.Applied["16"])
		// The page asked for what it missed: a second Configuration with
		// the last stanza it saw, answered by a replay.
		var resumed bool
		for _, e := range envelopes(t, r.Packets, "out") {
			if c, ok := e.Body.(*wire.Configuration); ok && c.LastSequenceSeen > 0 {
				resumed = true
			}
		}
		if !resumed {
			t.Error("the page never resumed with lastSequenceSeen")
		}
	})
}

// levelSample is one reading of the page's audio: its microphone and the
// audio it receives from Alicia (RMS over the last 20 ms, 0..1, from
// WebAudio analysers on the tracks), with the bot's lk.agent.state.
type levelSample struct {
	At     float64 `json:"at"`
	Mic    float64 `json:"mic"`
	Remote float64 `json:"remote"`
	State  string  `json:"state"`
	// Echo is the part of the microphone that is Alicia's own voice,
	// where a test plays it back.
	Echo float64 `json:"echo"`
	// Steps and Answer are what the first turn shows: its reasoning
	// steps, and its answer's length in characters; Cut, whether it
	// shows its interruption.
	Steps  int  `json:"steps"`
	Answer int  `json:"answer"`
	Cut    bool `json:"cut"`
}

// silentFrom is the first sample from at on after which Alicia's audio
// stays below audible for half a second; -1 if it never does.
func silentFrom(samples []levelSample, at float64) float64 {
	for i, s := range samples {
		if s.At < at || s.Remote >= audible {
			continue
		}
		quiet := true
		for _, n := range samples[i:] {
			if n.At > s.At+500 {
				break
			}
			if n.Remote >= audible {
				quiet = false
				break
			}
		}
		if quiet {
			return s.At
		}
	}
	return -1
}

// audible is the RMS above which a sample counts as sound: about -40
// dBFS, well above the quiet room's noise the test plays around its
// speech, well below espeak-ng's voice.
const audible = 0.01

// runs are the stretches of samples where level says sound, with gaps
// shorter than gapMs (the pauses between words) bridged.
func runs(samples []levelSample, level func(levelSample) float64, gapMs float64) [][2]float64 {
	var out [][2]float64
	for _, s := range samples {
		if level(s) < audible {
			continue
		}
		if n := len(out); n > 0 && s.At-out[n-1][1] <= gapMs {
			out[n-1][1] = s.At
			continue
		}
		out = append(out, [2]float64{s.At, s.At})
	}
	return out
}

// The voice half of the web client: Chromium's fake microphone plays an
// espeak-ng question, a pause, then an interruption, and later a hum. The
// page shows the question's transcription, receives Alicia's spoken
// answer on its audio track (measured in the page with WebAudio), and
// speaking over the answer stops it: the page shows at once the answer
// cut where its audio stopped, marked interrupted, as the server stores
// it. The hum over the next answer only pauses it: it resumes and is
// heard to the end, unmarked.
func TestWebClientVoice(t *testing.T) {
	testenv.RealTime(t)
	testenv.SpeechEngines(t)
	question, interruption := "How far is the moon?", "What is the weather like in Paris today?"
	dir := t.TempDir()
	phrases := filepath.Join(dir, "phrases.txt")
	if err := os.WriteFile(phrases, []byte(question+"\n"+interruption+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_STT_URL", "")
	t.Setenv("ALICIA_TTS_URL", "")
	url, key := webServer(t, "-speech-standin-phrases", phrases)

	// What the microphone hears: a quiet room, the question, a pause in
	// which the answer starts, the interruption, the room while its
	// answer starts, a hum over that answer ("mm-hm", no word in it),
	// then the room again. Chromium plays the file once from when the
	// page opens the microphone (%noloop).
	const rate = 48000
	// The answer is heard about 4.5 s after the question (the model thinks
	// for its 3 s budget) and its first sentence lasts 4.7 s: 11 s falls
	// inside the second, not in the pause between them.
	pauseMs := 11000
	// The interruption's answer is heard about 4 s after it (it thinks
	// for the budget too) and lasts about 10 s: 8 s falls in its first
	// half, with most of it still to come.
	humAfterMs := 8000
	var pcm []int16
	pcm = append(pcm, speechtest.Noise(1500, rate, 1)...)
	pcm = append(pcm, speechtest.Render(t, question, 140, rate)...)
	pcm = append(pcm, speechtest.Noise(pauseMs, rate, 2)...)
	pcm = append(pcm, speechtest.Render(t, interruption, 140, rate)...)
	pcm = append(pcm, speechtest.Noise(humAfterMs, rate, 3)...)
	// Shorter than the 500 ms that would make it an interruption by
	// itself.
	pcm = append(pcm, speechtest.Hum(400, rate)...)
	// The room goes on until the page is done listening: past the file's
	// end the microphone is digitally silent, and a run that reached it
	// while Alicia still spoke saw her paused by talk nobody made.
	pcm = append(pcm, speechtest.Noise(30000, rate, 4)...)
	wav := filepath.Join(dir, "microphone.wav")
	if err := os.WriteFile(wav, speech.EncodeWAV(pcm, rate), 0o600); err != nil {
		t.Fatal(err)
	}

	var r struct {
		Question     string     `json:"question"`
		Interruption string     `json:"interruption"`
		First        pageAnswer `json:"first"`
		Second       pageAnswer `json:"second"`
		// Cut is the first answer as the page showed it the moment its
		// audio was cut.
		Cut      pageAnswer `json:"cut"`
		Reopened struct {
			Question string     `json:"question"`
			First    pageAnswer `json:"first"`
			Second   pageAnswer `json:"second"`
		} `json:"reopened"`
		Captions []string      `json:"captions"`
		Samples  []levelSample `json:"samples"`
		Shots    []string      `json:"shots"`
	}
	testenv.Browser(t, context.Background(), "web-client.mjs", map[string]any{
		"url": url, "key": key, "name": "fay", "scenario": "voice",
		"chromiumArgs": []string{"--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
			"--use-file-for-fake-audio-capture=" + wav + "%noloop"},
	}, &r)
	t.Logf("screenshots: %v", r.Shots)
	t.Logf("live captions seen: %q", r.Captions)

	// The live caption is the user's words only: with the recogniser
	// limited to the two phrases, any other word is Alicia's speech
	// shown as if the user had said it.
	vocabulary := map[string]bool{}
	for _, w := range strings.Fields(norm(question + " " + interruption)) {
		vocabulary[w] = true
	}
	for _, c := range r.Captions {
		for _, w := range strings.Fields(norm(c)) {
			if !vocabulary[w] {
				t.Errorf("the live caption showed %q, which the user did not say", c)
				break
			}
		}
	}
	if norm(r.Question) != norm(question) {
		t.Errorf("the page shows the spoken question as %q, want %q", r.Question, question)
	}
	if norm(r.Interruption) != norm(interruption) {
		t.Errorf("the page shows the interruption as %q, want %q", r.Interruption, interruption)
	}
	if !r.First.Done || r.First.Text == "" || !strings.HasPrefix(moonAnswer, words(r.First.Text)) {
		t.Errorf("the answer to the spoken question: %+v", r.First)
	}
	// Reopened, the page shows the interrupted answer as stored: the
	// words heard, and stopped.
	heardText := words(r.Reopened.First.Text)
	if !r.Reopened.First.Stopped || heardText == "" || !strings.HasPrefix(moonAnswer, heardText) || heardText == words(moonAnswer) {
		t.Errorf("reopened, the interrupted answer reads %q (stopped %v); want what was heard of %q", r.Reopened.First.Text, r.Reopened.First.Stopped, moonAnswer)
	}
	t.Logf("heard before the interruption: %q", heardText)
	if words(r.Reopened.Question) != words(r.Question) || r.Reopened.Second.Text != r.Second.Text {
		t.Errorf("reopened, the page shows %+v", r.Reopened)
	}
	if !r.Second.Done || r.Second.Text == "" {
		t.Errorf("the interruption's answer: %+v", r.Second)
	}
	// Live, before any reload, the page showed the interrupted answer as
	// the server stores it: the words heard, marked interrupted.
	if r.Cut.Voice != "cut" || !r.Cut.Interrupted || words(r.Cut.Text) != heardText {
		t.Errorf("as its audio was cut, the page showed the answer as %q (voice %q, interrupted mark %v); stored: %q", r.Cut.Text, r.Cut.Voice, r.Cut.Interrupted, heardText)
	}
	if r.First.Voice != "cut" || !r.First.Interrupted || words(r.First.Text) != heardText {
		t.Errorf("once both turns ended, the page showed the interrupted answer as %+v; stored: %q", r.First, heardText)
	}
	// The hum over the second answer only paused it: heard to its end and
	// shown whole and unmarked, live and as stored.
	whole := words(defaultAnswer(r.Interruption))
	if r.Second.Voice != "heard" || r.Second.Interrupted || r.Second.Stopped || words(r.Second.Text) != whole || r.Reopened.Second.Stopped {
		t.Errorf("the answer the hum fell on: %+v, reopened %+v; want it whole and unmarked: %q", r.Second, r.Reopened.Second, whole)
	}
	if n := metric(t, url, `alicia_voice_talk_over_total{outcome="false_interruption"}`); n < 1 {
		t.Errorf("%v false interruptions counted: the hum never paused Alicia", n)
	} else {
		t.Logf("%v false interruptions counted", n)
	}

	mic := runs(r.Samples, func(s levelSample) float64 { return s.Mic }, 400)
	heard := runs(r.Samples, func(s levelSample) float64 { return s.Remote }, 400)
	t.Logf("%d samples; microphone speech at %v; Alicia heard at %v (ms since the page loaded)", len(r.Samples), mic, heard)
	if len(mic) != 3 {
		t.Fatalf("the page's microphone carried %d utterances, want the question, the interruption and the hum", len(mic))
	}
	qEnd, bargeIn := mic[0][1], mic[1][0]
	humStart, humEnd := mic[2][0], mic[2][1]
	var answerStart float64 = -1
	for _, h := range heard {
		if h[0] > qEnd {
			answerStart = h[0]
			break
		}
	}
	if answerStart < 0 {
		t.Fatal("the page never received audible audio from Alicia after the question")
	}
	// The interruption must fall while Alicia speaks, or it interrupts
	// nothing. Her audio pauses at the speech's onset, which her VAD may
	// hear before the page's level meter crosses its threshold: the run
	// of her audio may end just before the measured start.
	speaking, runEnd := false, 0.0
	for _, h := range heard {
		if h[0] <= bargeIn && bargeIn <= h[1]+700 {
			speaking, runEnd = true, h[1]
		}
	}
	if !speaking {
		t.Fatalf("Alicia was not speaking when the interruption began at %.0f ms (answer audible from %.0f ms): heard %v", bargeIn, answerStart, heard)
	}
	// The hum too must fall on her speech, and her audio come back after
	// it: the page receives her voice again.
	humOver := false
	pausedFrom, resumedAt := -1.0, -1.0
	for _, h := range heard {
		if h[0] <= humStart && humStart <= h[1]+700 {
			humOver, pausedFrom = true, h[1]
		}
	}
	for _, s := range r.Samples {
		if s.At > humEnd && s.Remote >= audible {
			resumedAt = s.At
			break
		}
	}
	if !humOver || resumedAt < 0 {
		t.Fatalf("the hum at %.0f–%.0f ms fell on no speech of Alicia's, or her audio never came back after it (from %.0f ms): heard %v", humStart, humEnd, resumedAt, heard)
	}
	// Silence: the first sample after the barge-in from which the bot's
	// audio stays below the threshold for half a second; and when
	// lk.agent.state left speaking.
	silentAt, stateLeft := silentFrom(r.Samples, bargeIn), -1.0
	for _, s := range r.Samples {
		if s.At >= bargeIn && s.State != "" && s.State != "speaking" {
			stateLeft = s.At
			break
		}
	}
	if silentAt < 0 {
		t.Fatal("Alicia's audio in the page never went silent after the interruption")
	}
	if stateLeft < 0 {
		t.Error("lk.agent.state never left speaking after the interruption")
	}
	// While the model thinks, the page shows its steps filling as the
	// thinking cue plays; the answer follows.
	var cueFrom, cueTo *levelSample
	for i := range r.Samples {
		s := &r.Samples[i]
		if s.At > qEnd && s.Remote >= audible && s.Answer == 0 {
			if cueFrom == nil {
				cueFrom = s
			}
			cueTo = s
		}
	}
	firstWords := -1.0
	for _, s := range r.Samples {
		if s.At > qEnd && s.Answer > 0 {
			firstWords = s.At
			break
		}
	}
	if cueFrom == nil || cueTo.Steps <= cueFrom.Steps || firstWords < 0 {
		t.Errorf("no steps filling while the cue played (cue %+v → %+v), or no answer shown (%.0f ms)", cueFrom, cueTo, firstWords)
	} else {
		t.Logf("the cue played from %.0f ms after the question while the steps went from %d to %d; the answer's first words shown %.0f ms after it",
			cueFrom.At-qEnd, cueFrom.Steps, cueTo.Steps, firstWords-qEnd)
	}
	markedAt := -1.0
	for _, s := range r.Samples {
		if s.At >= bargeIn && s.Cut {
			markedAt = s.At
			break
		}
	}
	// Figures, not assertions.
	t.Logf("voice in the page: end of the spoken question → first audible output %.0f ms; barge-in start → silence %.0f ms (her audio's last audible sample %+.0f ms from the start); → lk.agent.state %q %.0f ms; → interruption shown %.0f ms",
		answerStart-qEnd, silentAt-bargeIn, runEnd-bargeIn, stateAt(r.Samples, stateLeft), stateLeft-bargeIn, markedAt-bargeIn)
	t.Logf("the hum from %.0f to %.0f ms: her audio's last audible sample before it %+.0f ms from its start, audible again %.0f ms after its end",
		humStart, humEnd, pausedFrom-humStart, resumedAt-humEnd)
}

// heldMarker is in the first sentence of the held scenario's answer.
const heldMarker = "kept back"

// heldSynthesis serves the speech stand-in's synthesis, except that a
// sentence with marker in it is held until the caller gives up on it: an
// answer that starts with it is spoken, and never heard.
func heldSynthesis(t *testing.T, marker string) string {
	t.Helper()
	testenv.SpeechEngines(t)
	sp, err := speechstandin.New(speechstandin.Config{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sp.Close() })
	next := sp.Handler()
	released := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/audio/speech") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Input string `json:"input"`
			}
			if json.Unmarshal(body, &req) == nil && strings.Contains(req.Input, marker) {
				select {
				case <-r.Context().Done():
				case <-released:
				}
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(released) })
	return srv.URL + "/v1"
}

// cutBeforeAWordScript asks the held question, waits for its answer's
// text, asks the next question over the answer nobody heard yet, and
// waits for that one to be heard to its end: the held answer's
// transcript goes out before the next one's on the same ordered channel,
// so by then the page has all it will ever learn of the held one. Then
// it reads what the server stored.
const cutBeforeAWordScript = `(async () => {
  const c = window.alicia;
` + pageTyping + `  const until = async (f, what) => {
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline) {
      const v = f();
      if (v) return v;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('waited in vain for ' + what + ': ' + JSON.stringify([answerOf(0), answerOf(1)]));
  };
  const answerOf = (i) => window.__answerOf(document.querySelectorAll('li.turn')[i]);
  await typeAndEnter(%q);
  const before = await until(() => { const a = answerOf(0); return a && a.done && a.text !== '' && a; }, 'the held answer');
  await typeAndEnter(%q);
  const next = await until(() => { const a = answerOf(1); return a && a.done && a.voice === 'heard' && a; }, 'the next answer heard');
  const cut = answerOf(0);
  const grant = await c.token();
  const history = await c.history(grant.token);
  return { before, cut, next, stored: history ? history.messages : [] };
})()`

// Talk over an answer before any word of it was heard: its text reached
// the page, its audio never played. The page then shows it as the server
// stores it, live: nothing heard, marked interrupted; and the next
// answer, heard whole, unmarked.
func TestWebClientCutBeforeAWord(t *testing.T) {
	testenv.RealTime(t)
	t.Setenv("ALICIA_STT_URL", "")
	t.Setenv("ALICIA_TTS_URL", "")
	tts := heldSynthesis(t, heldMarker)
	url, key := webServer(t, "-tts-url", tts, "-tts-format", "pcm", "-tts-stream-format", "sse", "-tts-pcm-rate", strconv.Itoa(speechstandin.PCMRate))
	const q1, q2 = "Answer me quietly.", "What is a lighthouse?"
	r := testenv.OpenPage(t, context.Background(), testenv.Page{
		URL:          url + "/",
		LocalStorage: map[string]string{"alicia.key": key, "alicia.name": "gus"},
		WaitFor:      `window.alicia && window.alicia.state.status === 'ready' && document.querySelector('#message')`,
		Evaluate:     fmt.Sprintf(cutBeforeAWordScript, q1, q2),
		Screenshot:   "web-cut-before-a-word",
	})
	type shown struct {
		ID, Text, Voice            string
		Done, Interrupted, Stopped bool
	}
	var v struct {
		Before, Cut, Next shown
		Stored            []struct {
			ID, Role, Content, Status string
		}
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("%v: %s", err, r.Value)
	}
	held := webScenarios[slices.IndexFunc(webScenarios, func(s standin.Scenario) bool { return s.Name == "held" })].Rounds[0].Answer
	if words(v.Before.Text) != held || v.Before.ID == "" {
		t.Fatalf("before the next question the page showed %+v; want the held answer's text %q", v.Before, held)
	}
	stored := map[string]string{}
	status := map[string]string{}
	for _, m := range v.Stored {
		stored[m.ID], status[m.ID] = m.Content, m.Status
	}
	content, ok := stored[v.Before.ID]
	if !ok {
		t.Fatalf("the held answer %s is not stored: %+v", v.Before.ID, v.Stored)
	}
	if content != "" || status[v.Before.ID] != "stopped" {
		t.Errorf("stored, the held answer reads %q (%s); nothing of it was heard", content, status[v.Before.ID])
	}
	if v.Cut.ID != v.Before.ID || v.Cut.Voice != "cut" || !v.Cut.Interrupted || words(v.Cut.Text) != words(content) {
		t.Errorf("spoken over before a word was heard, the page shows the answer as %+v; stored: %q", v.Cut, content)
	}
	if words(v.Next.Text) != defaultAnswer(q2) || v.Next.Interrupted || v.Next.Stopped || words(stored[v.Next.ID]) != words(v.Next.Text) {
		t.Errorf("the next answer, heard whole: %+v; stored %q", v.Next, stored[v.Next.ID])
	}
}

func stateAt(samples []levelSample, at float64) string {
	for _, s := range samples {
		if s.At == at {
			return s.State
		}
	}
	return ""
}

// pageTyping types into the page's message box and presses Enter, as a
// user does, letting the page render after each step.
const pageTyping = `
  const box = document.querySelector('#message');
  const setValue = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set;
  const settle = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const typeAndEnter = async (text) => {
    box.focus();
    setValue.call(box, text);
    box.dispatchEvent(new Event('input', { bubbles: true }));
    await settle();
    box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', code: 'Enter', bubbles: true, cancelable: true }));
    await settle();
  };
`

// queuedScript types two messages into the page and presses Enter after
// each while the page waits for its bot, reads the conversation, then
// brings the bot (the token endpoint dispatches one to a room that has a
// user and no bot) and waits for both answers.
const queuedScript = `(async () => {
  const c = window.alicia;
` + pageTyping + `  const turns = () => [...document.querySelectorAll('li.turn')].map((li) => {
    const u = li.querySelector('[data-testid=user-message]');
    const a = li.querySelector('[data-testid=answer]');
    return {
      text: u.querySelector('p').textContent,
      queued: u.dataset.queued === 'true',
      note: u.querySelector('[data-testid=queued]')?.textContent || '',
      answer: a?.querySelector('[data-testid=answer-text]')?.textContent || '',
      done: a?.dataset.done === 'true',
    };
  });
  const statusAtEnter = c.state.status;
  const agentAtEnter = c.agentSid() !== '';
  await typeAndEnter(%q);
  const boxAfterEnter = box.value;
  await typeAndEnter(%q);
  const queued = turns();
  const statusQueued = c.state.status;
  const out = { statusAtEnter, agentAtEnter, boxAfterEnter, queued, statusQueued };
  if (queued.length === 0) return out;
  const res = await fetch('/v1/token', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + localStorage.getItem('alicia.key') },
    body: JSON.stringify({ identity: 'dana-elsewhere', room: c.state.conversationId }),
  });
  out.tokenStatus = res.status;
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    const t = turns();
    if (t.length === 2 && t.every((x) => x.done)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  out.answered = turns();
  return out;
})()`

// Enter pressed right after joining, before the bot is ready, queues the
// message visibly and sends it once the bot has greeted the page, in the
// order typed. The room exists before the page joins it, so joining
// dispatches no bot: the page is not ready when it is typed into, by
// construction, until the test brings the bot.
func TestWebClientQueuesMessagesUntilReady(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	url, key := webServer(t, "-livekit-url", lk.URL, "-livekit-api-key", lk.APIKey, "-livekit-api-secret", lk.APISecret)
	const conv = "conv_web_queued"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lksdk.NewRoomServiceClient(lk.URL, lk.APIKey, lk.APISecret).CreateRoom(ctx, &livekit.CreateRoomRequest{Name: conv, EmptyTimeout: 120}); err != nil {
		t.Fatal(err)
	}
	const q1, q2 = "What is a lighthouse?", "And who keeps it?"
	r := testenv.OpenPage(t, context.Background(), testenv.Page{
		URL: url + "/",
		// A returning user: the page joins at once, into conv. Alicia is
		// muted: the second message would cut the first answer's speech,
		// and the page would show that answer as heard, at a word that
		// depends on timing (TestWebClientVoice covers that).
		LocalStorage: map[string]string{"alicia.key": key, "alicia.name": "dana", "alicia.conversation.dana": strconv.Quote(conv), "alicia.speaker": "false"},
		WaitFor:      `window.alicia && window.alicia.state.status === 'waiting' && document.querySelector('#message')`,
		Evaluate:     fmt.Sprintf(queuedScript, q1, q2),
		Screenshot:   "web-queued.png",
	})
	type turn struct {
		Text, Note, Answer string
		Queued, Done       bool
	}
	var v struct {
		StatusAtEnter, StatusQueued string
		AgentAtEnter                bool
		BoxAfterEnter               string
		Queued, Answered            []turn
		TokenStatus                 int
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		t.Fatalf("%v: %s", err, r.Value)
	}
	if v.StatusAtEnter != "waiting" || v.AgentAtEnter || v.StatusQueued != "waiting" {
		t.Fatalf("the test typed with the page %q (bot there: %v), then %q; it must not be ready yet", v.StatusAtEnter, v.AgentAtEnter, v.StatusQueued)
	}
	if v.BoxAfterEnter != "" {
		t.Errorf("after Enter the box still holds %q", v.BoxAfterEnter)
	}
	if len(v.Queued) != 2 || v.Queued[0].Text != q1 || v.Queued[1].Text != q2 {
		t.Fatalf("before the bot was ready the conversation shows %+v, want both messages in order", v.Queued)
	}
	for _, q := range v.Queued {
		if !q.Queued || !strings.Contains(q.Note, "when Alicia is ready") || q.Answer != "" {
			t.Errorf("a message typed before the bot was ready is not shown as waiting: %+v", q)
		}
	}
	if v.TokenStatus != http.StatusOK {
		t.Fatalf("bringing the bot: POST /v1/token gave %d", v.TokenStatus)
	}
	if len(v.Answered) != 2 {
		t.Fatalf("after the bot came the conversation shows %+v", v.Answered)
	}
	for i, q := range []string{q1, q2} {
		a := v.Answered[i]
		if a.Text != q || a.Queued || a.Note != "" || !a.Done || words(a.Answer) != defaultAnswer(q) {
			t.Errorf("turn %d once the bot was ready: %+v", i+1, a)
		}
	}
	// On the wire: the page's Configuration, after the bot's greeting,
	// then the two messages in the order typed.
	var sent []string
	for _, e := range envelopes(t, r.Packets, "out") {
		switch b := e.Body.(type) {
		case *wire.Configuration:
			if len(sent) > 0 {
				continue // a settings update after the messages
			}
			sent = append(sent, "Configuration")
		case *wire.UserMessage:
			sent = append(sent, b.Content)
		}
	}
	if !slices.Equal(sent, []string{"Configuration", q1, q2}) {
		t.Errorf("the page sent %q; want its Configuration, then the messages in order", sent)
	}
}
