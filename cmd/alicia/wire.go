package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/alicia-voice/alicia/wire"
)

func runWire(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		args = []string{"help"}
	}
	switch args[0] {
	case "decode":
		return wireDecode(args[1:], stdin, stdout, stderr)
	case "encode":
		return wireEncode(args[1:], stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stderr, `usage:
  alicia wire decode [-in auto|hex|binary]
      Reads envelopes from stdin and prints each as JSON. Hex input holds one
      envelope per line (spaces and a 0x prefix are allowed); binary input is
      one envelope. auto picks hex when the input is all hex digits.
  alicia wire encode [-out hex|binary]
      Reads one envelope as JSON (the form decode prints) and writes its bytes.
`)
		return nil
	}
	return fmt.Errorf("unknown subcommand %q (try alicia wire help)", args[0])
}

func wireDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wire decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "auto", "input format: auto, hex or binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return err
	}
	format := *in
	if format == "auto" {
		format = "binary"
		if looksHex(data) {
			format = "hex"
		}
	}
	var packets [][]byte
	switch format {
	case "binary":
		packets = [][]byte{data}
	case "hex":
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for line := 1; sc.Scan(); line++ {
			s := strings.TrimPrefix(strings.Join(strings.Fields(sc.Text()), ""), "0x")
			if s == "" {
				continue
			}
			b, err := hex.DecodeString(s)
			if err != nil {
				return fmt.Errorf("line %d: %v", line, err)
			}
			packets = append(packets, b)
		}
	default:
		return fmt.Errorf("unknown input format %q", format)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	failed := 0
	for i, p := range packets {
		env, err := wire.Unmarshal(p)
		if err != nil {
			failed++
			var de *wire.DecodeError
			if errors.As(err, &de) {
				fmt.Fprintf(stderr, "envelope %d: error %d: %v\n", i+1, de.Code, de)
			} else {
				fmt.Fprintf(stderr, "envelope %d: %v\n", i+1, err)
			}
			continue
		}
		if err := enc.Encode(env); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d envelopes did not decode", failed, len(packets))
	}
	return nil
}

func looksHex(b []byte) bool {
	s := strings.Join(strings.Fields(string(b)), "")
	s = strings.ReplaceAll(s, "0x", "")
	if s == "" {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

func wireEncode(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("wire encode", flag.ContinueOnError)
	out := fs.String("out", "hex", "output format: hex or binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var env wire.Envelope
	if err := json.NewDecoder(stdin).Decode(&env); err != nil {
		return err
	}
	b, err := wire.Marshal(&env)
	if err != nil {
		return err
	}
	if len(b) > wire.MaxPacketBytes {
		return fmt.Errorf("the envelope is %d bytes, over the %d-byte packet limit", len(b), wire.MaxPacketBytes)
	}
	switch *out {
	case "hex":
		_, err = fmt.Fprintln(stdout, hex.EncodeToString(b))
	case "binary":
		_, err = stdout.Write(b)
	default:
		err = fmt.Errorf("unknown output format %q", *out)
	}
	return err
}
