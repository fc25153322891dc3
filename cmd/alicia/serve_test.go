package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/lkserver"
	"github.com/alicia-voice/alicia/internal/testenv"
)

func waitFor(t *testing.T, b *testenv.LogBuffer, what string, re *regexp.Regexp) []string {
	t.Helper()
	m := b.WaitFor(re, 30*time.Second)
	if m == nil {
		t.Fatalf("timed out waiting for %s; output so far:\n%s", what, b.String())
	}
	return m
}

// A newcomer's first run: serve with nothing configured starts its own
// livekit-server and the stand-in, and prints how to talk to it; chat
// then gets an answer with its reasoning.
func TestServeAndChat(t *testing.T) {
	if _, err := lkserver.Binary(); err != nil {
		testenv.StartLiveKit(t) // fails (or skips) with the reason
	}
	for _, k := range []string{"ALICIA_LIVEKIT_URL", "ALICIA_LLM_URL", "ALICIA_DATABASE_URL", "ALICIA_TOKEN_SECRET", "ALICIA_LIVEKIT_API_SECRET"} {
		t.Setenv(k, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testenv.LogBuffer
	served := make(chan error, 1)
	go func() { served <- runServe(ctx, []string{"-http-addr", "127.0.0.1:0"}, nil, &out, &errOut) }()
	m := waitFor(t, &out, "the chat command", regexp.MustCompile(`alicia chat -api (\S+) -secret (\S+)`))

	stdinR, stdinW := io.Pipe()
	var chatOut testenv.LogBuffer
	chatted := make(chan error, 1)
	go func() { chatted <- runChat(ctx, []string{"-api", m[1], "-secret", m[2]}, stdinR, &chatOut, io.Discard) }()
	waitFor(t, &chatOut, "the prompt", regexp.MustCompile(`Joined conv_`))
	_, _ = io.WriteString(stdinW, "hello there\n")
	waitFor(t, &chatOut, "the answer", regexp.MustCompile(`(?s)step 1: .*You said: "hello there".*\n> `))
	stdinW.Close()
	if err := <-chatted; err != nil {
		t.Fatalf("chat: %v", err)
	}
	if !strings.Contains(errOut.String(), "NO MODEL CONFIGURED") {
		t.Error("serve did not say loudly that it answers with the stand-in")
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v\n%s", err, errOut.String())
	}
}
