package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// httpBackend is what the HTTP backends share: one POST whose streamed
// body is read under an idle timeout. There is deliberately no
// whole-request timeout: a long answer is not a failure (the reference
// implementation cut every answer at 10 s).
type httpBackend struct {
	client  *http.Client
	baseURL string
	apiKey  string
	idle    time.Duration
}

var errIdle = errors.New("idle timeout")

// stream is an open response body under an idle timer.
type stream struct {
	body   io.ReadCloser
	timer  *time.Timer
	idle   time.Duration
	ctx    context.Context
	parent context.Context
	cancel context.CancelCauseFunc
}

func (s *stream) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.timer.Reset(s.idle)
	}
	return n, err
}

func (s *stream) close() {
	s.timer.Stop()
	s.cancel(nil)
	_ = s.body.Close()
}

// failure classifies an error met while reading the body.
func (s *stream) failure(err error) *Error {
	return transportError(s.parent, s.ctx, err, ErrTruncated)
}

func transportError(parent, ctx context.Context, err error, otherwise ErrorKind) *Error {
	switch {
	case parent.Err() != nil:
		return &Error{Kind: ErrCancelled, Message: context.Cause(parent).Error(), cause: err}
	case errors.Is(context.Cause(ctx), errIdle):
		return &Error{Kind: ErrIdle, Message: "no data for longer than the idle timeout", cause: err}
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return &Error{Kind: otherwise, Message: msg, cause: err}
}

// post sends body as JSON and returns the streaming response, or an
// *Error for a transport failure or an HTTP error status.
func (b *httpBackend) post(ctx context.Context, path string, body any, accept string) (*stream, *Error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, &Error{Kind: ErrProtocol, Message: "encoding the request: " + err.Error()}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(b.idle, func() { cancel(errIdle) })
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, strings.TrimSuffix(b.baseURL, "/")+path, bytes.NewReader(payload))
	if err != nil {
		timer.Stop()
		cancel(nil)
		return nil, &Error{Kind: ErrConnect, Message: err.Error(), cause: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if b.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.apiKey)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		timer.Stop()
		cancel(nil)
		return nil, transportError(ctx, sctx, err, ErrConnect)
	}
	s := &stream{body: resp.Body, timer: timer, idle: b.idle, ctx: sctx, parent: ctx, cancel: cancel}
	if resp.StatusCode/100 != 2 {
		defer s.close()
		raw, _ := io.ReadAll(io.LimitReader(s, 64<<10))
		return nil, httpError(resp.StatusCode, raw)
	}
	return s, nil
}

// httpError reads an error body in any shape the backends use: nested
// {"error":{…}}, flat {"object":"error",…}, Ollama's {"error":"…"}, a body
// framed as SSE (DashScope), or a proxy's HTML page.
func httpError(status int, body []byte) *Error {
	e := &Error{Kind: ErrHTTP, Status: status}
	trimmed := bytes.TrimSpace(body)
	if rest, ok := bytes.CutPrefix(trimmed, []byte("data:")); ok {
		trimmed, _, _ = bytes.Cut(bytes.TrimSpace(rest), []byte("\n"))
	}
	if code, msg, ok := errorFromJSON(trimmed); ok {
		e.Code, e.Message = code, msg
		return e
	}
	e.Message = plainText(trimmed)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

var (
	htmlTags  = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlTitle = regexp.MustCompile(`(?is)<title>(.*?)</title>`)
)

// plainText makes a short readable message of a non-JSON body, such as a
// proxy's HTML error page.
func plainText(b []byte) string {
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

// errorFromJSON recognises an error object: {"error":{"message","type",
// "code"}}, {"error":"…"} or {"object":"error","message",…}. It reports
// false for anything else, including a chunk whose "error" is null.
func errorFromJSON(b []byte) (code, message string, ok bool) {
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

// errorCode prefers the backend's code (a number or a string) and falls
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

// runStream is what every backend's Stream shares: post, read frames into
// the turn with read, deliver events as they come, and end with exactly
// one finish or error. read returns nil once it called t.finish (or when
// drain reports that the consumer stopped), an *Error otherwise.
func runStream(yield func(Event) bool, t *turn, post func() (*stream, *Error), read func(s *stream, drain func() bool) *Error) {
	s, err := post()
	if err == nil {
		defer s.close()
		more := true
		drain := func() bool {
			more = more && t.drain(yield)
			return more
		}
		err = read(s, drain)
		if !more {
			return
		}
	}
	if err != nil {
		t.fail(err)
	}
	t.drain(yield)
}
