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
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	api := fs.String("api", envOr("ALICIA_API", "http://"+room.DefaultHTTPAddr), "Alicia's HTTP API")
	secret := fs.String("secret", envOr("ALICIA_TOKEN_SECRET", os.Getenv("ALICIA_LIVEKIT_API_SECRET")), "bearer secret of POST /v1/token")
	roomName := fs.String("room", "", "conversation to join (default: a new one)")
	identity := fs.String("identity", "you", "your identity")
	show := fs.String("reasoning", "full", "show reasoning: full, summary or off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lksdk.SetLogger(protoLogger.GetDiscardLogger())
	body, _ := json.Marshal(map[string]string{"room": *roomName, "identity": *identity})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(*api, "/")+"/v1/token", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+*secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var tok struct{ Token, URL, Room, Error string }
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("token: HTTP %d %s", resp.StatusCode, tok.Error)
	}

	var mu sync.Mutex // one writer on stdout
	print := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, format, a...)
	}
	greeted := make(chan struct{})
	var greetOnce sync.Once
	cb := lksdk.NewRoomCallback()
	cb.OnDataPacket = func(data lksdk.DataPacket, _ lksdk.DataReceiveParams) {
		p, ok := data.(*lksdk.UserDataPacket)
		if !ok || p.Topic != room.Topic {
			return
		}
		env, err := wire.Unmarshal(p.Payload)
		if err != nil {
			print("! undecodable envelope: %v\n", err)
			return
		}
		switch b := env.Body.(type) {
		case *wire.Configuration:
			greetOnce.Do(func() { close(greeted) })
		case *wire.ReasoningStep:
			print("  · step %d: %s\n", b.StepIndex, strings.ReplaceAll(b.Content, "\n", "\n    "))
		case *wire.ToolUseRequest:
			print("  ⚙ %s(%v)\n", b.ToolName, b.Parameters)
		case *wire.AssistantSentence:
			print("%s", b.Text)
			if b.IsFinal {
				print("\n> ")
			} else {
				print(" ")
			}
		case *wire.AssistantMessage:
			print("%s\n> ", b.Content)
		case *wire.ErrorMessage:
			print("\n! %s (error %d)\n> ", b.Message, b.Code)
		}
	}
	r, err := lksdk.ConnectToRoomWithToken(tok.URL, tok.Token, cb, lksdk.WithAutoSubscribe(false))
	if err != nil {
		return err
	}
	defer r.Disconnect()
	stanza := int32(0)
	send := func(body wire.Body) error {
		stanza++
		b, err := wire.Marshal(&wire.Envelope{StanzaID: stanza, ConversationID: tok.Room, Body: body})
		if err != nil {
			return err
		}
		return r.LocalParticipant.PublishDataPacket(lksdk.UserData(b), lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishTopic(room.Topic))
	}
	features := wire.Features{Streaming: true, ReasoningSteps: *show == "full", ReasoningSummary: *show == "summary"}
	select {
	case <-greeted:
	case <-time.After(10 * time.Second):
		return errors.New("no bot answered in the room within 10 s")
	case <-ctx.Done():
		return nil
	}
	if err := send(&wire.Configuration{ConversationID: tok.Room, Features: features.List()}); err != nil {
		return err
	}
	print("Joined %s. Type a message; /stop, /regenerate and /quit work too.\n> ", tok.Room)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok || line == "/quit" {
				return nil
			}
			switch line = strings.TrimSpace(line); {
			case line == "":
				print("> ")
			case line == "/stop":
				err = send(&wire.ControlStop{ConversationID: tok.Room, StopType: wire.StopAll})
			case line == "/regenerate" && last != "":
				err = send(&wire.ControlVariation{ConversationID: tok.Room, TargetID: last, Mode: wire.VariationRegenerate})
			default:
				last = wire.NewID("msg")
				err = send(&wire.UserMessage{ID: last, ConversationID: tok.Room, Content: line, Timestamp: time.Now().UnixMilli()})
			}
			if err != nil {
				return err
			}
		}
	}
}
