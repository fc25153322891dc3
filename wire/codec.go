package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

type fieldKind uint8

const (
	kindString fieldKind = iota
	kindBool
	kindInt      // signed, width in fieldPlan.bits
	kindUint     // unsigned, width in fieldPlan.bits
	kindFloatPtr // *float64, so that 0 can be told from absent
	kindStrings  // []string
	kindBytes    // []byte
	kindMap      // map[string]any
	kindAny      // any MessagePack value
	kindStructs  // a slice of structs, each a map with its own plan
)

type fieldPlan struct {
	name     string
	index    int
	kind     fieldKind
	bits     int
	optional bool
	elem     *structPlan // for kindStructs
}

type structPlan struct {
	fields []fieldPlan
}

// planFor reads a body struct's json tags once, at registration; an
// unsupported field type is a programming error and panics at start-up.
func planFor(rt reflect.Type) *structPlan {
	p := &structPlan{}
	for i := range rt.NumField() {
		sf := rt.Field(i)
		tag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			panic("wire: field without a json name: " + rt.Name() + "." + sf.Name)
		}
		f := fieldPlan{name: name, index: i, optional: opts == "omitempty"}
		switch t := sf.Type; {
		case t.Kind() == reflect.String:
			f.kind = kindString
		case t.Kind() == reflect.Bool:
			f.kind = kindBool
		case t.Kind() == reflect.Int16 || t.Kind() == reflect.Int32 || t.Kind() == reflect.Int64:
			f.kind, f.bits = kindInt, t.Bits()
		case t.Kind() == reflect.Uint16 || t.Kind() == reflect.Uint32 || t.Kind() == reflect.Uint64:
			f.kind, f.bits = kindUint, t.Bits()
		case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Float64:
			f.kind = kindFloatPtr
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
			f.kind = kindStrings
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
			f.kind = kindBytes
		case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Interface:
			f.kind = kindMap
		case t.Kind() == reflect.Interface:
			f.kind = kindAny
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			f.kind, f.elem = kindStructs, planFor(t.Elem())
		default:
			panic(fmt.Sprintf("wire: unsupported field type %s in %s.%s", t, rt.Name(), sf.Name))
		}
		p.fields = append(p.fields, f)
	}
	if len(p.fields) > 64 {
		panic("wire: too many fields in " + rt.Name())
	}
	return p
}

// encodeStruct writes v (a struct value) as a map with the plan's keys.
func (p *structPlan) encodeStruct(enc *msgpack.Encoder, v reflect.Value) error {
	n := 0
	for i := range p.fields {
		f := &p.fields[i]
		if !f.optional || !v.Field(f.index).IsZero() {
			n++
		}
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.optional && fv.IsZero() {
			continue
		}
		if err := enc.EncodeString(f.name); err != nil {
			return err
		}
		if err := encodeField(enc, f, fv); err != nil {
			return err
		}
	}
	return nil
}

func encodeField(enc *msgpack.Encoder, f *fieldPlan, v reflect.Value) error {
	switch f.kind {
	case kindString:
		return enc.EncodeString(v.String())
	case kindBool:
		return enc.EncodeBool(v.Bool())
	case kindInt:
		return encodeInt(enc, v.Int())
	case kindUint:
		return encodeUint(enc, v.Uint())
	case kindFloatPtr:
		return enc.EncodeFloat64(v.Elem().Float())
	case kindStrings:
		if err := enc.EncodeArrayLen(v.Len()); err != nil {
			return err
		}
		for i := range v.Len() {
			if err := enc.EncodeString(v.Index(i).String()); err != nil {
				return err
			}
		}
		return nil
	case kindBytes:
		return enc.EncodeBytes(v.Bytes())
	case kindMap:
		if v.IsNil() {
			// A required map is sent empty rather than nil, which a
			// receiver would read as missing.
			return enc.EncodeMapLen(0)
		}
		return encodeAny(enc, v.Interface(), 0)
	case kindStructs:
		if err := enc.EncodeArrayLen(v.Len()); err != nil {
			return err
		}
		for i := range v.Len() {
			if err := f.elem.encodeStruct(enc, v.Index(i)); err != nil {
				return err
			}
		}
		return nil
	default: // kindAny
		return encodeAny(enc, v.Interface(), 0)
	}
}

// encodeInt writes n in the fewest bytes a JavaScript decoder reads as a
// Number. msgpackr turns every 64-bit integer into a BigInt, so integers
// beyond 32 bits (millisecond timestamps) go out as float64, which is
// exact up to 2^53 and is what msgpackr itself writes for Date.now().
func encodeInt(enc *msgpack.Encoder, n int64) error {
	switch {
	case n >= math.MinInt32 && n <= math.MaxUint32:
		return enc.EncodeInt(n)
	case n >= -1<<53 && n <= 1<<53:
		return enc.EncodeFloat64(float64(n))
	}
	return enc.EncodeInt(n)
}

func encodeUint(enc *msgpack.Encoder, n uint64) error {
	if n <= 1<<53 {
		return encodeInt(enc, int64(n))
	}
	return enc.EncodeUint(n)
}

// encodeAny writes a free-form value with the same integer rule as typed
// fields and map keys in sorted order, so that encoding is deterministic.
func encodeAny(enc *msgpack.Encoder, x any, depth int) error {
	if depth > maxDepth {
		return errors.New("wire: value nested too deeply")
	}
	switch v := x.(type) {
	case nil:
		return enc.EncodeNil()
	case string:
		return enc.EncodeString(v)
	case bool:
		return enc.EncodeBool(v)
	case []byte:
		return enc.EncodeBytes(v)
	case int:
		return encodeInt(enc, int64(v))
	case int8:
		return encodeInt(enc, int64(v))
	case int16:
		return encodeInt(enc, int64(v))
	case int32:
		return encodeInt(enc, int64(v))
	case int64:
		return encodeInt(enc, v)
	case uint:
		return encodeUint(enc, uint64(v))
	case uint8:
		return encodeUint(enc, uint64(v))
	case uint16:
		return encodeUint(enc, uint64(v))
	case uint32:
		return encodeUint(enc, uint64(v))
	case uint64:
		return encodeUint(enc, v)
	case float32:
		return enc.EncodeFloat64(float64(v))
	case float64:
		return enc.EncodeFloat64(v)
	case map[string]any:
		if err := enc.EncodeMapLen(len(v)); err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := encodeAny(enc, v[k], depth+1); err != nil {
				return err
			}
		}
		return nil
	case []any:
		if err := enc.EncodeArrayLen(len(v)); err != nil {
			return err
		}
		for _, e := range v {
			if err := encodeAny(enc, e, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	// Other Go values (a tool's result struct, say) take their JSON shape,
	// the shape the model and the clients see them in.
	j, err := json.Marshal(x)
	if err != nil {
		return fmt.Errorf("wire: cannot encode %T: %w", x, err)
	}
	var generic any
	if err := json.Unmarshal(j, &generic); err != nil {
		return err
	}
	return encodeAny(enc, wholeNumbers(generic), depth+1)
}

// decodeStruct reads a map at w into v (an addressable struct value).
func (p *structPlan) decodeStruct(dec *msgpack.Decoder, v reflect.Value, w *where) error {
	n, err := decodeMapLen(dec, w)
	if err != nil {
		return err
	}
	var seen uint64
	for range n {
		key, err := decodeKey(dec, w)
		if err != nil {
			return err
		}
		idx := -1
		for i := range p.fields {
			if p.fields[i].name == key {
				idx = i
				break
			}
		}
		if idx < 0 {
			if err := skip(dec); err != nil {
				return malformed(w.key(key).String(), "%v", err)
			}
			continue
		}
		f := &p.fields[idx]
		present, err := decodeField(dec, f, v.Field(f.index), w.key(f.name))
		if err != nil {
			return err
		}
		if present {
			seen |= 1 << idx
		}
	}
	for i := range p.fields {
		if f := &p.fields[i]; !f.optional && seen&(1<<i) == 0 {
			return malformed(w.key(f.name).String(), "required field is missing")
		}
	}
	return nil
}

// decodeField reads one value into v and reports whether a value (not nil
// or undefined) was there.
func decodeField(dec *msgpack.Decoder, f *fieldPlan, v reflect.Value, path *where) (bool, error) {
	absent, err := skipAbsent(dec, path)
	if err != nil {
		return false, err
	}
	if absent {
		if !f.optional {
			return false, malformed(path.String(), "required field is nil or undefined")
		}
		v.SetZero()
		return false, nil
	}
	switch f.kind {
	case kindString:
		s, err := decodeString(dec, path)
		if err != nil {
			return false, err
		}
		v.SetString(s)
	case kindBool:
		c, err := dec.PeekCode()
		if err != nil {
			return false, malformed(path.String(), "truncated value")
		}
		if c != msgpcode.True && c != msgpcode.False {
			return false, wrongType(path.String(), "a boolean", c)
		}
		b, _ := dec.DecodeBool()
		v.SetBool(b)
	case kindInt:
		n, err := decodeInteger(dec, path)
		if err != nil {
			return false, err
		}
		if lim := int64(1) << (f.bits - 1); f.bits < 64 && (n < -lim || n >= lim) {
			return false, malformed(path.String(), "%d does not fit in int%d", n, f.bits)
		}
		v.SetInt(n)
	case kindUint:
		n, err := decodeInteger(dec, path)
		if err != nil {
			return false, err
		}
		if n < 0 || (f.bits < 64 && n >= int64(1)<<f.bits) {
			return false, malformed(path.String(), "%d does not fit in uint%d", n, f.bits)
		}
		v.SetUint(uint64(n))
	case kindFloatPtr:
		x, err := decodeNumber(dec, path)
		if err != nil {
			return false, err
		}
		v.Set(reflect.ValueOf(&x))
	case kindStrings:
		n, err := decodeArrayLen(dec, path)
		if err != nil {
			return false, err
		}
		out := make([]string, 0, min(n, 64))
		for i := range n {
			s, err := decodeString(dec, path.elem(i))
			if err != nil {
				return false, err
			}
			out = append(out, s)
		}
		v.Set(reflect.ValueOf(out))
	case kindBytes:
		c, err := dec.PeekCode()
		if err != nil {
			return false, malformed(path.String(), "truncated value")
		}
		if !msgpcode.IsBin(c) && !msgpcode.IsString(c) {
			return false, wrongType(path.String(), "bytes", c)
		}
		if err := fits(dec, path); err != nil {
			return false, err
		}
		b, err := dec.DecodeBytes()
		if err != nil {
			return false, malformed(path.String(), "truncated value")
		}
		v.SetBytes(b)
	case kindMap:
		m, err := decodeMap(dec, path)
		if err != nil {
			return false, err
		}
		v.Set(reflect.ValueOf(m))
	case kindStructs:
		n, err := decodeArrayLen(dec, path)
		if err != nil {
			return false, err
		}
		out := reflect.MakeSlice(v.Type(), 0, min(n, 16))
		for i := range n {
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := f.elem.decodeStruct(dec, elem, path.elem(i)); err != nil {
				return false, err
			}
			out = reflect.Append(out, elem)
		}
		v.Set(out)
	case kindAny:
		x, err := decodeAny(dec, path)
		if err != nil {
			return false, err
		}
		if x == nil {
			return false, nil
		}
		v.Set(reflect.ValueOf(&x).Elem())
	}
	return true, nil
}

// skipAbsent consumes nil or msgpackr's undefined (fixext1 type 0) and
// reports whether it did.
func skipAbsent(dec *msgpack.Decoder, path *where) (bool, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return false, malformed(path.String(), "truncated value")
	}
	switch c {
	case msgpcode.Nil:
		_ = dec.DecodeNil()
		return true, nil
	case msgpcode.FixExt1:
		// No field takes a one-byte extension, so anything but undefined
		// is rejected here.
		var hdr [3]byte
		if err := dec.ReadFull(hdr[:]); err != nil {
			return false, malformed(path.String(), "truncated value")
		}
		if hdr[1] == 0 {
			return true, nil
		}
		return false, malformed(path.String(), "unsupported extension type %d", int8(hdr[1]))
	}
	return false, nil
}

// decodeKey reads a key of the map at w.
func decodeKey(dec *msgpack.Decoder, w *where) (string, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return "", malformed(w.String(), "truncated map")
	}
	if !msgpcode.IsString(c) {
		return "", wrongType(w.String(), "string keys", c)
	}
	if err := fits(dec, w); err != nil {
		return "", err
	}
	k, err := dec.DecodeString()
	if err != nil {
		return "", malformed(w.String(), "truncated key")
	}
	return k, nil
}

func decodeString(dec *msgpack.Decoder, path *where) (string, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return "", malformed(path.String(), "truncated value")
	}
	if !msgpcode.IsString(c) {
		return "", wrongType(path.String(), "a string", c)
	}
	if err := fits(dec, path); err != nil {
		return "", err
	}
	s, err := dec.DecodeString()
	if err != nil {
		return "", malformed(path.String(), "truncated string")
	}
	return s, nil
}

func decodeMapLen(dec *msgpack.Decoder, path *where) (int, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, malformed(path.String(), "truncated value")
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return 0, wrongType(path.String(), "a map", c)
	}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return 0, malformed(path.String(), "truncated map")
	}
	return n, nil
}

func decodeArrayLen(dec *msgpack.Decoder, path *where) (int, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, malformed(path.String(), "truncated value")
	}
	if !msgpcode.IsFixedArray(c) && c != msgpcode.Array16 && c != msgpcode.Array32 {
		return 0, wrongType(path.String(), "an array", c)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, malformed(path.String(), "truncated array")
	}
	return n, nil
}

// decodeInteger accepts every integer width, an integral float (what
// msgpackr makes of Date.now()) and a MessagePack timestamp (a JS Date),
// which becomes milliseconds.
func decodeInteger(dec *msgpack.Decoder, path *where) (int64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, malformed(path.String(), "truncated value")
	}
	switch {
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		if c == msgpcode.Uint64 {
			u, err := dec.DecodeUint64()
			if err != nil {
				return 0, malformed(path.String(), "truncated integer")
			}
			if u > math.MaxInt64 {
				return 0, malformed(path.String(), "%d is out of range", u)
			}
			return int64(u), nil
		}
		n, err := dec.DecodeInt64()
		if err != nil {
			return 0, malformed(path.String(), "truncated integer")
		}
		return n, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		x, err := dec.DecodeFloat64()
		if err != nil {
			return 0, malformed(path.String(), "truncated number")
		}
		if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
			return 0, malformed(path.String(), "%v is not an integer", x)
		}
		return int64(x), nil
	case msgpcode.IsExt(c):
		ms, err := decodeTimestampMs(dec, path)
		if err != nil {
			return 0, err
		}
		return ms, nil
	}
	return 0, wrongType(path.String(), "an integer", c)
}

func decodeNumber(dec *msgpack.Decoder, path *where) (float64, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return 0, malformed(path.String(), "truncated value")
	}
	if c == msgpcode.Float || c == msgpcode.Double {
		x, err := dec.DecodeFloat64()
		if err != nil {
			return 0, malformed(path.String(), "truncated number")
		}
		return x, nil
	}
	n, err := decodeInteger(dec, path)
	return float64(n), err
}

// decodeTimestampMs reads a MessagePack timestamp extension (type −1).
func decodeTimestampMs(dec *msgpack.Decoder, path *where) (int64, error) {
	id, n, err := dec.DecodeExtHeader()
	if err != nil {
		return 0, malformed(path.String(), "truncated extension")
	}
	if id != -1 || (n != 4 && n != 8 && n != 12) {
		return 0, malformed(path.String(), "unsupported extension type %d", id)
	}
	var b [12]byte
	if err := dec.ReadFull(b[:n]); err != nil {
		return 0, malformed(path.String(), "truncated extension")
	}
	var sec, nsec int64
	switch n {
	case 4:
		sec = int64(binary.BigEndian.Uint32(b[:4]))
	case 8:
		v := binary.BigEndian.Uint64(b[:8])
		nsec, sec = int64(v>>34), int64(v&(1<<34-1))
	case 12:
		nsec = int64(binary.BigEndian.Uint32(b[:4]))
		sec = int64(binary.BigEndian.Uint64(b[4:12]))
	}
	return sec*1000 + nsec/1_000_000, nil
}

func decodeMap(dec *msgpack.Decoder, path *where) (map[string]any, error) {
	n, err := decodeMapLen(dec, path)
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, min(n, 16))
	for range n {
		k, err := decodeKey(dec, path)
		if err != nil {
			return nil, err
		}
		x, err := decodeAny(dec, path.key(k))
		if err != nil {
			return nil, err
		}
		m[k] = x
	}
	return m, nil
}

// maxDepth bounds nesting in free-form values so that hostile input cannot
// exhaust the stack.
const maxDepth = 32

// decodeAny reads a free-form value (tool parameters, meta): integers
// become int64, floats float64, undefined becomes nil and timestamps
// milliseconds. Maps must have string keys.
func decodeAny(dec *msgpack.Decoder, path *where) (any, error) {
	if path.depth > maxDepth {
		return nil, malformed(path.String(), "nested too deeply")
	}
	absent, err := skipAbsent(dec, path)
	if err != nil || absent {
		return nil, err
	}
	c, _ := dec.PeekCode()
	switch {
	case msgpcode.IsString(c):
		return decodeString(dec, path)
	case c == msgpcode.True || c == msgpcode.False:
		b, _ := dec.DecodeBool()
		return b, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		// A whole float is an integer that came through a JavaScript
		// Number (msgpackr writes Date.now() this way).
		x, err := decodeNumber(dec, path)
		if err == nil && x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
			return int64(x), nil
		}
		return x, err
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64) || msgpcode.IsExt(c):
		return decodeInteger(dec, path)
	case msgpcode.IsBin(c):
		if err := fits(dec, path); err != nil {
			return nil, err
		}
		b, err := dec.DecodeBytes()
		if err != nil {
			return nil, malformed(path.String(), "truncated bytes")
		}
		return b, nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return decodeMap(dec, path)
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, _ := decodeArrayLen(dec, path)
		out := make([]any, 0, min(n, 64))
		for i := range n {
			x, err := decodeAny(dec, path.elem(i))
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	return nil, wrongType(path.String(), "a value", c)
}

func wrongType(path, want string, c byte) *DecodeError {
	return malformed(path, "want %s, got %s", want, codeName(c))
}

func codeName(c byte) string {
	switch {
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		return "an integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "a float"
	case msgpcode.IsString(c):
		return "a string"
	case msgpcode.IsBin(c):
		return "bytes"
	case c == msgpcode.True || c == msgpcode.False:
		return "a boolean"
	case c == msgpcode.Nil:
		return "nil"
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return "a map"
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return "an array"
	case msgpcode.IsExt(c):
		return "an extension"
	}
	return fmt.Sprintf("code 0x%02x", c)
}

// where is where a value sits in an envelope ("body.toolCalls[2].name"),
// for a DecodeError. It is spelled out only for an error: a path string
// built for every value would let a hostile packet of long keys above long
// arrays cost the square of its size, in allocations and in time.
type where struct {
	up    *where
	name  string
	index int // an array element's; -1 for a map key's value
	depth int
}

func at(name string) *where { return &where{name: name, index: -1} }

func (w *where) key(k string) *where { return &where{up: w, name: k, index: -1, depth: w.depth + 1} }

func (w *where) elem(i int) *where { return &where{up: w, index: i, depth: w.depth + 1} }

func (w *where) String() string {
	if w == nil {
		return ""
	}
	up := w.up.String()
	switch {
	case w.index >= 0:
		return up + "[" + itoa(int64(w.index)) + "]"
	case up == "":
		return w.name
	default:
		return up + "." + w.name
	}
}
