package main

import (
	"strconv"
	"time"

	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/alicia-voice/alicia/room"
)

// streamClose is a reasoning step's text stream as a -streams client
// read it: when it closed, and which step it was.
type streamClose struct {
	at    time.Time
	index int32
}

// readStreams makes u a client that reads reasoning as LiveKit text
// streams, as a stock LiveKit app with the starters recipe does, instead
// of ReasoningStep envelopes: it says so, and wants every step in full.
func (u *user) readStreams() error {
	err := u.room.RegisterTextStreamHandler(room.ReasoningTopic, func(r *lksdk.TextStreamReader, _ string) {
		// ReadAll waits for the trailer; the SDK's callback must not.
		go func() {
			r.ReadAll()
			at := time.Now()
			idx, _ := strconv.Atoi(r.Info.Attributes[room.AttrStepIndex])
			u.mu.Lock()
			u.streamed = append(u.streamed, streamClose{at: at, index: int32(idx)})
			u.mu.Unlock()
		}()
	})
	if err != nil {
		return err
	}
	u.room.LocalParticipant.SetAttributes(map[string]string{room.AttrReasoningStreams: "1", room.AttrReasoningPreference: "full"})
	return nil
}

// streamedSteps adds to res the steps whose streams closed since it was
// asked: a user asks once its last answer is complete. Under u.mu.
func (u *user) streamedSteps(res *turnResult) {
	for _, s := range u.streamed {
		if s.at.After(res.sent) {
			res.steps[s.index] = s.at
		}
	}
}
