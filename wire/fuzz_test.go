package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// FuzzUnmarshal checks that no input panics, every failure is a
// *DecodeError, and whatever decodes re-encodes to bytes that decode to the
// same encoding again.
func FuzzUnmarshal(f *testing.F) {
	for _, v := range loadVectors(f) {
		b, _ := hex.DecodeString(v.Hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		env, err := Unmarshal(in)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || (de.Code != CodeMalformed && de.Code != CodeUnknownType) {
				t.Fatalf("error %T %v is not a DecodeError with a protocol code", err, err)
			}
			return
		}
		once, err := Marshal(env)
		if err != nil {
			t.Fatalf("decoded envelope does not encode: %v", err)
		}
		if len(once) > MaxPacketBytes {
			return // widened floats can grow an envelope past the limit
		}
		back, err := Unmarshal(once)
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v\n%x", err, once)
		}
		twice, err := Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("encoding is not stable:\n%x\n%x", once, twice)
		}
	})
}
