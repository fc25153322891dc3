// Left out of the fuzzing build (scripts/test fuzzes with -tags fuzzing):
// fuzzing instruments every package its test binary imports, and testenv
// brings some 430 more (571 against 142) for this file alone.

//go:build !fuzzing

package wire

import (
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
)

// TestJavaScriptInterop runs the golden vectors through @msgpack/msgpack
// and msgpackr in Node: Go must decode what they encode (as web clients
// send it), and they must read Go's bytes back exactly, with Numbers and
// never BigInt.
func TestJavaScriptInterop(t *testing.T) {
	type jsVector struct {
		vector
		Optional        []string `json:"optional"`
		TimestampFields []string `json:"timestampFields"`
		BytesFields     []string `json:"bytesFields"`
	}
	var in []jsVector
	for _, v := range loadVectors(t) {
		jv := jsVector{vector: v, Optional: []string{}, TimestampFields: []string{}, BytesFields: []string{}}
		for _, f := range registry.byType[v.parse(t).Type()].plan.fields {
			if f.optional {
				jv.Optional = append(jv.Optional, f.name)
			}
			if f.name == "timestamp" {
				jv.TimestampFields = append(jv.TimestampFields, f.name)
			}
			if f.kind == kindBytes {
				jv.BytesFields = append(jv.BytesFields, f.name)
			}
		}
		in = append(in, jv)
	}
	stdin, _ := json.Marshal(in)
	var out struct {
		Encoded []struct {
			Name, Lib, Hex string
			Expect         json.RawMessage
		}
		Failures []struct{ Name, Lib, Error string }
	}
	if err := json.Unmarshal(testenv.Node(t, stdin, "msgpack-interop.mjs"), &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range out.Failures {
		t.Errorf("%s: %s reading Go's bytes: %s", f.Name, f.Lib, f.Error)
	}
	if len(out.Encoded) != 2*len(in) {
		t.Fatalf("node encoded %d envelopes, want %d", len(out.Encoded), 2*len(in))
	}
	for _, e := range out.Encoded {
		t.Run(e.Name+"/"+e.Lib, func(t *testing.T) {
			b, _ := hex.DecodeString(e.Hex)
			env, err := Unmarshal(b)
			if err != nil {
				t.Fatalf("Go cannot decode %s's %x: %v", e.Lib, b, err)
			}
			j, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, j, e.Expect)
		})
	}
}
