package voice

import (
	"testing"
	"time"

	"github.com/alicia-voice/alicia/pipeline"
)

// Alicia's own share is the wait less the union of the waits on others,
// each clipped to it: overlapping waits count once, and the share is
// never negative.
func TestOwnShare(t *testing.T) {
	e := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return e.Add(time.Duration(ms) * time.Millisecond) }
	iv := func(from, to int) interval { return interval{at(from), at(to)} }
	for _, tc := range []struct {
		name  string
		total interval
		waits []interval
		want  time.Duration
	}{
		{"one after another", iv(0, 1205), []interval{iv(0, 500), iv(0, 700), iv(710, 1000), iv(1010, 1200)}, 25 * time.Millisecond},
		{"recognised within the silence", iv(0, 1000), []interval{iv(0, 500), iv(0, 400), iv(520, 900)}, 120 * time.Millisecond},
		{"waits overlapping each other", iv(0, 1000), []interval{iv(100, 600), iv(300, 700), iv(650, 800)}, 300 * time.Millisecond},
		{"a wait inside another", iv(0, 1000), []interval{iv(100, 900), iv(200, 300)}, 200 * time.Millisecond},
		{"waits beyond the total are clipped", iv(0, 1000), []interval{iv(-300, 200), iv(900, 5000)}, 700 * time.Millisecond},
		{"waits covering it all", iv(0, 1000), []interval{iv(0, 600), iv(500, 1000)}, 0},
		{"waits outside it", iv(0, 1000), []interval{iv(-500, -100), iv(1200, 1300)}, time.Second},
		{"waits not measured", iv(0, 1000), []interval{{at(0), time.Time{}}, {time.Time{}, at(500)}}, time.Second},
		{"no answer", interval{at(0), time.Time{}}, []interval{iv(0, 500)}, 0},
		{"backwards", iv(1000, 0), nil, 0},
	} {
		if got := ownShare(tc.total, tc.waits...); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A spoken turn's stages count from the end of speech and include
// Alicia's own share, excluding the waits on others but not the stage's
// lag behind its audio or the engine's work before the model's request;
// a typed one has only the synthesiser's.
func TestTurnStages(t *testing.T) {
	e := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return e.Add(time.Duration(ms) * time.Millisecond) }
	tt := turnTimes{
		heard:   heardAt{speechEnd: at(0), silent: at(490), endpointed: at(500), transcript: at(650)},
		model:   pipeline.Timing{Asked: at(660), Requested: at(670), FirstToken: at(700), FirstSentence: at(1100)},
		toSynth: at(1110), firstByte: at(1300),
		firstAudio: at(850), cue: true, firstAnswer: at(1320),
	}
	got := map[string]time.Duration{}
	var cue string
	for _, s := range tt.stages() {
		got[s.Name] = s.End.Sub(s.Start)
		if s.Name == StageFirstAudio {
			cue = s.Attrs["audio"]
		}
	}
	want := map[string]time.Duration{StageEndpointing: 500 * time.Millisecond, StageRecognition: 650 * time.Millisecond,
		StageSynthesisFirstByte: 190 * time.Millisecond, StageFirstAudio: 850 * time.Millisecond, StageFirstAnswerAudio: 1320 * time.Millisecond,
		// 1320 less 490 (the silence), 150 (the recogniser after the
		// end was decided), 430 (the model from its request), 190 (the
		// synthesiser): the stage's 10 ms behind its audio, the 20 ms
		// from transcript to request, and the hand-offs to and from
		// the synthesiser.
		StageOwn: 60 * time.Millisecond}
	if len(got) != len(want) || cue != "cue" {
		t.Fatalf("stages %v (first audio %q), want %v", got, cue, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %v, want %v", k, got[k], v)
		}
	}

	typed := turnTimes{toSynth: at(100), firstByte: at(300), firstAudio: at(310), firstAnswer: at(310)}
	if s := typed.stages(); len(s) != 1 || s[0].Name != StageSynthesisFirstByte {
		t.Fatalf("a typed turn's stages %+v", s)
	}
}
