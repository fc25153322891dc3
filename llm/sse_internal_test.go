package llm

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReaderVariants(t *testing.T) {
	in := ": OPENROUTER PROCESSING\n\n" +
		"data: {\"a\":1}\n\n" +
		"data:{\"b\":2}\r\n\r\n" + // no space, CRLF
		"event: message\nid: 7\nretry: 100\ndata: {\"c\":\ndata: 3}\n\n" + // fields to skip, multi-line data
		":\n\n" + // bare keep-alive
		"error: {\"code\":500,\"message\":\"boom\"}\n\n" +
		"data: [DONE]" // no final blank line
	r := newSSEReader(strings.NewReader(in))
	type got struct {
		payload string
		isErr   bool
	}
	var all []got
	for {
		p, isErr, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got{string(p), isErr})
	}
	want := []got{{`{"a":1}`, false}, {`{"b":2}`, false}, {"{\"c\":\n3}", false}, {`{"code":500,"message":"boom"}`, true}, {"[DONE]", false}}
	if len(all) != len(want) {
		t.Fatalf("got %+v", all)
	}
	for i := range want {
		if all[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, all[i], want[i])
		}
	}
}
