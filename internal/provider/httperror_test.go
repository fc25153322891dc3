package provider

import "testing"

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
		{"FastAPI (speaches, Kokoro-FastAPI)", `{"detail":"Model 'x' is not installed"}`, "", "Model 'x' is not installed"},
		{"FastAPI validation", `{"detail":[{"loc":["body","input"],"msg":"Field required"}]}`, "", `[{"loc":["body","input"],"msg":"Field required"}]`},
		{"empty", "", "", "Service Unavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := HTTPError("llm", 503, []byte(c.body))
			if e.Code != c.code || e.Message != c.msg || e.Status != 503 || e.Kind != ErrHTTP || e.Service != "llm" || !e.Retryable() {
				t.Fatalf("got %+v", e)
			}
		})
	}
}
