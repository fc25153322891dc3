//go:build tools

// Package livekitserver only pins github.com/livekit/livekit-server for
// scripts/install-livekit-server; nothing imports it.
package livekitserver

import _ "github.com/livekit/livekit-server/cmd/server"
