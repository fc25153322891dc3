package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the hex of wire/testdata/vectors.json from the JSON descriptions")

const vectorsFile = "testdata/vectors.json"

type vector struct {
	Name     string          `json:"name"`
	Envelope json.RawMessage `json:"envelope"`
	Hex      string          `json:"hex"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

func (v vector) parse(t testing.TB) *Envelope {
	t.Helper()
	var env Envelope
	if err := json.Unmarshal(v.Envelope, &env); err != nil {
		t.Fatalf("%s: %v", v.Name, err)
	}
	return &env
}

func TestGoldenVectors(t *testing.T) {
	vs := loadVectors(t)
	if *update {
		for i := range vs {
			b, err := Marshal(vs[i].parse(t))
			if err != nil {
				t.Fatalf("%s: %v", vs[i].Name, err)
			}
			vs[i].Hex = hex.EncodeToString(b)
		}
		var out bytes.Buffer
		out.WriteString("[\n")
		for i, v := range vs {
			var env bytes.Buffer
			if err := json.Compact(&env, v.Envelope); err != nil {
				t.Fatal(err)
			}
			line, _ := json.Marshal(vector{v.Name, env.Bytes(), v.Hex})
			out.Write(line)
			if i < len(vs)-1 {
				out.WriteString(",")
			}
			out.WriteString("\n")
		}
		out.WriteString("]\n")
		if err := os.WriteFile(vectorsFile, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			want := v.parse(t)
			got, err := Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if h := hex.EncodeToString(got); h != v.Hex {
				t.Fatalf("encoding changed:\n got %s\nwant %s\n(run go test ./wire -run TestGoldenVectors -update if the change is intended)", h, v.Hex)
			}
			back, err := Unmarshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", back.Body, want.Body)
			}
			// The JSON form gives back the description.
			j, err := json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, j, v.Envelope)
		})
	}
}

func TestVectorsCoverEveryType(t *testing.T) {
	seen := map[Type]bool{}
	for _, v := range loadVectors(t) {
		seen[v.parse(t).Type()] = true
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("no golden vector for %s", typ)
		}
	}
	if len(Types()) != 16 {
		t.Errorf("registry has %d types, the protocol has 16", len(Types()))
	}
}

// assertSameJSON compares two JSON documents as values, ignoring typeName,
// which only the Go side adds.
func assertSameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	delete(g, "typeName")
	delete(w, "typeName")
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs:\n got %s\nwant %s", got, want)
	}
}
