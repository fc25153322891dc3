package provider

import (
	"fmt"
	"net/url"
)

// WebSocketURL is the WebSocket address of the server at raw, an http(s)
// or ws(s) URL: a server that speaks both on one port (LiveKit's agent
// endpoint, the Realtime transcription API) is configured by its HTTP
// address, like its other endpoints.
func WebSocketURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return nil, fmt.Errorf("%q is not an http(s) or ws(s) URL", raw)
	}
	return u, nil
}
