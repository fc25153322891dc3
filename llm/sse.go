package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseReader reads Server-Sent Events frames. It is written here rather
// than taken from a library because llama.cpp builds before September 2025
// reported mid-stream errors in a non-standard "error:" field, which every
// spec-following parser (openai-go's included) drops silently.
type sseReader struct {
	r    *bufio.Reader
	data []byte
	line []byte
}

// maxSSELine bounds one line, as openai-go does.
const maxSSELine = 32 << 20

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// next returns the payload of the next event: the joined data lines, or
// the value of an "error:" field with isError set. Comments, event, id and
// retry fields are skipped. At the end of the input it returns io.EOF,
// after dispatching an event left without its blank line.
func (s *sseReader) next() (payload []byte, isError bool, err error) {
	s.data = s.data[:0]
	haveData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && haveData {
				return s.data, false, nil
			}
			return nil, false, err
		}
		if len(line) == 0 {
			if haveData {
				return s.data, false, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment: keep-alive
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if haveData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			haveData = true
		case "error":
			return append(s.data[:0], value...), true, nil
		}
	}
}

// readLine returns one line without its LF or CRLF ending. The slice is
// valid until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if len(s.line) > maxSSELine {
			return nil, errors.New("SSE line longer than 32 MiB")
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(s.line) > 0 {
				return bytes.TrimSuffix(s.line, []byte{'\r'}), nil
			}
			return nil, err
		}
		line := s.line[:len(s.line)-1]
		return bytes.TrimSuffix(line, []byte{'\r'}), nil
	}
}
