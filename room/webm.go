package room

import (
	"bytes"
	"errors"
	"fmt"

	"gopkg.in/hraban/opus.v2"

	"github.com/alicia-voice/alicia/pipeline/voice"
)

// Matroska element ids that lead to the Opus packets of a WebM file.
const (
	ebmlHeaderID  = 0x1A45DFA3
	segmentID     = 0x18538067
	tracksID      = 0x1654AE6B
	trackEntryID  = 0xAE
	trackNumberID = 0xD7
	codecIDID     = 0x86
	clusterID     = 0x1F43B675
	blockGroupID  = 0xA0
	blockID       = 0xA1
	simpleBlockID = 0xA3
)

// decodeWebMOpus decodes the first Opus track of a WebM file to
// voice.InputRate mono (libopus resamples and mixes down itself).
//
// The file is walked element by element rather than unmarshalled whole:
// a MediaRecorder writes its segment and clusters with unknown sizes, and
// every size read here is checked against the bytes there are, so a
// hostile file cannot make the bot allocate what it claims.
func decodeWebMOpus(data []byte) ([]int16, error) {
	if len(data) < 4 || readUint(data[:4]) != ebmlHeaderID {
		return nil, errors.New("not a WebM file")
	}
	dec, err := opus.NewDecoder(voice.InputRate, 1)
	if err != nil {
		return nil, err
	}
	var (
		out []int16
		buf = make([]int16, voice.InputRate*120/1000) // Opus's longest frame
		// entryNum and entryOpus: the track entry being read; opusNum:
		// the first Opus track's number, once known.
		entryNum  uint64
		entryOpus bool
		opusNum   uint64
	)
	for pos := 0; pos < len(data); {
		id, n, err := ebmlVint(data[pos:], false)
		if err != nil {
			return nil, err
		}
		pos += n
		size, n, err := ebmlVint(data[pos:], true)
		if err != nil {
			return nil, err
		}
		pos += n
		switch id {
		case segmentID, clusterID, tracksID, blockGroupID:
			continue // their children follow; their size may be unknown
		case trackEntryID:
			entryNum, entryOpus = 0, false
			continue
		}
		if size < 0 || size > int64(len(data)-pos) {
			return nil, fmt.Errorf("element 0x%X: size %d past the end", id, size)
		}
		body := data[pos : pos+int(size)]
		pos += int(size)
		switch id {
		case trackNumberID:
			entryNum = readUint(body)
		case codecIDID:
			entryOpus = string(bytes.TrimRight(body, "\x00")) == "A_OPUS"
		}
		if opusNum == 0 && entryOpus && entryNum != 0 {
			opusNum = entryNum
		}
		switch id {
		case simpleBlockID, blockID:
			if opusNum == 0 {
				return nil, errors.New("a block before an Opus track")
			}
			num, frame, err := webmBlock(body)
			if err != nil {
				return nil, err
			}
			if num != opusNum {
				continue
			}
			k, err := dec.Decode(frame, buf)
			if err != nil {
				return nil, fmt.Errorf("opus: %w", err)
			}
			if len(out)+k > preconnectMaxSeconds*voice.InputRate {
				return nil, fmt.Errorf("longer than %d s", preconnectMaxSeconds)
			}
			out = append(out, buf[:k]...)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no Opus audio")
	}
	return out, nil
}

// webmBlock splits a (Simple)Block into its track number and frame; the
// recorders never lace audio, so laced blocks are refused.
func webmBlock(b []byte) (uint64, []byte, error) {
	num, n, err := ebmlVint(b, true)
	if err != nil || num < 0 {
		return 0, nil, errors.New("bad block")
	}
	if len(b) < n+3 {
		return 0, nil, errors.New("short block")
	}
	if b[n+2]&0x06 != 0 {
		return 0, nil, errors.New("laced block")
	}
	return uint64(num), b[n+3:], nil
}

// ebmlVint reads an EBML variable-length integer: an element id (marker
// kept) or a size (marker dropped; -1 when all ones, an unknown size).
func ebmlVint(b []byte, isSize bool) (int64, int, error) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, errors.New("bad EBML header")
	}
	n := 1
	for mask := byte(0x80); b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if n > len(b) || (!isSize && n > 4) {
		return 0, 0, errors.New("bad EBML header")
	}
	v := int64(b[0])
	if isSize {
		v &= int64(0xFF >> n)
	}
	allOnes := v == int64(0xFF>>n)
	for _, c := range b[1:n] {
		v = v<<8 | int64(c)
		allOnes = allOnes && c == 0xFF
	}
	if isSize && allOnes {
		return -1, n, nil
	}
	return v, n, nil
}

func readUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
