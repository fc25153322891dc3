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
