package audio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/hraban/opus.v2"
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

// WebM is what DecodeWebMOpus made of a file.
type WebM struct {
	// PCM is the first Opus track, mono.
	PCM []int16
	// CutShort: the file ended inside an element, which was dropped.
	// LiveKit's JavaScript client sends its MediaRecorder's recording
	// without the last chunk the recorder hands over as it stops.
	CutShort bool
}

// DecodeWebMOpus decodes the first Opus track of a WebM file to rate mono
// (libopus resamples and mixes down itself), at most limit of it. A file
// cut short is decoded up to its last whole block.
//
// The file is walked element by element rather than unmarshalled whole:
// a MediaRecorder writes its segment and clusters with unknown sizes, and
// every size read here is checked against the bytes there are, so a
// hostile file cannot make the bot allocate what it claims. (ebml-go,
// which LiveKit's WebM writer uses, allocates an element's claimed size
// before reading it: 45 bytes claiming a 1 TiB block end the process
// with a fatal out-of-memory.)
func DecodeWebMOpus(data []byte, rate int, limit time.Duration) (WebM, error) {
	if len(data) < 4 || readUint(data[:4]) != ebmlHeaderID {
		return WebM{}, errors.New("not a WebM file")
	}
	dec, err := opus.NewDecoder(rate, 1)
	if err != nil {
		return WebM{}, err
	}
	var (
		out WebM
		buf = make([]int16, rate*120/1000) // Opus's longest frame
		max = int(limit * time.Duration(rate) / time.Second)
		r   = webmReader{data: data}
	)
	for {
		frame, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return WebM{}, err
		}
		k, err := dec.Decode(frame, buf)
		if err != nil {
			return WebM{}, fmt.Errorf("opus: %w", err)
		}
		if len(out.PCM)+k > max {
			return WebM{}, fmt.Errorf("longer than %v", limit)
		}
		out.PCM = append(out.PCM, buf[:k]...)
	}
	if len(out.PCM) == 0 {
		return WebM{}, errors.New("no Opus audio")
	}
	out.CutShort = r.cut
	return out, nil
}

// webmReader walks a WebM file's elements for the frames of its first
// Opus track.
type webmReader struct {
	data []byte
	pos  int
	// cut: the file ended inside an element.
	cut bool
	// entryNum and entryOpus: the track entry being read; opusNum: the
	// first Opus track's number, once known.
	entryNum  uint64
	entryOpus bool
	opusNum   uint64
}

// errCut is an element that runs past the end of the file.
var errCut = errors.New("cut short")

// next returns the next frame of the Opus track; io.EOF at the end of the
// file, or where it was cut short.
func (r *webmReader) next() ([]byte, error) {
	for r.pos < len(r.data) {
		id, body, err := r.element()
		if err == errCut {
			r.cut = true
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		if body == nil {
			continue // a master element: its children follow
		}
		switch id {
		case trackNumberID:
			r.entryNum = readUint(body)
		case codecIDID:
			r.entryOpus = string(bytes.TrimRight(body, "\x00")) == "A_OPUS"
		case simpleBlockID, blockID:
			if frame, err := r.block(body); err != nil || frame != nil {
				return frame, err
			}
		}
		if r.opusNum == 0 && r.entryOpus && r.entryNum != 0 {
			r.opusNum = r.entryNum
		}
	}
	return nil, io.EOF
}

// element reads the next element's header, and the body of one that is
// not a master element walked into (nil for those).
func (r *webmReader) element() (id uint64, body []byte, err error) {
	rest := r.data[r.pos:]
	id, n, err := ebmlVint(rest, false)
	if err != nil {
		return 0, nil, err
	}
	size, m, err := ebmlVint(rest[n:], true)
	if err != nil {
		return 0, nil, err
	}
	r.pos += n + m
	switch id {
	case segmentID, clusterID, tracksID, blockGroupID:
		return id, nil, nil // their children follow; their size may be unknown
	case trackEntryID:
		r.entryNum, r.entryOpus = 0, false
		return id, nil, nil
	}
	if size == unknownSize {
		return 0, nil, fmt.Errorf("element 0x%X of unknown size", id)
	}
	if size > uint64(len(r.data)-r.pos) {
		return 0, nil, errCut
	}
	body = r.data[r.pos : r.pos+int(size)]
	r.pos += int(size)
	return id, body, nil
}

// block returns a (Simple)Block's frame if it is of the Opus track, nil
// if of another; the recorders never lace audio, so laced blocks are
// refused.
func (r *webmReader) block(b []byte) ([]byte, error) {
	if r.opusNum == 0 {
		return nil, errors.New("a block before an Opus track")
	}
	num, n, err := ebmlVint(b, true)
	if err == errCut || num == unknownSize || len(b) < n+3 {
		return nil, errors.New("short block")
	}
	if b[n+2]&0x06 != 0 {
		return nil, errors.New("laced block")
	}
	if num != r.opusNum {
		return nil, nil
	}
	return b[n+3:], nil
}

// unknownSize is a size whose bits are all ones.
const unknownSize = ^uint64(0)

// ebmlVint reads an EBML variable-length integer: an element id (marker
// kept) or a size (marker dropped; unknownSize when all ones). errCut: b
// ends inside it.
func ebmlVint(b []byte, isSize bool) (uint64, int, error) {
	if len(b) == 0 {
		return 0, 0, errCut
	}
	if b[0] == 0 {
		return 0, 0, errors.New("bad EBML variable-length integer")
	}
	n := 1
	for mask := byte(0x80); b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if !isSize && n > 4 {
		return 0, 0, errors.New("bad EBML element id")
	}
	if n > len(b) {
		return 0, 0, errCut
	}
	v := uint64(b[0])
	if isSize {
		v &= uint64(0xFF >> n)
	}
	allOnes := v == uint64(0xFF>>n)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
		allOnes = allOnes && c == 0xFF
	}
	if isSize && allOnes {
		return unknownSize, n, nil
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
