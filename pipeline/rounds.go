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
	// retract takes back answer text the model streamed before a bare
	// </think> (the end of the response's text, as given to text): it was
	// reasoning, and the same text follows as reasoning.
	retract func(text string)
	// tools runs one response's calls and returns the tool messages for
	// the model; end ends the turn instead (calls the client runs after
	// the turn, as AG-UI does).
	tools func(calls []llm.ToolCall) (results []llm.Message, end bool)
}

// rounds drives the model through one turn: each response's reasoning
// goes to the chain and its text to the face, its tool calls run, and the
// model answers again, until it answers without a tool call or the bound
// of rounds is reached. deliver, if set, sends the partial reasoning
// updates that waited out their interval. budget bounds the turn's
// reasoning across its rounds. It returns the model's failure.
func (cfg *Config) rounds(ctx context.Context, req *llm.Request, chain *reasoning.Chain, deliver *reasoning.Deliverer, h turnHooks, budget Budget) error {
	var clock *budgetClock
	if req.Thinking && !budget.Unlimited() {
		clock = &budgetClock{limit: budget}
	}
	for round := 0; ; round++ {
		calls, thought, said, cut, err := cfg.round(ctx, req, chain, deliver, h, clock)
		if cut {
			// The budget is spent: the turn's later rounds answer
			// without thinking.
			req.Thinking, clock = false, nil
		}
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
// When the budget runs out while the model still reasons, the response is
// stopped, the chain's last step marked cut short, and the answer asked
// for at once with the reasoning so far (llm.AnswerNow): that follow-up
// makes the rest of the round.
func (cfg *Config) round(ctx context.Context, req *llm.Request, chain *reasoning.Chain, deliver *reasoning.Deliverer, h turnHooks, clock *budgetClock) (calls []llm.ToolCall, reasoningText, said string, cut bool, err error) {
	first := cfg.stream(ctx, req, chain, deliver, h, clock)
	if !first.cut {
		return first.calls, first.thought.String(), first.said.String(), false, first.err
	}
	now := time.Now()
	chain.Cut(now)
	thought := first.thought.String()
	cfg.Logger.Info("reasoning budget reached: asking for the answer now",
		"budget", clock.limit, "thought", clock.spent.Round(time.Millisecond), "tokens", clock.tokens,
		"follow_up", llm.FollowUpOf(cfg.LLM))
	rest := cfg.stream(ctx, llm.AnswerNow(req, thought), chain, deliver, h, nil)
	// A model that cannot stop thinking (a re-ask to a Thinking-2507
	// model) reasons again; that is part of the reasoning it answered from.
	return rest.calls, thought + rest.thought.String(), rest.said.String(), true, rest.err
}

// streamed is what one model stream gave.
type streamed struct {
	calls         []llm.ToolCall
	thought, said strings.Builder
	err           error
	// cut: the budget ran out while the model still reasoned; the stream
	// was stopped and nothing after that moment was taken.
	cut bool
}

// stream reads one model response into the chain and the face.
func (cfg *Config) stream(ctx context.Context, req *llm.Request, chain *reasoning.Chain, deliver *reasoning.Deliverer, h turnHooks, clock *budgetClock) *streamed {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	events := make(chan llm.Event, 64)
	go func() {
		// Ends when the stream does, which cancelling sctx brings about;
		// the loop below reads until then.
		defer close(events)
		requestedAt(ctx, time.Now())
		for ev := range cfg.LLM.Stream(sctx, req) {
			events <- ev
		}
	}()
	r := &response{ctx: ctx, chain: chain, h: h, clock: clock, stop: stop, thinking: clock != nil, out: &streamed{}}
	// The budget's clock runs while the model has neither answered nor
	// called a tool: its time to the first token counts, as the user
	// waits through it.
	if clock != nil {
		if d := clock.start(time.Now()); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			r.limit = t.C
		}
	}
	poll := time.NewTimer(time.Hour)
	defer poll.Stop()
	var pollC <-chan time.Time
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				r.end()
				return r.out
			}
			if !r.take(ev) {
				continue // the tail of a stopped stream
			}
		case now := <-r.limit:
			r.cut(now)
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

// response is one model response as stream reads it.
type response struct {
	ctx   context.Context
	chain *reasoning.Chain
	h     turnHooks
	clock *budgetClock
	// stop ends the model's stream; limit fires when the budget is spent
	// while thinking says the model still reasons (nil once it stopped).
	stop     context.CancelFunc
	limit    <-chan time.Time
	thinking bool
	// timed: the first token was timed. Only the first is: a context
	// lookup and the turn's lock per token would cost every token of
	// every turn.
	timed bool
	out   *streamed
}

// take reads one event of the response; false if it came after the
// response was cut, and was dropped.
func (r *response) take(ev llm.Event) bool {
	if r.out.cut {
		return false
	}
	now := time.Now()
	r.chain.Feed(ev, now)
	if !r.timed && (ev.Text != "" || ev.Kind == llm.EventToolCall) {
		r.timed = true
		tokenAt(r.ctx, now)
	}
	out := r.out
	switch ev.Kind {
	case llm.EventReasoning:
		out.thought.WriteString(ev.Text)
		if r.thinking && r.clock.spend(ev.Text) {
			r.cut(now)
		}
	case llm.EventText:
		if ev.Text != "" {
			r.endThinking(now)
		}
		out.said.WriteString(ev.Text)
		r.h.text(ev.Text)
	case llm.EventRetract:
		// What this response said so far was reasoning: the tool loop's
		// history and the answer lose it, and the reasoning event that
		// follows gives it to the chain.
		said := out.said.String()
		out.said.Reset()
		out.said.WriteString(strings.TrimSuffix(said, ev.Text))
		if r.h.retract != nil {
			r.h.retract(ev.Text)
		}
	case llm.EventToolCall:
		r.endThinking(now)
		if ev.ToolCall.Result == nil { // an AG-UI agent's own tools ran already
			out.calls = append(out.calls, *ev.ToolCall)
		}
	case llm.EventError:
		if e, ok := llm.AsError(ev.Err); !ok || e.Kind != llm.ErrCancelled {
			out.err = ev.Err
		}
	}
	return true
}

// endThinking stops the budget's clock: the model answered or called a
// tool.
func (r *response) endThinking(now time.Time) {
	if r.thinking {
		r.thinking, r.limit = false, nil
		r.clock.stop(now)
	}
}

// cut stops the response: the budget is spent.
func (r *response) cut(now time.Time) {
	r.endThinking(now)
	r.out.cut = true
	r.stop()
}

// end: the stream ended; a response not cut ends its reasoning.
func (r *response) end() {
	if !r.out.cut {
		r.endThinking(time.Now())
		r.chain.End(time.Now())
	}
}

// budgetClock is a turn's reasoning budget as its rounds spend it.
type budgetClock struct {
	limit  Budget
	spent  time.Duration
	tokens int
	since  time.Time
}

// start starts the clock for a round and returns the time left, or 0 when
// the budget has no duration.
func (c *budgetClock) start(now time.Time) time.Duration {
	c.since = now
	if c.limit.Duration <= 0 {
		return 0
	}
	return max(c.limit.Duration-c.spent, time.Nanosecond)
}

func (c *budgetClock) stop(now time.Time) {
	c.spent += now.Sub(c.since)
}

// spend counts a reasoning delta and reports whether the token budget
// ran out.
func (c *budgetClock) spend(delta string) bool {
	c.tokens += estimateTokens(delta)
	return c.limit.Tokens > 0 && c.tokens >= c.limit.Tokens
}
