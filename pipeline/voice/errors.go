package voice

import (
	"fmt"
	"strings"
)

// ErrorKind classifies a failed recognition or synthesis, as llm.ErrorKind
// does for models.
type ErrorKind string

const (
	// ErrHTTP: the server refused the request with an HTTP error.
	ErrHTTP ErrorKind = "http"
	// ErrConnect: the server could not be reached.
	ErrConnect ErrorKind = "connect"
	// ErrProtocol: the server answered with something that is not its
	// protocol.
	ErrProtocol ErrorKind = "protocol"
	// ErrTruncated: the response ended early.
	ErrTruncated ErrorKind = "truncated"
	// ErrCancelled: the caller cancelled.
	ErrCancelled ErrorKind = "cancelled"
	// ErrServer: the server reported an error inside its stream (a
	// realtime session's error event, an SSE error), where no HTTP status
	// can carry it.
	ErrServer ErrorKind = "server"
)

// Error is a failed speech request.
type Error struct {
	// Service is "stt" or "tts".
	Service string
	Kind    ErrorKind
	// Status is the HTTP status for ErrHTTP.
	Status  int
	Message string
	cause   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Service)
	b.WriteString(": ")
	switch e.Kind {
	case ErrHTTP:
		fmt.Fprintf(&b, "server answered HTTP %d", e.Status)
	case ErrConnect:
		b.WriteString("server unreachable")
	case ErrProtocol:
		b.WriteString("server sent an unreadable response")
	case ErrTruncated:
		b.WriteString("the response ended early")
	case ErrCancelled:
		b.WriteString("cancelled")
	case ErrServer:
		b.WriteString("the server reported an error")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.cause }

// Retryable reports whether the same request may succeed later.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case ErrConnect, ErrTruncated:
		return true
	case ErrHTTP:
		return e.Status == 408 || e.Status == 429 || e.Status >= 500
	}
	return false
}
