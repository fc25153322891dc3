package voice_test

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/pipeline/voice"
)

// What the suppressor costs a real barge-in in the first moments of the
// first answer, before it knows whether the microphone echoes: the user
// talks over the agent, as loud, at several points of its first second,
// with a headset (no echo) and on a speakerphone (300 ms, -3 dB). Speech
// starts at the latest once the path is found or ruled out.
func TestBargeInEarlyInTheFirstAnswer(t *testing.T) {
	agent := agentVoice(t)
	user := speechtest.Trim(speechtest.RenderAs(t, userVoice, echoQuestion, 140, voice.InputRate))
	userGain := -speechtest.LevelDB(agent, agentRate, user, voice.InputRate)
	noise := speechtest.Noise(len(agent)*1000/agentRate+1000, voice.InputRate, 3)
	for _, headset := range []bool{true, false} {
		back := make([]int16, len(noise))
		name := "headset"
		if !headset {
			back, name = speechtest.EchoPath{Delay: 300 * time.Millisecond, GainDB: -3}.Of(t, agent, agentRate), "speakerphone"
		}
		for _, at := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, time.Second, 2 * time.Second} {
			onset := int(at * voice.InputRate / time.Second)
			mic := speechtest.Mix(speechtest.Mix(append([]int16(nil), back...), noise, 0, 0), user, onset, userGain)
			h := hearMic(t, agent, mic, true)
			if len(h.starts) == 0 || h.starts[0] < onset {
				t.Fatalf("%s, %v into the answer: speech started at %v", name, at, h.starts)
			}
			late := time.Duration(h.starts[0]-onset) * time.Second / voice.InputRate
			t.Logf("%s, talking %v into the answer: speech started %v after the onset", name, at, late)
			// Once the path is known or ruled out, talk is heard as soon
			// as it would be without the suppressor; before, at most
			// until then.
			if limit := map[bool]time.Duration{true: 1500 * time.Millisecond, false: 200 * time.Millisecond}[at < 2*time.Second]; late > limit {
				t.Errorf("%s, talking %v into the answer: speech started %v after the onset", name, at, late)
			}
		}
	}
}
