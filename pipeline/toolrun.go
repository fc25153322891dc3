package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/wire"
)

// defaultClientTimeout is ToolUseRequest's timeoutMs default.
const defaultClientTimeout = 30 * time.Second

// toolDefs is what the model is offered: the server's tools, then the
// client's (a client tool does not shadow a server one).
func (c *Conversation) toolDefs(client map[string]wire.ClientTool) []llm.Tool {
	var out []llm.Tool
	seen := map[string]bool{}
	for _, t := range c.cfg.Tools {
		out = append(out, llm.Tool{Name: t.Name, Description: t.Description, Parameters: schema(t.Parameters)})
		seen[t.Name] = true
	}
	for _, t := range client {
		if !seen[t.Name] {
			out = append(out, llm.Tool{Name: t.Name, Description: t.Description, Parameters: schema(t.Parameters)})
		}
	}
	return out
}

func toolNamed(tools []Tool, name string) *Tool {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}

// runTools runs one response's calls concurrently, announcing each with a
// ToolUseRequest and reporting it with a ToolUseResult, and returns the
// tool messages for the model, in the calls' order.
func (c *Conversation) runTools(ctx context.Context, face Outbox, calls []llm.ToolCall, client map[string]wire.ClientTool, from, assistantID string) []llm.Message {
	out := make([]llm.Message, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			result, failure, code := c.runTool(ctx, face, call, client, from, assistantID)
			content := result
			if failure != "" {
				b, _ := json.Marshal(map[string]string{"error": failure, "code": code})
				content = string(b)
			}
			out[i] = llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: content}
		}()
	}
	wg.Wait()
	return out
}

// runTool returns the result as JSON text, or a failure and its code.
func (c *Conversation) runTool(ctx context.Context, face Outbox, call llm.ToolCall, client map[string]wire.ClientTool, from, assistantID string) (string, string, string) {
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || call.Name == "" {
		return "", fmt.Sprintf("the call %q with arguments %s is not valid: arguments must be a JSON object", call.Name, call.Arguments), wire.ToolErrInvalidParameters
	}
	requestID := wire.NewID("tu")
	if t := toolNamed(c.cfg.Tools, call.Name); t != nil {
		face.Send(&wire.ToolUseRequest{ID: requestID, ConversationID: c.ID, MessageID: assistantID, ToolName: call.Name, Parameters: args, Execution: wire.ExecutionServer})
		res, err := t.Run(ctx, args)
		if err != nil {
			face.Send(&wire.ToolUseResult{RequestID: requestID, ConversationID: c.ID, Success: false, ErrorCode: wire.ToolErrExecution, ErrorMessage: err.Error()})
			return "", err.Error(), wire.ToolErrExecution
		}
		face.Send(&wire.ToolUseResult{RequestID: requestID, ConversationID: c.ID, Success: true, Result: res})
		b, _ := json.Marshal(res)
		return string(b), "", ""
	}
	ct, ok := client[call.Name]
	if !ok {
		return "", fmt.Sprintf("there is no tool named %q", call.Name), wire.ToolErrUnknownTool
	}
	timeout := defaultClientTimeout
	if ct.TimeoutMs > 0 {
		timeout = time.Duration(ct.TimeoutMs) * time.Millisecond
	}
	ch := make(chan *wire.ToolUseResult, 1)
	c.waitMu.Lock()
	c.waiting[requestID] = ch
	c.waitMu.Unlock()
	defer func() {
		c.waitMu.Lock()
		delete(c.waiting, requestID)
		c.waitMu.Unlock()
	}()
	face.Send(&wire.ToolUseRequest{ID: requestID, ConversationID: c.ID, MessageID: assistantID, ToolName: call.Name, Parameters: args,
		Execution: wire.ExecutionClient, TimeoutMs: int32(timeout / time.Millisecond)}, from)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if !r.Success {
			return "", r.ErrorMessage, r.ErrorCode
		}
		b, _ := json.Marshal(r.Result)
		return string(b), "", ""
	case <-timer.C:
		return "", fmt.Sprintf("the client did not answer within %v", timeout), wire.ToolErrTimeout
	case <-ctx.Done():
		return "", "the turn was stopped", wire.ToolErrExecution
	}
}
