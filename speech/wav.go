package speech

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// EncodeWAV wraps 16-bit mono PCM in a RIFF/WAVE container, the upload
// format every transcription server accepts.
func EncodeWAV(samples []int16, rate int) []byte {
	var b bytes.Buffer
	data := len(samples) * 2
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+data))
	b.WriteString("WAVEfmt ")
	_ = binary.Write(&b, binary.LittleEndian, struct {
		Size       uint32
		Format     uint16
		Channels   uint16
		Rate       uint32
		ByteRate   uint32
		BlockAlign uint16
		Bits       uint16
	}{16, 1, 1, uint32(rate), uint32(rate * 2), 2, 16})
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(data))
	_ = binary.Write(&b, binary.LittleEndian, samples)
	return b.Bytes()
}

// WAVHeader is what ReadWAVHeader found.
type WAVHeader struct {
	Rate     int
	Channels int
	// DataSize is the declared size of the data chunk; streaming servers
	// write 0 or 0xFFFFFFFF because they do not know it yet.
	DataSize uint32
}

// ReadWAVHeader reads a 16-bit PCM WAV header up to the start of its
// data chunk, skipping chunks it does not need (LIST, fact…), and leaves r
// at the first sample.
func ReadWAVHeader(r io.Reader) (WAVHeader, error) {
	var h WAVHeader
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return h, err
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return h, errors.New("not a RIFF/WAVE stream")
	}
	haveFmt := false
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return h, err
		}
		size := binary.LittleEndian.Uint32(ch[4:])
		switch string(ch[0:4]) {
		case "fmt ":
			if size < 16 || size > 64 {
				return h, fmt.Errorf("fmt chunk of %d bytes", size)
			}
			f := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, f); err != nil {
				return h, err
			}
			if format := binary.LittleEndian.Uint16(f[0:]); format != 1 && format != 0xFFFE {
				return h, fmt.Errorf("WAV format %d is not PCM", format)
			}
			h.Channels = int(binary.LittleEndian.Uint16(f[2:]))
			h.Rate = int(binary.LittleEndian.Uint32(f[4:]))
			if bits := binary.LittleEndian.Uint16(f[14:]); bits != 16 {
				return h, fmt.Errorf("WAV with %d-bit samples; want 16", bits)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return h, errors.New("WAV data before fmt")
			}
			h.DataSize = size
			return h, nil
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size+size%2)); err != nil {
				return h, err
			}
		}
	}
}

// DecodeWAV reads a whole 16-bit WAV and mixes it down to mono.
func DecodeWAV(r io.Reader) ([]int16, int, error) {
	h, err := ReadWAVHeader(r)
	if err != nil {
		return nil, 0, err
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, 0, err
	}
	if h.DataSize != 0 && h.DataSize != 0xFFFFFFFF && int(h.DataSize) < len(raw) {
		raw = raw[:h.DataSize]
	}
	return toMono(bytesToPCM(raw), h.Channels), h.Rate, nil
}

func bytesToPCM(b []byte) []int16 {
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}

func toMono(s []int16, channels int) []int16 {
	if channels <= 1 {
		return s
	}
	out := make([]int16, len(s)/channels)
	for i := range out {
		sum := 0
		for c := range channels {
			sum += int(s[i*channels+c])
		}
		out[i] = int16(sum / channels)
	}
	return out
}
