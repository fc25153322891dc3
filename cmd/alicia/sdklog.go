package main

import (
	"log/slog"

	protoLogger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

// quietSDK gives LiveKit's SDK (and the WebRTC stack under it) a leveled
// logger that keeps warnings and errors. Its default logger formats every
// WebRTC trace message before dropping it: with hundreds of rooms, ICE
// keep-alives alone cost the bot about 8% of its CPU.
func quietSDK(log *slog.Logger) {
	l, err := protoLogger.NewZapLogger(&protoLogger.Config{Level: "warn"})
	if err != nil {
		log.Warn("LiveKit SDK logger", "err", err)
		return
	}
	lksdk.SetLogger(l)
}
