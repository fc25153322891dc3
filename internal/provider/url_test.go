package provider

import "testing"

func TestWebSocketURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://127.0.0.1:7880", "ws://127.0.0.1:7880"},
		{"https://speech.example/v1", "wss://speech.example/v1"},
		{"ws://127.0.0.1:7880/", "ws://127.0.0.1:7880/"},
		{"wss://user:key@speech.example/v1?x=1", "wss://user:key@speech.example/v1?x=1"},
	} {
		u, err := WebSocketURL(c.in)
		if err != nil || u.String() != c.want {
			t.Errorf("%q: got %v, %v; want %q", c.in, u, err, c.want)
		}
	}
	for _, bad := range []string{"ftp://speech.example", "speech.example:8000", "://"} {
		if u, err := WebSocketURL(bad); err == nil {
			t.Errorf("%q: got %v, want an error", bad, u)
		}
	}
}
