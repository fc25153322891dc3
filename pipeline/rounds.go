package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/reasoning"
)

// turnHooks are what the turn runner does with a model response.
type turnHooks struct {
	// text receives answer text as it streams.
	text func(delta string)
	// tools runs one response's calls and returns the tool messages for
	// the model; end ends the turn instead (calls the client runs after
	// the turn, as AG-UI does).
	tools func(calls []llm.ToolCall) (results []llm.Message, end bool)
}

// rounds drives the model through one turn: each response's reasoning
// goes to the chain and its text to the face, its tool calls run, and the
// model answers again, until it answers without a tool call or the bound
// of rounds is reached. deliver, if set, sends the partial reasoning
// updates that waited out their interval. It returns the model's failure.
func (cfg *Config) rounds(ctx context.Context, req *llm.Request, chain *reasoning.Chain, deliver *reasoning.Deliverer, h turnHooks) error {
	for round := 0; ; round++ {
		calls, thought, said, err := cfg.round(ctx, req, chain, deliver, h.text)
		if err != nil || len(calls) == 0 || ctx.Err() != nil {
			return err
		}
		if round+1 >= cfg.MaxToolRounds {
			return fmt.Errorf("the model was still calling tools after %d rounds, so the answer stops here", cfg.MaxToolRounds)
		}
		results, end := h.tools(calls)
		if end {
			return nil
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: said, Reasoning: thought, ToolCalls: calls})
		req.Messages = append(req.Messages, results...)
	}
}

// round streams one model response and returns the tool calls it made.
func (cfg *Config) round(ctx context.Context, req *llm.Request, chain *reasoning.Chain, deliver *reasoning.Deliverer, text func(string)) (calls []llm.ToolCall, reasoningText, said string, err error) {
	events := make(chan llm.Event, 64)
	go func() {
		// Ends when the stream does, which cancelling ctx brings about;
		// the loop below reads until then.
		defer close(events)
		for ev := range cfg.LLM.Stream(ctx, req) {
			events <- ev
		}
	}()
	var thought, answer strings.Builder
	poll := time.NewTimer(time.Hour)
	defer poll.Stop()
	var pollC <-chan time.Time
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				chain.End(time.Now())
				return calls, thought.String(), answer.String(), err
			}
			chain.Feed(ev, time.Now())
			switch ev.Kind {
			case llm.EventReasoning:
				thought.WriteString(ev.Text)
			case llm.EventText:
				answer.WriteString(ev.Text)
				text(ev.Text)
			case llm.EventToolCall:
				if ev.ToolCall.Result == nil { // an AG-UI agent's own tools ran already
					calls = append(calls, *ev.ToolCall)
				}
			case llm.EventError:
				if e, ok := llm.AsError(ev.Err); !ok || e.Kind != llm.ErrCancelled {
					err = ev.Err
				}
			}
		case <-pollC:
		}
		if deliver == nil {
			continue
		}
		// Partial reasoning updates that waited out their interval.
		pollC = nil
		if next := deliver.Poll(time.Now()); !next.IsZero() {
			poll.Reset(time.Until(next))
			pollC = poll.C
		}
	}
}
