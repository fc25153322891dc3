package room

import (
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// Test hooks for the LiveKit binding of voice, driven over a real
// livekit-server by the external tests.
var (
	IsUserMic    = isUserMic
	ListenToMic  = listenToMic
	PublishVoice = publishVoice
)

// SetAgentState sets the bot's lk.agent.state as its session's writer does.
func SetAgentState(r *lksdk.Room, s voice.State) error {
	return (&conn{room: r}).setAttributes(map[string]string{AgentStateAttribute: string(s)})
}

// SendTranscript publishes one transcript segment as the session's writer
// does.
func SendTranscript(r *lksdk.Room, sender, trackID, segmentID, text string, final bool) error {
	return sendTranscript(&conn{room: r}, sender, trackID, segmentID, text, final)
}
