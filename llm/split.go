package llm

import (
	"encoding/json"
	"strings"
	"unicode"

	gonanoid "github.com/matoous/go-nanoid/v2"
)

// Qwen3's markup, which reaches content verbatim when a server runs no
// reasoning or tool parser (the tags are ordinary tokens, not special ones).
const (
	tagThink        = "<think>"
	tagThinkEnd     = "</think>"
	tagToolCall     = "<tool_call>"
	tagToolCallEnd  = "</tool_call>"
	longestTagBytes = len(tagToolCallEnd)
)

type splitMode uint8

const (
	modeAnswer splitMode = iota
	modeReasoning
	modeToolCall
)

type pieceKind uint8

const (
	pieceReasoning pieceKind = iota
	pieceText
	pieceToolCall
	// pieceOpenTag: content opened <think> itself, so the template did
	// not (pieces of this kind and the next carry no text). Also given
	// when content was taken to start inside the thinking and opens it
	// before any word.
	pieceOpenTag
	// pieceBareClose: </think> in answer text with no <think> before it:
	// the template opened the thinking, and what came before was reasoning.
	pieceBareClose
)

type piece struct {
	kind pieceKind
	text string
	call ToolCall
}

// splitter separates a stream of model text into reasoning, answer and
// Hermes-style <tool_call> blocks. Tags may arrive split at any byte: a
// tail that could be the start of a tag is held until the next delta.
type splitter struct {
	mode splitMode
	// reasoningOnly marks text from a backend's reasoning field: it is
	// all reasoning, except tool calls a model opened inside its thinking.
	reasoningOnly bool
	afterTool     splitMode
	hold          string
	tool          strings.Builder
	fed           bool
	// worded: a word has been emitted, so a <think> is no longer the
	// first thing the model wrote.
	worded bool
}

func (s *splitter) feed(text string, out []piece) []piece {
	if text == "" {
		return out
	}
	s.fed = true
	buf := text
	if s.hold != "" {
		buf = s.hold + text
		s.hold = ""
	}
	for len(buf) > 0 {
		i := strings.IndexByte(buf, '<')
		if i < 0 {
			return s.emit(buf, out)
		}
		out = s.emit(buf[:i], out)
		buf = buf[i:]
		tag, partial := s.matchTag(buf)
		switch {
		case tag != "":
			out = s.onTag(tag, out)
			buf = buf[len(tag):]
		case partial:
			s.hold = buf
			return out
		default:
			out = s.emit("<", out)
			buf = buf[1:]
		}
	}
	return out
}

// matchTag reports the tag buf starts with, or whether buf is a proper
// prefix of a tag that the next delta may complete.
func (s *splitter) matchTag(buf string) (tag string, partial bool) {
	tags := []string{tagThink, tagThinkEnd, tagToolCall, tagToolCallEnd}
	if s.mode == modeToolCall {
		tags = tags[3:]
	}
	for _, t := range tags {
		if strings.HasPrefix(buf, t) {
			return t, false
		}
		if len(buf) < len(t) && strings.HasPrefix(t, buf) {
			partial = true
		}
	}
	return "", partial
}

func (s *splitter) onTag(tag string, out []piece) []piece {
	switch tag {
	case tagThink:
		if !s.reasoningOnly {
			if s.mode == modeAnswer || s.mode == modeReasoning && !s.worded {
				out = append(out, piece{kind: pieceOpenTag})
			}
			s.mode = modeReasoning
		}
	case tagThinkEnd:
		if !s.reasoningOnly {
			if s.mode == modeAnswer {
				out = append(out, piece{kind: pieceBareClose})
			}
			s.mode = modeAnswer
		}
	case tagToolCall:
		// A call opened inside thinking ends the thinking (as SGLang's
		// Qwen3 detector does); text after it is answer, except in a
		// reasoning field.
		s.afterTool = modeAnswer
		if s.reasoningOnly {
			s.afterTool = modeReasoning
		}
		s.mode = modeToolCall
	case tagToolCallEnd:
		if s.mode == modeToolCall {
			out = append(out, piece{kind: pieceToolCall, call: parseHermesCall(s.tool.String())})
			s.tool.Reset()
			s.mode = s.afterTool
		}
	}
	return out
}

func (s *splitter) emit(text string, out []piece) []piece {
	if text == "" {
		return out
	}
	if !s.worded && strings.TrimSpace(text) != "" {
		s.worded = true
	}
	switch s.mode {
	case modeToolCall:
		s.tool.WriteString(text)
		return out
	case modeReasoning:
		return appendPiece(out, pieceReasoning, text)
	}
	if s.reasoningOnly {
		return appendPiece(out, pieceReasoning, text)
	}
	return appendPiece(out, pieceText, text)
}

func appendPiece(out []piece, kind pieceKind, text string) []piece {
	if n := len(out); n > 0 && out[n-1].kind == kind && kind <= pieceText {
		out[n-1].text += text
		return out
	}
	return append(out, piece{kind: kind, text: text})
}

// end flushes what is held when the stream ends: a partial tag is plain
// text, and an unterminated tool call is parsed as far as it goes.
func (s *splitter) end(out []piece) []piece {
	if s.hold != "" {
		hold := s.hold
		s.hold = ""
		out = s.emit(hold, out)
	}
	if s.mode == modeToolCall {
		out = append(out, piece{kind: pieceToolCall, call: parseHermesCall(s.tool.String())})
		s.tool.Reset()
		s.mode = s.afterTool
	}
	return out
}

// parseHermesCall reads {"name": …, "arguments": {…}}. A body that is not
// such JSON still becomes a call, with no name and the raw text as
// arguments, so that the caller can tell the model its call was invalid
// instead of speaking the markup.
func parseHermesCall(body string) ToolCall {
	call := ToolCall{ID: newCallID()}
	var v struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	trimmed := strings.TrimSpace(body)
	if err := json.Unmarshal([]byte(trimmed), &v); err != nil || v.Name == "" {
		call.Arguments = trimmed
		return call
	}
	call.Name = v.Name
	call.Arguments = normaliseArguments(v.Arguments)
	return call
}

// normaliseArguments turns arguments given as a JSON object or as a JSON
// string holding one into the object's text.
func normaliseArguments(raw json.RawMessage) string {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

func newCallID() string {
	return "call_" + gonanoid.MustGenerate("abcdefghijklmnopqrstuvwxyz0123456789", 24)
}

func trimLeftSpace(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }
