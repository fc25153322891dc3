package speech

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"

	"github.com/livekit/media-sdk"

	"github.com/alicia-voice/alicia/internal/provider"
)

// write sends the operations in order. Audio goes through one resampler
// per utterance, closed at its end so that its last milliseconds are sent
// before the commit. Appends waiting together go out as one message of up
// to half a second, so that a writer that fell behind catches up in fewer,
// larger messages.
func (s *RealtimeStream) write() {
	defer s.wg.Done()
	var (
		out media.PCM16Sample
		rs  media.PCM16Writer
	)
	defer func() {
		if rs != nil {
			_ = rs.Close()
		}
	}()
	for {
		select {
		case <-s.ops.Ready():
		case <-s.stop:
			return
		}
		ops := s.ops.Take()
		for i, op := range ops {
			var err error
			switch op.kind {
			case opAppend:
				if rs == nil {
					rs = media.ResampleWriter(media.NewPCM16BufferWriter(&out, RealtimeRate), s.rate)
				}
				err = rs.WriteSample(op.pcm)
				more := i+1 < len(ops) && ops[i+1].kind == opAppend
				if err == nil && (!more || len(out) >= RealtimeRate/2) {
					err = s.sendAudio(&out)
				}
			case opCommit, opClear:
				if rs != nil {
					err = rs.Close()
					rs = nil
				}
				kind := "input_audio_buffer.commit"
				if op.kind == opClear {
					kind = "input_audio_buffer.clear"
					out = out[:0]
				} else if err == nil {
					err = s.sendAudio(&out)
				}
				if err == nil {
					err = s.send(map[string]string{"type": kind, "event_id": op.eventID})
				}
			}
			if err != nil {
				s.shutdown(sttErr(provider.ErrConnect, "sending to the recogniser: "+err.Error(), err))
				return
			}
		}
	}
}

func (s *RealtimeStream) sendAudio(out *media.PCM16Sample) error {
	if len(*out) == 0 {
		return nil
	}
	pcm := make([]byte, out.Size())
	if _, err := out.CopyTo(pcm); err != nil {
		return err
	}
	msg := map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm)}
	*out = (*out)[:0]
	return s.send(msg)
}

// read turns server events into Events until the connection ends.
func (s *RealtimeStream) read() {
	defer s.wg.Done()
	defer close(s.events)
	for {
		ev, err := s.readEvent()
		var e *provider.Error
		if errors.As(err, &e) && e.Kind == provider.ErrProtocol {
			s.log.Warn("voice: unreadable event from the realtime recogniser", "err", err)
			continue
		}
		if err != nil {
			s.shutdown(sttErr(provider.ErrConnect, "the connection to the recogniser ended: "+err.Error(), err))
			s.failPending()
			return
		}
		s.handle(ev)
	}
}

func (s *RealtimeStream) handle(ev serverEvent) {
	switch ev.Type {
	case "input_audio_buffer.committed":
		s.mu.Lock()
		utt := s.open // a commit the server made on its own
		if len(s.ends) > 0 && s.ends[0].kind == endCommit {
			utt = s.ends[0].utt
			s.ends = s.ends[1:]
		}
		s.mu.Unlock()
		if ev.ItemID != "" {
			s.items[ev.ItemID] = utt
		}
		s.awaiting = append(s.awaiting, utt)
	case "input_audio_buffer.cleared":
		s.mu.Lock()
		var end rtEnd
		if len(s.ends) > 0 && s.ends[0].kind != endCommit {
			end = s.ends[0]
			s.ends = s.ends[1:]
		}
		s.mu.Unlock()
		if end.kind == endEmpty {
			s.emit(end.utt, RecognizeEvent{Kind: RecognizeFinal})
		}
	case "conversation.item.input_audio_transcription.delta":
		utt := s.utterance(ev.ItemID)
		s.texts[utt] += ev.Delta
		s.emit(utt, RecognizeEvent{Kind: RecognizePartial, Text: strings.TrimSpace(s.texts[utt])})
	case "input_audio_buffer.partial_transcription":
		// speaches: the whole transcript so far, not a delta.
		utt := s.utterance(ev.ItemID)
		s.texts[utt] = ev.Transcript
		s.emit(utt, RecognizeEvent{Kind: RecognizePartial, Text: strings.TrimSpace(ev.Transcript)})
	case "conversation.item.input_audio_transcription.completed":
		utt := s.finished(ev.ItemID)
		s.emit(utt, RecognizeEvent{Kind: RecognizeFinal, Text: strings.TrimSpace(ev.Transcript)})
	case "conversation.item.input_audio_transcription.failed":
		utt := s.finished(ev.ItemID)
		s.emit(utt, RecognizeEvent{Kind: RecognizeError, Err: ev.Error.toError()})
	case "error":
		utt := s.blame(ev.Error)
		err := ev.Error.toError()
		if utt == 0 {
			s.log.Warn("voice: the realtime recogniser reported an error", "err", err)
		}
		s.emit(utt, RecognizeEvent{Kind: RecognizeError, Err: err})
	}
}

// utterance is the utterance a server item belongs to. An item not seen
// yet is the audio the server is buffering: the oldest commit or clear it
// has not answered, or else the current utterance.
func (s *RealtimeStream) utterance(item string) int {
	if utt, ok := s.items[item]; ok {
		return utt
	}
	s.mu.Lock()
	utt := s.open
	if len(s.ends) > 0 {
		utt = s.ends[0].utt
	}
	s.mu.Unlock()
	if item != "" {
		s.items[item] = utt
	}
	return utt
}

// finished forgets an item whose transcript came.
func (s *RealtimeStream) finished(item string) int {
	utt := s.utterance(item)
	delete(s.items, item)
	delete(s.texts, utt)
	s.awaiting = slices.DeleteFunc(s.awaiting, func(u int) bool { return u == utt })
	return utt
}

// blame finds the utterance an error event is about. OpenAI names the
// client event it refuses (event_id); speaches names none, so its kind
// tells: an invalid request refuses the oldest commit the server has not
// answered (a commit never gets both committed and a refusal), and any
// other error (a failed transcription) is about the oldest utterance
// waiting for its transcript, which would otherwise wait for ever. 0 when
// nothing fits: the error is the session's.
func (s *RealtimeStream) blame(e *serverError) int {
	if e == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.EventID != "" {
		for i, end := range s.ends {
			if end.eventID == e.EventID {
				s.ends = slices.Delete(s.ends, i, i+1)
				return end.utt
			}
		}
		return 0
	}
	if e.Type == "invalid_request_error" {
		if len(s.ends) > 0 && s.ends[0].kind == endCommit {
			utt := s.ends[0].utt
			s.ends = s.ends[1:]
			return utt
		}
		return 0
	}
	if len(s.awaiting) > 0 {
		utt := s.awaiting[0]
		s.awaiting = s.awaiting[1:]
		return utt
	}
	return 0
}

// failPending ends every utterance still waiting with the stream's
// error, so that no caller waits for a transcript that cannot come.
func (s *RealtimeStream) failPending() {
	select {
	case <-s.done:
		return
	default:
	}
	err := s.Err()
	if err == nil {
		err = errStreamClosed
	}
	s.mu.Lock()
	pending := slices.Clone(s.awaiting)
	for _, end := range s.ends {
		if end.kind != endClear {
			pending = append(pending, end.utt)
		}
	}
	s.ends = nil
	s.mu.Unlock()
	for _, utt := range pending {
		s.emit(utt, RecognizeEvent{Kind: RecognizeError, Err: err})
	}
}

// emit delivers ev unless its utterance is over (it had its last event,
// or was cleared), or nobody reads any more. A last event waits for those
// of older committed utterances.
func (s *RealtimeStream) emit(utt int, ev RecognizeEvent) {
	var out []RealtimeEvent
	s.mu.Lock()
	switch {
	case utt == 0 || ev.Kind == RecognizePartial && !s.over[utt]:
		out = append(out, RealtimeEvent{utt, ev})
	case s.over[utt]:
	case !slices.Contains(s.committed, utt): // a commit the server made itself
		s.over[utt] = true
		out = append(out, RealtimeEvent{utt, ev})
	default:
		s.over[utt] = true
		s.held[utt] = ev
		for len(s.committed) > 0 {
			first := s.committed[0]
			last, ok := s.held[first]
			if !ok {
				break
			}
			delete(s.held, first)
			s.committed = s.committed[1:]
			out = append(out, RealtimeEvent{first, last})
		}
	}
	s.mu.Unlock()
	for _, e := range out {
		select {
		case s.events <- e:
		case <-s.done:
			return
		}
	}
}
