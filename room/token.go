// Package room puts the bot in LiveKit rooms: agent dispatch, one session
// per conversation, ordered delivery, handshake and resume. This file is
// its token handling, which the HTTP endpoints share.
package room

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/livekit/protocol/auth"
)

// ErrUnauthenticated is returned for a missing or invalid token.
var ErrUnauthenticated = errors.New("missing or invalid access token")

// VerifyToken checks a LiveKit access token signed with the deployment's
// API key and secret and returns the identity it names: the key of a
// user's conversations and preferences.
func VerifyToken(apiKey, apiSecret, token string) (string, error) {
	v, err := auth.ParseAPIToken(token)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if v.APIKey() != apiKey {
		return "", fmt.Errorf("%w: unknown API key", ErrUnauthenticated)
	}
	_, grants, err := v.Verify(apiSecret)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if grants.Identity == "" {
		return "", fmt.Errorf("%w: the token names no identity", ErrUnauthenticated)
	}
	return grants.Identity, nil
}

// BearerIdentity authenticates an HTTP request by the LiveKit token in its
// Authorization: Bearer header.
func BearerIdentity(apiKey, apiSecret string) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			return "", ErrUnauthenticated
		}
		return VerifyToken(apiKey, apiSecret, strings.TrimSpace(token))
	}
}
