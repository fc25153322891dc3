package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

// With a LiveKit URL, development credentials fail closed: a missing key
// or secret, or a well-known secret, stops the start.
func TestServeConfigFailsClosedOnDevelopmentCredentials(t *testing.T) {
	for _, k := range []string{"ALICIA_LIVEKIT_URL", "ALICIA_LIVEKIT_API_KEY", "ALICIA_LIVEKIT_API_SECRET", "ALICIA_TOKEN_SECRET"} {
		t.Setenv(k, "")
	}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // "" for a valid configuration
	}{
		{"no LiveKit: a local one with fresh keys", nil, nil, ""},
		{"URL alone", map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example"}, nil, "ALICIA_LIVEKIT_API_KEY"},
		{"URL and key, no secret", map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example", "ALICIA_LIVEKIT_API_KEY": "APIabc"}, nil, "ALICIA_LIVEKIT_API_SECRET"},
		{"the dev-mode secret", map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example", "ALICIA_LIVEKIT_API_KEY": "devkey", "ALICIA_LIVEKIT_API_SECRET": "secret"}, nil, "well-known"},
		{"a well-known token secret by flag", map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example", "ALICIA_LIVEKIT_API_KEY": "APIabc", "ALICIA_LIVEKIT_API_SECRET": "s3cr3t-of-my-own-0123456789"},
			[]string{"-token-secret", "devkey"}, "ALICIA_TOKEN_SECRET"},
		{"own credentials", map[string]string{"ALICIA_LIVEKIT_URL": "wss://lk.example", "ALICIA_LIVEKIT_API_KEY": "APIabc", "ALICIA_LIVEKIT_API_SECRET": "s3cr3t-of-my-own-0123456789"}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := parseServeConfig(c.args, io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
		})
	}
}

// Every setting is a flag and an environment variable, and the
// configuration reference documents each one.
func TestEverySettingIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ALICIA_SYSTEM_PROMPT", "from the environment")
	c, err := parseServeConfig([]string{"-thinking", "off"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.SystemPrompt != "from the environment" || c.Thinking != "off" {
		t.Fatalf("env or flag not read: %+v", c)
	}
	(&serveConfig{}).flags().VisitAll(func(f *flag.Flag) {
		if !strings.Contains(string(doc), "`"+envName(f.Name)+"`") {
			t.Errorf("docs/configuration.md does not document %s (-%s)", envName(f.Name), f.Name)
		}
	})
}
