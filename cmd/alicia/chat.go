package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/room"
	"github.com/alicia-voice/alicia/wire"
)

// runChat is a terminal client: it joins a conversation through the HTTP
// API's token endpoint, sends what is typed as user messages, and prints
// reasoning steps and answer sentences as they arrive.
func runChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	opts, err := parseChatFlags(args, stderr)
	if err != nil {
		return err
	}
	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	tok, err := requestToken(ctx, opts)
	if err != nil {
		return err
	}
	s := &chatSession{out: stdout, conversation: tok.Room, greeted: make(chan struct{})}
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = s.onDataPacket
	r, err := lksdk.ConnectToRoomWithToken(tok.URL, tok.Token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		return err
	}
	defer r.Disconnect()
	s.room = r
	features := wire.Features{Streaming: true, ReasoningSteps: opts.show == "full", ReasoningSummary: opts.show == "summary"}
	// The bot greets with its configuration; what is sent before would
	// reach nobody.
	select {
	case <-s.greeted:
	case <-time.After(10 * time.Second):
		return errors.New("no bot answered in the room within 10 s")
	case <-ctx.Done():
		return nil
	}
	if err := s.send(&wire.Configuration{ConversationID: tok.Room, Features: features.List()}); err != nil {
		return err
	}
	s.print("Joined %s. Type a message; /stop, /regenerate and /quit work too.\n> ", tok.Room)
	return s.converse(ctx, readLines(ctx, stdin))
}

// chatOptions are the chat command's flags.
type chatOptions struct {
	api, secret, room, identity string
	// show is how much reasoning to ask for: full, summary or off.
	show string
}

func parseChatFlags(args []string, stderr io.Writer) (chatOptions, error) {
	var o chatOptions
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.api, "api", envOr("ALICIA_API", "http://"+room.DefaultHTTPAddr), "Alicia's HTTP API")
	fs.StringVar(&o.secret, "secret", envOr("ALICIA_TOKEN_SECRET", os.Getenv("ALICIA_LIVEKIT_API_SECRET")), "bearer secret of POST /v1/token")
	fs.StringVar(&o.room, "room", "", "conversation to join (default: a new one)")
	fs.StringVar(&o.identity, "identity", "you", "your identity")
	fs.StringVar(&o.show, "reasoning", "full", "show reasoning: full, summary or off")
	err := fs.Parse(args)
	return o, err
}

// chatToken is POST /v1/token's answer: where to join which room, or why
// not.
type chatToken struct{ Token, URL, Room, Error string }

// requestToken asks the HTTP API for a token to join the conversation.
func requestToken(ctx context.Context, o chatOptions) (chatToken, error) {
	body, _ := json.Marshal(map[string]string{"room": o.room, "identity": o.identity})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(o.api, "/")+"/v1/token", bytes.NewReader(body))
	if err != nil {
		return chatToken{}, fmt.Errorf("-api %q: %w", o.api, err)
	}
	req.Header.Set("Authorization", "Bearer "+o.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatToken{}, err
	}
	defer resp.Body.Close()
	var tok chatToken
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK {
		return chatToken{}, fmt.Errorf("token: HTTP %d %s", resp.StatusCode, tok.Error)
	}
	return tok, nil
}

// readLines delivers stdin's lines, and closes when stdin ends or ctx
// does. A read of stdin cannot be cancelled, so the goroutine may stay in
// one until the process exits; it never stays blocked handing a line to
// a chat that has ended.
func readLines(ctx context.Context, stdin io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// chatSession is one conversation joined from the terminal. The room's
// callbacks print what arrives while the main goroutine sends what is
// typed, so the terminal is written under mu.
type chatSession struct {
	out          io.Writer
	mu           sync.Mutex // one writer on out
	room         *lksdk.Room
	conversation string
	stanza       int32
	// last is the ID of the last message sent, which /regenerate asks
	// again.
	last string
	// greeted closes when the bot's configuration arrives.
	greeted   chan struct{}
	greetOnce sync.Once
}

func (s *chatSession) print(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format, a...)
}

// onDataPacket hears the room's data: Alicia's envelopes are shown, the
// rest ignored.
func (s *chatSession) onDataPacket(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
	p, ok := data.(*lksdk.UserDataPacket)
	if !ok || p.Topic != room.Topic {
		return
	}
	env, err := wire.Unmarshal(p.Payload)
	if err != nil {
		s.print("! undecodable envelope: %v\n", err)
		return
	}
	s.show(env.Body)
}

// show prints one envelope's body: steps and tool calls indented, answer
// sentences run together until the final one gives the prompt back.
func (s *chatSession) show(body wire.Body) {
	switch b := body.(type) {
	case *wire.Configuration:
		s.greetOnce.Do(func() { close(s.greeted) })
	case *wire.ReasoningStep:
		s.print("  · step %d: %s\n", b.StepIndex, strings.ReplaceAll(b.Content, "\n", "\n    "))
	case *wire.ToolUseRequest:
		s.print("  ⚙ %s(%v)\n", b.ToolName, b.Parameters)
	case *wire.AssistantSentence:
		s.print("%s", b.Text)
		if b.IsFinal {
			s.print("\n> ")
		} else {
			s.print(" ")
		}
	case *wire.AssistantMessage:
		s.print("%s\n> ", b.Content)
	case *wire.ErrorMessage:
		s.print("\n! %s (error %d)\n> ", b.Message, b.Code)
	}
}

// send publishes one envelope to the room, reliably, as the next stanza.
func (s *chatSession) send(body wire.Body) error {
	s.stanza++
	b, err := wire.Marshal(&wire.Envelope{StanzaID: s.stanza, ConversationID: s.conversation, Body: body})
	if err != nil {
		return err
	}
	return s.room.LocalParticipant.PublishDataPacket(lksdk.UserData(b), lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic(room.Topic))
}

// converse acts on each line typed until the input ends, /quit is typed
// or ctx ends.
func (s *chatSession) converse(ctx context.Context, lines <-chan string) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok || line == "/quit" {
				return nil
			}
			if err := s.typed(strings.TrimSpace(line)); err != nil {
				return err
			}
		}
	}
}

// typed sends one typed line: a command, or else a user message.
func (s *chatSession) typed(line string) error {
	switch {
	case line == "":
		s.print("> ")
		return nil
	case line == "/stop":
		return s.send(&wire.ControlStop{ConversationID: s.conversation, StopType: wire.StopAll})
	case line == "/regenerate" && s.last != "":
		return s.send(&wire.ControlVariation{ConversationID: s.conversation, TargetID: s.last, Mode: wire.VariationRegenerate})
	default:
		s.last = wire.NewID("msg")
		return s.send(&wire.UserMessage{ID: s.last, ConversationID: s.conversation, Content: line, Timestamp: time.Now().UnixMilli()})
	}
}
