package voice

import (
	"context"
	"strings"
	"time"
)

// spokenSentence is one sentence's audio in the answer, and its words
// placed in it.
type spokenSentence struct {
	words []string
	// at is where each word starts, as a share of the sentence's audio,
	// by syllables: speech spends its time on syllables, not letters.
	at []float64
	// start and end place its audio from the answer's start; done says
	// its synthesis is complete.
	start, end time.Duration
	done       bool
	released   int // words gone out as transcript
	// retracted is closed when the answer takes the sentence back
	// (pipeline.Sentence.Retracted); cut says its audio not played was
	// dropped for it.
	retracted <-chan struct{}
	cut       bool
}

func newSpokenSentence(text string, start time.Duration, retracted <-chan struct{}) spokenSentence {
	s := spokenSentence{words: strings.Fields(text), start: start, end: start, retracted: retracted}
	total := 0
	for _, w := range s.words {
		total += syllables(w)
	}
	n := 0
	for _, w := range s.words {
		s.at = append(s.at, float64(n)/float64(max(1, total)))
		n += syllables(w)
	}
	return s
}

// syllableRate is how fast synthesised speech says syllables, for a
// sentence whose audio is still coming: about LiveKit Agents' 3.83/s.
const syllableRate = 3.8

// wordAt is where word i starts in the answer's audio, and where it
// ends (the next word's start, or the sentence's end).
func (s *spokenSentence) wordAt(i int) (start, end time.Duration) {
	length := s.end - s.start
	if !s.done {
		// Still being synthesised: no word is placed before what its
		// syllables need.
		n := 0
		for _, w := range s.words {
			n += syllables(w)
		}
		length = max(length, time.Duration(float64(n)/syllableRate*float64(time.Second)))
	}
	pos := func(f float64) time.Duration { return s.start + time.Duration(f*float64(length)) }
	start = pos(s.at[i])
	end = s.start + length
	if i+1 < len(s.words) {
		end = pos(s.at[i+1])
	}
	return start, end
}

// syllables counts a word's vowel groups, at least one: close enough to
// place words in a sentence's audio.
func syllables(w string) int {
	n, vowel := 0, false
	for _, r := range strings.ToLower(w) {
		v := strings.ContainsRune("aeiouy", r)
		if v && !vowel {
			n++
		}
		vowel = v
	}
	return max(1, n)
}

// release sends the words the user has heard begin since the last
// release as the agent's transcript: text in step with the audio, paused
// with it, and cut where it is cut. Called with mu held, so that no word
// goes out after a barge-in.
func (p *playback) release(ctx context.Context, s *Stage, segmentID string) (all bool) {
	if ctx.Err() != nil {
		return false
	}
	played := p.playedLocked(s.out)
	var b strings.Builder
	for p.released < len(p.spoken) {
		sent := &p.spoken[p.released]
		for sent.released < len(sent.words) {
			if start, _ := sent.wordAt(sent.released); start > played || sent.end == sent.start {
				break
			}
			if p.released > 0 || sent.released > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sent.words[sent.released])
			sent.released++
		}
		if sent.released < len(sent.words) || !sent.done {
			break
		}
		p.released++
	}
	all = p.synthesised && p.released == len(p.spoken) && s.out.Queued() <= 0
	p.whole = all
	if b.Len() > 0 || all {
		s.room.AgentSpeech(ctx, AgentSpeech{SegmentID: segmentID, AnswerID: answerID(p.turn), TrackID: s.out.TrackID(), Text: b.String(), Final: all})
	}
	return all
}

// transcribe releases the answer's words as they are played, until all
// are out or the answer is stopped. Between words it sleeps until the
// next one begins to play, or until the track or the answer's sentences
// change.
func (s *Stage) transcribe(ctx context.Context, p *playback, segmentID string) {
	for {
		changed, paused := s.out.next()
		p.mu.Lock()
		all := p.release(ctx, s, segmentID)
		in := p.untilNextWord(s.out)
		p.mu.Unlock()
		if all {
			return
		}
		if paused {
			in = -1
		}
		timer, stop := wake(in)
		select {
		case <-ctx.Done():
		case <-timer:
		case <-changed:
		case <-p.grew:
		}
		stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// untilNextWord is how long until the next word release waits for
// begins to play, or, once every word is out, until the answer has
// played out; -1 when that waits for more of the answer (its audio, the
// end of a sentence's synthesis, the next sentence). Called with mu
// held, after release.
func (p *playback) untilNextWord(out AudioOut) time.Duration {
	if p.released == len(p.spoken) {
		if p.synthesised {
			return max(0, out.Queued())
		}
		return -1
	}
	sent := &p.spoken[p.released]
	if sent.released == len(sent.words) || sent.end == sent.start {
		return -1
	}
	start, _ := sent.wordAt(sent.released)
	if start > p.written {
		return -1
	}
	return max(0, start-p.playedLocked(out))
}

// grewLocked wakes transcribe: the answer's sentences changed other than
// by audio written to the track. Called with mu held.
func (p *playback) grewLocked() {
	select {
	case p.grew <- struct{}{}:
	default:
	}
}
