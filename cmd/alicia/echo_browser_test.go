package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/internal/testenv"
)

// The web client on a phone on speaker: the page opens its microphone
// raw, Chromium's echo cancellation off, and the microphone hears the
// bot's voice as the page plays it, 150 ms later at -10 dB through a
// room. Asked for a story by voice, Alicia tells all of it without once
// taking her own voice for the user's: nothing paused or stopped her,
// her echo was counted as echo, and the page shows the answer whole and
// heard.
func TestWebClientOverItsOwnEcho(t *testing.T) {
	testenv.RealTimeAlone(t)
	testenv.SpeechEngines(t)
	question := "Tell me a story."
	phrases := filepath.Join(t.TempDir(), "phrases.txt")
	if err := os.WriteFile(phrases, []byte(question+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_STT_URL", "")
	t.Setenv("ALICIA_TTS_URL", "")
	url, key := webServer(t, "-speech-standin-phrases", phrases)

	const rate = 48000
	pcm := speechtest.Render(t, question, 140, rate)
	raw := make([]byte, 2*len(pcm))
	for i, v := range pcm {
		binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
	}
	var r struct {
		Question string           `json:"question"`
		Answer   pageAnswer       `json:"answer"`
		Asked    []map[string]any `json:"asked"`
		Echoed   []string         `json:"echoed"`
	}
	testenv.Browser(t, context.Background(), "web-echo.mjs", map[string]any{
		"url": url, "key": key, "name": "gus",
		"question": base64.StdEncoding.EncodeToString(raw), "rate": rate,
		"echo": map[string]any{"delayMs": 150, "gainDB": -10},
	}, &r)

	if len(r.Asked) == 0 {
		t.Fatal("the page never opened the microphone")
	}
	// Mono too: a stereo microphone is sent without DTX. The room's
	// microphone is stereo all the same, as a browser's raw capture of
	// some devices is, so that the bot's mixdown is what this hears.
	if a, _ := r.Asked[0]["audio"].(map[string]any); a == nil || a["echoCancellation"] != false || a["channelCount"] != float64(1) {
		t.Fatalf("the page asked for the microphone with %v, not with echo cancellation off, in mono", r.Asked[0])
	}
	if len(r.Echoed) == 0 {
		t.Fatal("the bot's voice never reached the page, so nothing came back")
	}
	if norm(r.Question) != norm(question) {
		t.Fatalf("the page shows the question as %q, want %q", r.Question, question)
	}
	talkOver := func(outcome string) float64 {
		return metric(t, url, `alicia_voice_talk_over_total{outcome="`+outcome+`"}`)
	}
	for _, o := range []string{"interruption", "false_interruption", "noise"} {
		if n := talkOver(o); n != 0 {
			t.Errorf("talk over the agent came to %q %v times, with nobody talking over it", o, n)
		}
	}
	echo := talkOver("echo")
	t.Logf("the story as the page shows it: voice %s, %d characters; %v stretches of echo rejected", r.Answer.Voice, len(r.Answer.Text), echo)
	if echo == 0 {
		t.Error("no echo was counted: the test heard none")
	}
	if r.Answer.Voice != "heard" || r.Answer.Interrupted || r.Answer.Stopped || words(r.Answer.Text) != words(longAnswer) {
		t.Errorf("the story: %+v", r.Answer)
	}
}
