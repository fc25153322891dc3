package wire

import (
	"bytes"
	"encoding/binary"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// The MessagePack library allocates the length a string or binary header
// claims before it reads the bytes, and keeps the buffer it grew for the
// next value: a five-byte bin32 header asks for 4 GiB, and a stream of
// strings claiming more than the packet holds grows a pooled decoder by a
// megabyte each. So every length is checked against what is left of the
// packet before the library reads it, and values are skipped here, not
// by the library.

// packet is the packet dec reads and the offset it has reached; Unmarshal's
// decoders read a *bytes.Reader, which dec reads directly.
func packet(dec *msgpack.Decoder) (*bytes.Reader, int64) {
	r := dec.Buffered().(*bytes.Reader)
	return r, r.Size() - int64(r.Len())
}

// fits reports a malformed value at path if the string or binary value
// next in dec claims more bytes than the packet has left.
func fits(dec *msgpack.Decoder, path *where) error {
	r, off := packet(dec)
	if _, err := valueEnd(r, off); err != nil {
		return malformed(path.String(), "%v", err)
	}
	return nil
}

// skip steps over the next value, whatever it holds.
func skip(dec *msgpack.Decoder) error {
	r, off := packet(dec)
	end, err := valueEnd(r, off)
	if err != nil {
		return err
	}
	_, err = r.Seek(end, io.SeekStart)
	return err
}

type lengthError string

func (e lengthError) Error() string { return string(e) }

const (
	errTruncated = lengthError("truncated value")
	errTooLong   = lengthError("a length beyond the end of the packet")
	errNeverUsed = lengthError("the reserved code 0xc1")
)

// valueEnd returns the offset just past the value at off, walking nested
// arrays and maps without recursion.
func valueEnd(r *bytes.Reader, off int64) (int64, error) {
	size := r.Size()
	var hdr [9]byte
	read := func(n int) ([]byte, error) {
		if off+int64(n) > size {
			return nil, errTruncated
		}
		_, _ = r.ReadAt(hdr[:n], off)
		off += int64(n)
		return hdr[:n], nil
	}
	for pending := int64(1); pending > 0; pending-- {
		b, err := read(1)
		if err != nil {
			return 0, err
		}
		c := b[0]
		var (
			lenBytes int   // bytes of the length that follows the code
			payload  int64 // bytes of payload beside the length
			items    int64 // nested values
			perItem  int64 = 1
		)
		switch {
		case c <= 0x7f || c >= 0xe0: // fixint
		case c <= 0x8f:
			items, perItem = int64(c&0x0f), 2
		case c <= 0x9f:
			items = int64(c & 0x0f)
		case c <= 0xbf:
			payload = int64(c & 0x1f)
		case c == 0xc0 || c == 0xc2 || c == 0xc3: // nil, false, true
		case c == 0xc1:
			return 0, errNeverUsed
		case c == 0xc4 || c == 0xd9: // bin8, str8
			lenBytes = 1
		case c == 0xc5 || c == 0xda:
			lenBytes = 2
		case c == 0xc6 || c == 0xdb:
			lenBytes = 4
		case c >= 0xc7 && c <= 0xc9: // ext8/16/32: the length, then a type byte
			lenBytes, payload = 1<<(c-0xc7), 1
		case c == 0xca:
			payload = 4
		case c == 0xcb:
			payload = 8
		case c >= 0xcc && c <= 0xd3: // uint8…uint64, int8…int64
			payload = 1 << ((c - 0xcc) % 4)
		case c >= 0xd4 && c <= 0xd8: // fixext1…16 and its type byte
			payload = 1<<(c-0xd4) + 1
		case c == 0xdc || c == 0xdd:
			lenBytes = 2 << (c - 0xdc)
		case c == 0xde || c == 0xdf:
			lenBytes, perItem = 2<<(c-0xde), 2
		}
		if lenBytes > 0 {
			b, err := read(lenBytes)
			if err != nil {
				return 0, err
			}
			var n int64
			switch lenBytes {
			case 1:
				n = int64(b[0])
			case 2:
				n = int64(binary.BigEndian.Uint16(b))
			default:
				n = int64(binary.BigEndian.Uint32(b))
			}
			if c >= 0xdc {
				items = n
			} else {
				payload += n
			}
		}
		// Every nested value takes at least a byte.
		if payload > size-off || items*perItem > size-off {
			return 0, errTooLong
		}
		off += payload
		pending += items * perItem
	}
	return off, nil
}
