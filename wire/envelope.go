package wire

import (
	"bytes"
	"errors"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Envelope is one protocol message. Its type code follows from Body, which
// holds a pointer to one of the registered body structs (or the struct
// itself when encoding).
type Envelope struct {
	StanzaID       int32
	ConversationID string
	Meta           map[string]any
	Body           Body
}

// Type is the type code of the envelope's body, or 0 if the body is not a
// registered type.
func (e *Envelope) Type() Type {
	t, _ := TypeOf(e.Body)
	return t
}

var encoders = sync.Pool{New: func() any {
	return msgpack.NewEncoder(nil)
}}

// Marshal encodes an envelope. It does not enforce MaxPacketBytes: the
// sender decides whether to split or stream a large envelope.
func Marshal(e *Envelope) ([]byte, error) {
	return AppendMarshal(make([]byte, 0, 256), e)
}

// AppendMarshal appends the encoded envelope to dst.
func AppendMarshal(dst []byte, e *Envelope) ([]byte, error) {
	if e.Body == nil {
		return nil, errors.New("wire: no body")
	}
	info := infoOf(e.Body)
	if info == nil {
		return nil, errors.New("wire: cannot encode a body of type " + reflect.TypeOf(e.Body).String())
	}
	bv := reflect.ValueOf(e.Body)
	if bv.Kind() == reflect.Pointer {
		if bv.IsNil() {
			return nil, errors.New("wire: nil body")
		}
		bv = bv.Elem()
	}
	buf := bytes.NewBuffer(dst)
	enc := encoders.Get().(*msgpack.Encoder)
	defer encoders.Put(enc)
	enc.Reset(buf)
	defer enc.Reset(nil)

	n := 4
	if len(e.Meta) > 0 {
		n = 5
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return nil, err
	}
	_ = enc.EncodeString("stanzaId")
	_ = encodeInt(enc, int64(e.StanzaID))
	_ = enc.EncodeString("conversationId")
	_ = enc.EncodeString(e.ConversationID)
	_ = enc.EncodeString("type")
	_ = encodeInt(enc, int64(info.typ))
	if n == 5 {
		_ = enc.EncodeString("meta")
		if err := encodeAny(enc, e.Meta, 0); err != nil {
			return nil, err
		}
	}
	_ = enc.EncodeString("body")
	if err := info.plan.encodeStruct(enc, bv); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type decodeState struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var decoders = sync.Pool{New: func() any {
	s := &decodeState{}
	s.dec = msgpack.NewDecoder(&s.r)
	return s
}}

// Unmarshal decodes one envelope of at most MaxPacketBytes, the most one
// data packet may carry. Errors are *DecodeError.
func Unmarshal(b []byte) (*Envelope, error) { return UnmarshalLimit(b, MaxPacketBytes) }

// UnmarshalLimit decodes an envelope of at most limit bytes: an envelope
// that arrived as a LiveKit byte stream may exceed one packet.
func UnmarshalLimit(b []byte, limit int) (*Envelope, error) {
	if len(b) > limit {
		return nil, malformed("", "envelope of %d bytes exceeds the %d-byte limit", len(b), limit)
	}
	s := decoders.Get().(*decodeState)
	defer decoders.Put(s)
	s.r.Reset(b)
	s.dec.Reset(&s.r)
	defer s.r.Reset(nil)

	env := &Envelope{}
	var (
		typ                          int64
		body                         []byte
		haveStanza, haveConv, haveTy bool
	)
	fail := func(err error) (*Envelope, error) {
		de := err.(*DecodeError)
		de.StanzaID, de.HasStanzaID = env.StanzaID, haveStanza
		if haveTy {
			de.Type = Type(typ)
		}
		return nil, de
	}
	n, err := decodeMapLen(s.dec, at("envelope"))
	if err != nil {
		return fail(err)
	}
	for range n {
		key, err := decodeKey(s.dec, nil)
		if err != nil {
			return fail(err)
		}
		switch key {
		case "stanzaId":
			v, err := decodeInteger(s.dec, at(key))
			if err != nil {
				return fail(err)
			}
			if v < -1<<31 || v >= 1<<31 {
				return fail(malformed(key, "%d does not fit in int32", v))
			}
			env.StanzaID, haveStanza = int32(v), true
		case "conversationId":
			// Empty or nil asks for a new conversation.
			absent, err := skipAbsent(s.dec, at(key))
			if err != nil {
				return fail(err)
			}
			if !absent {
				if env.ConversationID, err = decodeString(s.dec, at(key)); err != nil {
					return fail(err)
				}
			}
			haveConv = true
		case "type":
			if typ, err = decodeInteger(s.dec, at(key)); err != nil {
				return fail(err)
			}
			haveTy = true
		case "meta":
			absent, err := skipAbsent(s.dec, at(key))
			if err != nil {
				return fail(err)
			}
			if !absent {
				if env.Meta, err = decodeMap(s.dec, at(key)); err != nil {
					return fail(err)
				}
			}
		case "body":
			// Kept as a sub-slice and decoded once the type is known, since
			// a client may put body before type.
			start := len(b) - s.r.Len()
			if err := skip(s.dec); err != nil {
				return fail(malformed(key, "%v", err))
			}
			body = b[start : len(b)-s.r.Len()]
		default:
			if err := skip(s.dec); err != nil {
				return fail(malformed(key, "%v", err))
			}
		}
	}
	switch {
	case s.r.Len() != 0:
		return fail(malformed("", "%d bytes after the envelope", s.r.Len()))
	case !haveStanza:
		return fail(malformed("stanzaId", "required field is missing"))
	case !haveConv:
		return fail(malformed("conversationId", "required field is missing"))
	case !haveTy:
		return fail(malformed("type", "required field is missing"))
	case body == nil:
		return fail(malformed("body", "required field is missing"))
	}
	info := registry.byType[Type(typ)]
	if typ < 0 || typ > 0xffff || info == nil {
		return fail(&DecodeError{Code: CodeUnknownType, Field: "type", Reason: "unknown message type " + itoa(typ)})
	}
	s.r.Reset(body)
	s.dec.Reset(&s.r)
	bv := reflect.New(info.rtype)
	if err := info.plan.decodeStruct(s.dec, bv.Elem(), at("body")); err != nil {
		return fail(err)
	}
	env.Body = bv.Interface().(Body)
	return env, nil
}
