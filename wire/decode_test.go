package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// raw is spliced into a built message as it is.
type raw []byte

// build writes a map from alternating keys and values; values of type raw
// are written verbatim, kv values become nested maps.
func build(t testing.TB, kvs ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	writeMap(t, enc, &buf, kvs)
	return buf.Bytes()
}

type kv []any

func writeMap(t testing.TB, enc *msgpack.Encoder, buf *bytes.Buffer, kvs []any) {
	if err := enc.EncodeMapLen(len(kvs) / 2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kvs); i += 2 {
		_ = enc.EncodeString(kvs[i].(string))
		switch v := kvs[i+1].(type) {
		case raw:
			buf.Write(v)
		case kv:
			writeMap(t, enc, buf, v)
		default:
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func h(s string) raw {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// step builds a ReasoningStep envelope whose stepIndex is given as raw
// bytes, with extra body pairs appended.
func step(t testing.TB, stepIndex raw, extra ...any) []byte {
	body := kv{"id", "rs_1", "conversationId", "c", "previousId", "msg_1", "content", "thinking", "stepIndex", stepIndex}
	body = append(body, extra...)
	return build(t, "stanzaId", -1, "conversationId", "c", "type", 5, "body", body)
}

func mustStep(t *testing.T, b []byte) *ReasoningStep {
	t.Helper()
	env, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("decode %x: %v", b, err)
	}
	return env.Body.(*ReasoningStep)
}

func TestDecodeAcceptsEveryIntegerWidth(t *testing.T) {
	for name, enc := range map[string]string{
		"fixint": "03", "uint8": "cc 03", "uint16": "cd 00 03", "uint32": "ce 00 00 00 03",
		"uint64": "cf 00 00 00 00 00 00 00 03", "int8": "d0 03", "int16": "d1 00 03",
		"int32": "d2 00 00 00 03", "int64": "d3 00 00 00 00 00 00 00 03",
		"float64": "cb 40 08 00 00 00 00 00 00", "float32": "ca 40 40 00 00",
	} {
		t.Run(name, func(t *testing.T) {
			if got := mustStep(t, step(t, h(enc))).StepIndex; got != 3 {
				t.Fatalf("stepIndex = %d, want 3", got)
			}
		})
	}
}

func TestDecodeJavaScriptTimestamps(t *testing.T) {
	user := func(ts raw) []byte {
		return build(t, "stanzaId", 1, "conversationId", "c", "type", 2,
			"body", kv{"id", "m", "conversationId", "c", "content", "hi", "timestamp", ts})
	}
	const ms = 1767225600123
	cases := map[string]raw{
		"Date.now() through msgpackr (float64)": h("cb 42 79 b7 6d aa 87 b0 00"),
		"int64":                                 h("d3 00 00 01 9b 76 da a8 7b"),
		"Date through msgpackr (timestamp 64)":  h("d7 ff 1d 53 53 00 69 55 b9 00"),
	}
	for name, ts := range cases {
		t.Run(name, func(t *testing.T) {
			env, err := Unmarshal(user(ts))
			if err != nil {
				t.Fatal(err)
			}
			if got := env.Body.(*UserMessage).Timestamp; got != ms {
				t.Fatalf("timestamp = %d, want %d", got, ms)
			}
		})
	}
}

func TestDecodeNilAndUndefinedForOptionalFields(t *testing.T) {
	undefined := h("d4 00 00")
	b := build(t, "stanzaId", 3, "conversationId", undefined, "type", 10, "meta", h("c0"),
		"body", kv{"conversationId", "c", "targetId", undefined, "reason", h("c0"), "stopType", undefined})
	env, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := *env.Body.(*ControlStop); got != (ControlStop{ConversationID: "c"}) {
		t.Fatalf("got %+v", got)
	}
	if env.ConversationID != "" || env.Meta != nil {
		t.Fatalf("envelope: %+v", env)
	}
}

func TestDecodeIgnoresUnknownKeysAndKeyOrder(t *testing.T) {
	b := build(t,
		"future", kv{"nested", []any{1, "x", map[string]any{"deep": true}}},
		"body", kv{"extra", h("d4 00 00"), "id", "rs_1", "conversationId", "c", "previousId", "m", "content", "x", "stepIndex", 1, "newField", []any{1.5}},
		"type", 5, "conversationId", "c", "stanzaId", -9)
	env, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if env.StanzaID != -9 || env.Body.(*ReasoningStep).Content != "x" {
		t.Fatalf("got %+v %+v", env, env.Body)
	}
}

func TestDecodeFreeFormValues(t *testing.T) {
	b := build(t, "stanzaId", 4, "conversationId", "c", "type", 6, "body", kv{
		"id", "t", "toolName", "calc", "execution", "server",
		"parameters", kv{"a", h("cb 40 00 00 00 00 00 00 00"), "b", 2.5, "c", h("d4 00 00"), "d", []any{"x", true}, "e", h("c4 02 01 02")},
	})
	env, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	p := env.Body.(*ToolUseRequest).Parameters
	if p["a"] != int64(2) || p["b"] != 2.5 || p["c"] != nil || len(p["d"].([]any)) != 2 || !bytes.Equal(p["e"].([]byte), []byte{1, 2}) {
		t.Fatalf("parameters = %#v", p)
	}
}

func TestDecodeRejects(t *testing.T) {
	okBody := kv{"id", "rs_1", "conversationId", "c", "previousId", "m", "content", "x", "stepIndex", 1}
	deep := raw{}
	for range 40 {
		deep = append(deep, 0x91)
	}
	deep = append(deep, 0x01)
	cases := []struct {
		name      string
		in        []byte
		code      int32
		field     string
		hasStanza bool
	}{
		{"not a map", h("93 01 02 03"), CodeMalformed, "envelope", false},
		{"empty input", nil, CodeMalformed, "envelope", false},
		{"unknown type", build(t, "stanzaId", 7, "conversationId", "c", "type", 99, "body", kv{}), CodeUnknownType, "type", true},
		{"type zero", build(t, "stanzaId", 7, "conversationId", "c", "type", 0, "body", kv{}), CodeUnknownType, "type", true},
		{"type beyond uint16 aliasing a known one", build(t, "stanzaId", 7, "conversationId", "c", "type", 65536+5, "body", okBody), CodeUnknownType, "type", true},
		{"missing required body field", build(t, "stanzaId", 7, "conversationId", "c", "type", 5, "body", kv{"id", "rs_1", "conversationId", "c", "previousId", "m", "content", "x"}), CodeMalformed, "body.stepIndex", true},
		{"undefined required field", step(t, h("d4 00 00")), CodeMalformed, "body.stepIndex", true},
		{"nil required field", step(t, h("c0")), CodeMalformed, "body.stepIndex", true},
		{"string where an integer belongs", step(t, h("a1 31")), CodeMalformed, "body.stepIndex", true},
		{"fractional float where an integer belongs", step(t, h("cb 3f f8 00 00 00 00 00 00")), CodeMalformed, "body.stepIndex", true},
		{"int32 overflow", step(t, h("ce 80 00 00 00")), CodeMalformed, "body.stepIndex", true},
		{"uint64 beyond int64", step(t, h("cf ff ff ff ff ff ff ff ff")), CodeMalformed, "body.stepIndex", true},
		{"integer where a string belongs", build(t, "stanzaId", 7, "conversationId", "c", "type", 5, "body", kv{"id", 5, "conversationId", "c", "previousId", "m", "content", "x", "stepIndex", 1}), CodeMalformed, "body.id", true},
		{"bytes where a string belongs", build(t, "stanzaId", 7, "conversationId", "c", "type", 5, "body", kv{"id", []byte("rs"), "conversationId", "c", "previousId", "m", "content", "x", "stepIndex", 1}), CodeMalformed, "body.id", true},
		{"integer where a boolean belongs", step(t, h("01"), "partial", 1), CodeMalformed, "body.partial", true},
		{"unknown extension", step(t, h("01"), "totalSteps", h("d4 05 00")), CodeMalformed, "body.totalSteps", true},
		{"body is not a map", build(t, "stanzaId", 7, "conversationId", "c", "type", 5, "body", "x"), CodeMalformed, "body", true},
		{"missing body", build(t, "stanzaId", 7, "conversationId", "c", "type", 5), CodeMalformed, "body", true},
		{"missing stanzaId", build(t, "conversationId", "c", "type", 5, "body", okBody), CodeMalformed, "stanzaId", false},
		{"stanzaId beyond int32", build(t, "stanzaId", int64(1)<<32, "conversationId", "c", "type", 5, "body", okBody), CodeMalformed, "stanzaId", false},
		{"missing conversationId", build(t, "stanzaId", 7, "type", 5, "body", okBody), CodeMalformed, "conversationId", true},
		{"non-string key", append(h("85 01 02"), build(t, "stanzaId", 7, "conversationId", "c", "type", 5, "body", okBody)[1:]...), CodeMalformed, "", false},
		{"trailing bytes", append(step(t, h("01")), 0xc0), CodeMalformed, "", true},
		{"truncated", step(t, h("01"))[:30], CodeMalformed, "", true},
		{"nested too deeply", build(t, "stanzaId", 7, "conversationId", "c", "type", 6, "body", kv{"id", "t", "toolName", "x", "execution", "server", "parameters", kv{"p", deep}}), CodeMalformed, "", true},
		{"client tool without a name", build(t, "stanzaId", 7, "conversationId", "c", "type", 12, "body", kv{"tools", []any{map[string]any{"description": "x"}}}), CodeMalformed, "body.tools[0].name", true},
		{"client tools not an array", build(t, "stanzaId", 7, "conversationId", "c", "type", 12, "body", kv{"tools", "x"}), CodeMalformed, "body.tools", true},
		{"over 15 KiB", step(t, h("01"), "pad", strings.Repeat("x", MaxPacketBytes)), CodeMalformed, "", false},
		// Lengths that claim more than the packet holds. The body is
		// delimited before it is decoded, so a length inside it is the
		// body's fault.
		{"string claiming 4 GiB", step(t, h("01"), "content", h("db ff ff ff ff 41")), CodeMalformed, "body", true},
		{"key claiming 4 GiB", h("81 db ff ff ff ff"), CodeMalformed, "", false},
		{"bytes claiming 4 GiB in a free-form value", build(t, "stanzaId", 7, "conversationId", "c", "type", 6, "body", kv{"id", "t", "toolName", "x", "execution", "server", "parameters", kv{"p", h("c6 ff ff ff ff 00")}}), CodeMalformed, "body", true},
		{"unknown field claiming 4 GiB", step(t, h("01"), "later", h("c6 ff ff ff ff 00")), CodeMalformed, "body", true},
		{"unknown envelope key claiming 4 GiB", build(t, "stanzaId", 7, "extra", h("db ff ff ff ff 00")), CodeMalformed, "extra", true},
		{"body array claiming 4 billion items", build(t, "stanzaId", 7, "body", h("dd ff ff ff ff 00")), CodeMalformed, "body", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, err := Unmarshal(c.in)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, %v; want a *DecodeError", env, err)
			}
			if de.Code != c.code {
				t.Errorf("code %d, want %d (%v)", de.Code, c.code, de)
			}
			if c.field != "" && de.Field != c.field {
				t.Errorf("field %q, want %q (%v)", de.Field, c.field, de)
			}
			if de.HasStanzaID != c.hasStanza {
				t.Errorf("HasStanzaID = %v, want %v (%v)", de.HasStanzaID, c.hasStanza, de)
			}
		})
	}
}

// TestHostileLengthsCostWhatThePacketHolds: a packet costs the decoder
// memory in proportion to its size, whatever lengths it claims and however
// its values nest. Claimed lengths used to be allocated before reading (4
// GiB for a five-byte header), and error paths were built for every value
// (a long key above a long array cost the square of the packet).
func TestHostileLengthsCostWhatThePacketHolds(t *testing.T) {
	long := make(raw, 0, 7000)
	long = append(long, 0xdc, 0x1b, 0x58) // array16 of 7000
	for range 7000 {
		long = append(long, 0x00)
	}
	cases := []struct {
		name string
		in   []byte
	}{
		{"bytes claiming 4 GiB", step(t, h("01"), "later", h("c6 ff ff ff ff 00"))},
		{"a long key above a long array", build(t, "stanzaId", 7, "conversationId", "c", "type", 6, "body", kv{"id", "t", "toolName", "x", "execution", "server", "parameters", kv{strings.Repeat("k", 7000), long}})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.in) > MaxPacketBytes {
				t.Fatalf("%d bytes: the case does not fit a packet", len(c.in))
			}
			const runs = 50
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				_, _ = Unmarshal(c.in)
			}
			runtime.ReadMemStats(&after)
			// What an honest packet of this size may cost: its values
			// and their slices, a few times over.
			per := (after.TotalAlloc - before.TotalAlloc) / runs
			if limit := uint64(100 * MaxPacketBytes); per > limit {
				t.Errorf("%d bytes allocated per decode of %d bytes; want at most %d", per, len(c.in), limit)
			}
		})
	}
}

func TestDecodeEveryTruncation(t *testing.T) {
	for _, v := range loadVectors(t) {
		b, _ := hex.DecodeString(v.Hex)
		for n := range len(b) {
			if _, err := Unmarshal(b[:n]); err == nil {
				t.Fatalf("%s cut at %d of %d bytes decoded without error", v.Name, n, len(b))
			}
		}
	}
}

func TestEncodeIntegersForJavaScript(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{
		{5, "05"}, {-2, "fe"}, {-2147483648, "d280000000"}, {200, "ccc8"}, {70000, "ce00011170"},
		{4294967295, "ceffffffff"},
		// Beyond 32 bits, a float64 keeps msgpackr from making a BigInt.
		{1767225600123, "cb4279b76daa87b000"},
		{-4294967296, "cbc1f0000000000000"},
		// Beyond 2^53 a float would lose precision, so it stays an integer.
		{math.MaxInt64, "cf7fffffffffffffff"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		if err := encodeInt(msgpack.NewEncoder(&buf), c.n); err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(buf.Bytes()); got != c.want {
			t.Errorf("%d encodes as %s, want %s", c.n, got, c.want)
		}
	}
}

func TestEncodeRejectsUnknownBodies(t *testing.T) {
	// An unregistered type no longer compiles as a Body; a missing one
	// is still refused.
	if _, err := Marshal(&Envelope{}); err == nil {
		t.Fatal("encoded an envelope without a body")
	}
	if _, err := Marshal(&Envelope{Body: (*ReasoningStep)(nil)}); err == nil {
		t.Fatal("encoded a nil body")
	}
}

func TestEncodeToolResultStruct(t *testing.T) {
	type forecast struct {
		TempC int    `json:"tempC"`
		Sky   string `json:"sky"`
	}
	b, err := Marshal(&Envelope{StanzaID: -1, ConversationID: "c", Body: &ToolUseResult{RequestID: "t", Success: true, Result: forecast{24, "sunny"}}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	r := env.Body.(*ToolUseResult).Result.(map[string]any)
	if r["tempC"] != int64(24) || r["sky"] != "sunny" {
		t.Fatalf("result = %#v", r)
	}
}
