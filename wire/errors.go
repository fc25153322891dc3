package wire

import (
	"fmt"
	"strconv"
)

// MaxPacketBytes is the largest encoded envelope that may travel as one
// LiveKit data packet (LiveKit documents 15 KiB for reliable packets; the
// Go SDK silently drops packets of 64 KiB and more).
const MaxPacketBytes = 15 * 1024

// DecodeError says why bytes are not a valid envelope. Code is the
// ErrorMessage code to answer with: CodeMalformed or CodeUnknownType.
type DecodeError struct {
	Code int32
	// Field is the dotted path of the offending key, such as
	// "body.stepIndex", when one is to blame.
	Field  string
	Reason string
	// StanzaID is the envelope's stanza id when it could be read before the
	// error, so the reply can name the offending stanza.
	StanzaID    int32
	HasStanzaID bool
	// Type is the envelope's type code when it could be read.
	Type Type
}

func (e *DecodeError) Error() string {
	msg := "wire: "
	if e.Field != "" {
		msg += e.Field + ": "
	}
	msg += e.Reason
	if e.HasStanzaID {
		msg += " (stanza " + strconv.FormatInt(int64(e.StanzaID), 10) + ")"
	}
	return msg
}

func malformed(field, format string, args ...any) *DecodeError {
	return &DecodeError{Code: CodeMalformed, Field: field, Reason: fmt.Sprintf(format, args...)}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ErrorOption qualifies an ErrorMessage built by NewError.
type ErrorOption func(*ErrorMessage)

// NewError builds the ErrorMessage every part of the server sends: a
// recoverable warning unless options say otherwise.
func NewError(conversationID string, code int32, msg string, opts ...ErrorOption) *ErrorMessage {
	e := &ErrorMessage{ID: NewID("err"), ConversationID: conversationID, Code: code, Message: msg, Severity: SeverityWarning, Recoverable: true}
	for _, o := range opts {
		o(e)
	}
	return e
}

// About names the message the error is about.
func About(originatingID string) ErrorOption {
	return func(e *ErrorMessage) { e.OriginatingID = originatingID }
}

// Severe marks an error the client must show as one, though the
// conversation goes on (a malformed envelope).
func Severe() ErrorOption { return func(e *ErrorMessage) { e.Severity = SeverityError } }

// Unrecoverable marks an error the client cannot continue from without
// starting again.
func Unrecoverable() ErrorOption {
	return func(e *ErrorMessage) { e.Severity, e.Recoverable = SeverityError, false }
}
