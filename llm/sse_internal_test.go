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

func TestErrorShapes(t *testing.T) {
	for _, c := range []struct {
		name, body, code, msg string
	}{
		{"nested (vLLM ≥0.10.1, OpenAI)", `{"error":{"message":"bad model","type":"NotFoundError","param":null,"code":404}}`, "404 NotFoundError", "bad model"},
		{"flat (vLLM <0.10.1, SGLang)", `{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}`, "400 BadRequestError", "too long"},
		{"Ollama", `{"error":"model \"x\" not found"}`, "", `model "x" not found`},
		{"DashScope string code", `{"error":{"code":"invalid_parameter_error","param":null,"message":"<400> bad","type":"invalid_request_error"},"id":"x"}`, "invalid_parameter_error invalid_request_error", "<400> bad"},
		{"SSE-framed", "data: {\"error\":{\"message\":\"framed\",\"type\":\"x\"}}\n\n", "x", "framed"},
		{"HTML", "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", "", "502 Bad Gateway"},
		{"text", "upstream connect error", "", "upstream connect error"},
		{"empty", "", "", "Service Unavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := httpError(503, []byte(c.body))
			if e.Code != c.code || e.Message != c.msg || e.Status != 503 || !e.Retryable() {
				t.Fatalf("got %+v", e)
			}
		})
	}
}
