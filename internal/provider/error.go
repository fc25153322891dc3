// Package provider is what the clients of remote services (models,
// recognisers, synthesisers) share: one error type, whose kinds let a
// caller word a failure for users and decide whether to retry; the
// reading of a server's error, from a response body or inside a stream,
// in every shape servers send it; and the WebSocket address of a server
// given by its HTTP one.
package provider

import (
	"errors"
	"fmt"
	"strings"
)

// ErrorKind classifies a failed request.
type ErrorKind string

const (
	// ErrHTTP: the server refused the request with an HTTP error.
	ErrHTTP ErrorKind = "http"
	// ErrMidStream: the server reported an error inside its stream (an
	// SSE error event, a realtime session's error event), where no HTTP
	// status can carry it.
	ErrMidStream ErrorKind = "mid-stream"
	// ErrTruncated: the response ended early.
	ErrTruncated ErrorKind = "truncated"
	// ErrIdle: the server sent nothing for longer than the idle timeout.
	ErrIdle ErrorKind = "idle"
	// ErrConnect: the server could not be reached.
	ErrConnect ErrorKind = "connect"
	// ErrProtocol: the server sent something that is not its protocol.
	ErrProtocol ErrorKind = "protocol"
	// ErrCancelled: the caller cancelled.
	ErrCancelled ErrorKind = "cancelled"
)

// Error is a failed request to a provider.
type Error struct {
	// Service is what was asked: "llm", "stt" or "tts".
	Service string
	Kind    ErrorKind
	// Status is the HTTP status for ErrHTTP.
	Status int
	// Code is the server's error code or type, if it gave one.
	Code    string
	Message string
	// Cause is the failure underneath, for errors.Is and errors.As.
	Cause error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Service != "" {
		b.WriteString(e.Service)
		b.WriteString(": ")
	}
	switch e.Kind {
	case ErrHTTP:
		fmt.Fprintf(&b, "server answered HTTP %d", e.Status)
	case ErrMidStream:
		b.WriteString("the server reported an error mid-stream")
	case ErrTruncated:
		b.WriteString("the response ended early")
	case ErrIdle:
		b.WriteString("server went silent")
	case ErrConnect:
		b.WriteString("server unreachable")
	case ErrProtocol:
		b.WriteString("server sent an unreadable response")
	case ErrCancelled:
		b.WriteString("cancelled")
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Cause }

// Retryable reports whether the same request may succeed later.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case ErrConnect, ErrIdle, ErrTruncated:
		return true
	case ErrHTTP:
		return e.Status == 408 || e.Status == 429 || e.Status >= 500
	}
	return false
}

// AsError returns err as an *Error, if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
