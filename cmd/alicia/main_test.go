package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/alicia-voice/alicia/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

func runCLI(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, bytes.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestWireEncodeDecodeRoundTrip(t *testing.T) {
	in := `{"stanzaId":-2,"conversationId":"conv_1","type":5,"body":{"id":"rs_1","conversationId":"conv_1","previousId":"msg_1","content":"Think first.","stepIndex":1}}`
	code, hexOut, stderr := runCLI(t, []byte(in), "wire", "encode")
	if code != 0 {
		t.Fatalf("encode: %d %s", code, stderr)
	}
	if !strings.HasPrefix(hexOut, "84a87374616e7a614964fe") {
		t.Fatalf("encode gave %s", hexOut)
	}
	// Spaces and a 0x prefix, as packet captures print them.
	spaced := "0x" + strings.Join(strings.SplitAfterN(strings.TrimSpace(hexOut), "", -1), " ")
	for name, input := range map[string][]byte{"hex": []byte(hexOut), "spaced hex": []byte(spaced), "binary": mustHex(t, hexOut)} {
		code, out, stderr := runCLI(t, input, "wire", "decode")
		if code != 0 {
			t.Fatalf("%s decode: %d %s", name, code, stderr)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v in %s", name, err, out)
		}
		if got["typeName"] != "ReasoningStep" || got["body"].(map[string]any)["content"] != "Think first." {
			t.Fatalf("%s decode printed %s", name, out)
		}
	}
}

func TestWireDecodeReportsBadEnvelopes(t *testing.T) {
	// One good envelope, then one of unknown type 99.
	good := "84a87374616e7a614964fea e636f6e766572736174696f6e4964a0a474797065 08 a4626f647981ae636f6e766572736174696f6e4964a0"
	bad := "84a87374616e7a614964fea e636f6e766572736174696f6e4964a0a474797065 63 a4626f647980"
	code, out, stderr := runCLI(t, []byte(good+"\n"+bad+"\n"), "wire", "decode", "-in", "hex")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(out, `"typeName": "Acknowledgement"`) {
		t.Errorf("the good envelope was not printed: %s", out)
	}
	if !strings.Contains(stderr, "envelope 2: error 102") {
		t.Errorf("stderr does not name the bad envelope and its code: %s", stderr)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "alicia ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func mustHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMigrateCommand(t *testing.T) {
	url := testenv.Database(t)
	for _, dir := range []string{"up", "status", "down", "up"} {
		if code, _, stderr := runCLI(t, nil, "migrate", "-database", url, dir); code != 0 {
			t.Fatalf("migrate %s: %s", dir, stderr)
		}
	}
	if code, _, _ := runCLI(t, nil, "migrate", "-database", url, "sideways"); code == 0 {
		t.Fatal("an unknown direction succeeded")
	}
}
