package audio

import "time"

// voiceActivity reads an Opus packet's voice-activity flags, which its
// SILK layer carries for each of its frames (RFC 6716 §4.2.3), and how
// long the packet is; ok is false when it has no flags to read (CELT
// alone, or a packet of more than two frames, which WebRTC does not
// send), and the packet is then decoded. The flags are the first
// symbols of the range-coded frame, each of probability one half, which
// makes them its first bits.
func voiceActivity(p []byte) (active bool, length time.Duration, ok bool) {
	if len(p) < 2 {
		return false, 0, false
	}
	config := p[0] >> 3
	if config >= 16 {
		return false, 0, false // CELT only
	}
	// SILK frames per Opus frame: one per 20 ms, one for 10 ms; hybrid
	// frames are 10 or 20 ms, SILK's 10 to 60.
	n, each := 1, [2]time.Duration{10, 20}[config%2]*time.Millisecond
	if config < 12 {
		n, each = max(1, int(config%4)), [4]time.Duration{10, 20, 40, 60}[config%4]*time.Millisecond
	}
	voiced := func(frame []byte) bool { return len(frame) > 0 && frame[0]>>(8-n) != 0 }
	switch body := p[1:]; p[0] & 3 {
	case 0:
		return voiced(body), each, len(body) > 0
	case 1: // two frames of the same size
		half := len(body) / 2
		return voiced(body[:half]) || voiced(body[half:]), 2 * each, half > 0
	case 2: // two frames, the first's size in one or two bytes
		size, hdr := int(body[0]), 1
		if size >= 252 {
			if len(body) < 2 {
				return false, 0, false
			}
			size, hdr = size+4*int(body[1]), 2
		}
		if hdr+size > len(body) {
			return false, 0, false
		}
		return voiced(body[hdr:hdr+size]) || voiced(body[hdr+size:]), 2 * each, true
	}
	return false, 0, false
}
