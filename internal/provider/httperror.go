package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// HTTPError is the error of a response with status, read from its body
// in any shape servers use: nested {"error":{…}}, flat
// {"object":"error",…}, Ollama's {"error":"…"}, FastAPI's {"detail":…}
// (speaches, Kokoro-FastAPI), a body framed as SSE (DashScope), or a
// proxy's HTML page.
func HTTPError(service string, status int, body []byte) *Error {
	e := &Error{Service: service, Kind: ErrHTTP, Status: status}
	trimmed := bytes.TrimSpace(body)
	if rest, ok := bytes.CutPrefix(trimmed, []byte("data:")); ok {
		trimmed, _, _ = bytes.Cut(bytes.TrimSpace(rest), []byte("\n"))
	}
	if code, msg, ok := ErrorFromJSON(trimmed); ok {
		e.Code, e.Message = code, msg
		return e
	}
	if detail, ok := fastAPIDetail(trimmed); ok {
		e.Message = detail
		return e
	}
	e.Message = PlainText(trimmed)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

var (
	htmlTags  = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlTitle = regexp.MustCompile(`(?is)<title>(.*?)</title>`)
)

// PlainText makes a short readable message of a non-JSON body, such as a
// proxy's HTML error page.
func PlainText(b []byte) string {
	s := string(b)
	if t := htmlTitle.FindStringSubmatch(s); t != nil {
		s = t[1]
	} else {
		s = htmlTags.ReplaceAllString(s, " ")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ErrorFromJSON recognises an error object: {"error":{"message","type",
// "code"}}, {"error":"…"} or {"object":"error","message",…}. It reports
// false for anything else, including a chunk whose "error" is null.
func ErrorFromJSON(b []byte) (code, message string, ok bool) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &v) != nil {
		return "", "", false
	}
	switch {
	case len(v.Error) > 0 && v.Error[0] == '{':
		var inner struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(v.Error, &inner) != nil {
			return "", "", false
		}
		return errorCode(inner.Code, inner.Type), inner.Message, true
	case len(v.Error) > 0 && v.Error[0] == '"':
		var s string
		_ = json.Unmarshal(v.Error, &s)
		return "", s, true
	case v.Object == "error":
		return errorCode(v.Code, v.Type), v.Message, true
	}
	return "", "", false
}

// errorCode prefers the server's code (a number or a string) and falls
// back to its error type.
func errorCode(code json.RawMessage, typ string) string {
	c := strings.Trim(string(code), `"`)
	switch {
	case c != "" && c != "null" && typ != "":
		return fmt.Sprintf("%s %s", c, typ)
	case c != "" && c != "null":
		return c
	}
	return typ
}

// fastAPIDetail reads FastAPI's error body, {"detail": "…"} or a
// validation error's {"detail": [{…}]}, which it keeps as JSON.
func fastAPIDetail(b []byte) (string, bool) {
	var v struct {
		Detail json.RawMessage `json:"detail"`
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &v) != nil || len(v.Detail) == 0 {
		return "", false
	}
	var s string
	if json.Unmarshal(v.Detail, &s) == nil {
		return s, true
	}
	d := string(v.Detail)
	if len(d) > 300 {
		d = d[:300] + "…"
	}
	return d, true
}

// StreamError is the error a server sent inside its stream (an SSE
// event), in any of the shapes ErrorFromJSON knows, or as llama.cpp's
// legacy "error:" field.
func StreamError(service string, payload []byte) *Error {
	e := &Error{Service: service, Kind: ErrMidStream}
	if code, msg, ok := ErrorFromJSON(payload); ok {
		e.Code, e.Message = code, msg
		return e
	}
	var flat struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(payload, &flat) == nil && flat.Message != "" {
		e.Code, e.Message = errorCode(flat.Code, flat.Type), flat.Message
		return e
	}
	e.Message = PlainText(payload)
	return e
}
