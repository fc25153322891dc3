package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// envelopeJSON is the JSON form of an envelope, for people reading
// captured packets and for test vectors.
type envelopeJSON struct {
	StanzaID       int32           `json:"stanzaId"`
	ConversationID string          `json:"conversationId"`
	Type           Type            `json:"type"`
	TypeName       string          `json:"typeName,omitempty"`
	Meta           map[string]any  `json:"meta,omitempty"`
	Body           json.RawMessage `json:"body"`
}

// MarshalJSON writes the envelope with the same keys as on the wire, plus
// typeName for readers.
func (e Envelope) MarshalJSON() ([]byte, error) {
	t := e.Type()
	if t == 0 {
		return nil, fmt.Errorf("wire: cannot encode a body of type %T", e.Body)
	}
	body, err := json.Marshal(e.Body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelopeJSON{e.StanzaID, e.ConversationID, t, t.String(), e.Meta, body})
}

// UnmarshalJSON reads the JSON form. Whole numbers in free-form values
// (meta, tool parameters) become int64, as they would from MessagePack.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	var j envelopeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	info := registry.byType[j.Type]
	if info == nil {
		return fmt.Errorf("wire: unknown message type %d", j.Type)
	}
	bv := reflect.New(info.rtype)
	if err := json.Unmarshal(j.Body, bv.Interface()); err != nil {
		return fmt.Errorf("wire: %s body: %w", info.name, err)
	}
	for _, f := range info.plan.fields {
		if f.kind == kindMap || f.kind == kindAny {
			fv := bv.Elem().Field(f.index)
			if !fv.IsNil() {
				fv.Set(reflect.ValueOf(wholeNumbers(fv.Interface())))
			}
		}
	}
	meta, _ := wholeNumbers(j.Meta).(map[string]any)
	if len(meta) == 0 {
		meta = nil
	}
	*e = Envelope{StanzaID: j.StanzaID, ConversationID: j.ConversationID, Meta: meta, Body: bv.Interface().(Body)}
	return nil
}

func wholeNumbers(x any) any {
	switch v := x.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = wholeNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = wholeNumbers(e)
		}
	}
	return x
}
