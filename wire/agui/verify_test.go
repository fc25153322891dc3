package agui

import (
	"bytes"
	"strings"
	"testing"
)

func TestVerifierNegativeControls(t *testing.T) {
	start := Event{Type: RunStarted, ThreadID: "t", RunID: "r"}
	finish := Event{Type: RunFinished, ThreadID: "t", RunID: "r"}
	rs := func(id string) Event { return Event{Type: ReasoningMessageStart, MessageID: id, Role: "reasoning"} }
	rc := func(id, d string) Event { return Event{Type: ReasoningMessageContent, MessageID: id, Delta: d} }
	re := func(id string) Event { return Event{Type: ReasoningMessageEnd, MessageID: id} }
	good := []Event{start, {Type: ReasoningStart, MessageID: "s"}, rs("m"), rc("m", "hi"), re("m"),
		{Type: ReasoningEncryptedValue, Subtype: SubtypeMessage, EntityID: "m", EncryptedValue: "x"},
		{Type: ReasoningEnd, MessageID: "s"}, {Type: TextMessageStart, MessageID: "a", Role: "assistant"},
		{Type: TextMessageContent, MessageID: "a", Delta: "ok"}, {Type: TextMessageEnd, MessageID: "a"},
		{Type: ToolCallStart, ToolCallID: "c", ToolCallName: "f"}, {Type: ToolCallArgs, ToolCallID: "c", Delta: "{}"},
		{Type: ToolCallEnd, ToolCallID: "c"}, finish, start, {Type: RunError, Message: "second run failed"}}
	if err := CheckAll(good); err != nil {
		t.Fatalf("a valid stream fails: %v", err)
	}
	for name, events := range map[string][]Event{
		"first event not RUN_STARTED":         {rs("m")},
		"event after RUN_ERROR":               {start, {Type: RunError, Message: "x"}, rs("m")},
		"event after RUN_FINISHED":            {start, finish, rs("m")},
		"RUN_STARTED while active":            {start, start},
		"role assistant on reasoning message": {start, {Type: ReasoningMessageStart, MessageID: "m", Role: "assistant"}},
		"orphan reasoning content":            {start, rc("m", "x")},
		"reasoning message started twice":     {start, rs("m"), rs("m")},
		"reasoning message open at finish":    {start, rs("m"), finish},
		"reasoning span open at finish":       {start, {Type: ReasoningStart, MessageID: "s"}, finish},
		"REASONING_END without span":          {start, {Type: ReasoningEnd, MessageID: "s"}},
		"empty delta":                         {start, rs("m"), rc("m", ""), re("m"), finish},
		"text message open at finish":         {start, {Type: TextMessageStart, MessageID: "a"}, finish},
		"orphan text content":                 {start, {Type: TextMessageContent, MessageID: "a", Delta: "x"}},
		"tool call open at finish":            {start, {Type: ToolCallStart, ToolCallID: "c", ToolCallName: "f"}, finish},
		"orphan tool args":                    {start, {Type: ToolCallArgs, ToolCallID: "c", Delta: "{"}},
		"step open at finish":                 {start, {Type: StepStarted, StepName: "s"}, finish},
		"step finished without start":         {start, {Type: StepFinished, StepName: "s"}},
		"no terminal event":                   {start, rs("m"), rc("m", "x"), re("m")},
		"unknown encrypted subtype":           {start, {Type: ReasoningEncryptedValue, Subtype: "blob", EntityID: "m", EncryptedValue: "x"}},
		"RUN_FINISHED after RUN_ERROR":        {start, {Type: RunError, Message: "x"}, finish},
	} {
		if err := CheckAll(events); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWriteSSE(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSSE(&b, &Event{Type: ReasoningMessageContent, MessageID: "m", Delta: "line1\nline2\r\n"}); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if s != `data: {"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"line1\nline2\r\n"}`+"\n\n" || strings.Count(s, "\n") != 2 || strings.Contains(s, "\r") {
		t.Fatalf("frame %q", s)
	}
}
