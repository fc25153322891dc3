// Package wire is the Alicia protocol: the MessagePack envelope exchanged
// over LiveKit data channels and its sixteen body types.
//
// # Envelope
//
// Every packet is one MessagePack map {stanzaId, conversationId, type, meta?,
// body}. type selects the body; the body carries no type tag of its own.
//
// # Stanza ids
//
// The reference documents disagree (one interleaved counter with odd client
// and even server numbers, versus two independent counters), and the
// reference server started at −2. Alicia uses two independent counters, one
// per direction per conversation:
//
//   - the client numbers its envelopes 1, 2, 3, …
//   - the server numbers its envelopes −1, −2, −3, …
//
// The sign tells who sent an envelope; a receiver rejects envelopes whose
// sign says they came from its own side. Configuration.lastSequenceSeen is
// the absolute value of the last server stanza the client received, so a
// resuming client that saw −7 sends 7 and gets −8 onwards.
//
// # Encoding
//
// Maps have string keys named exactly as the specification names the
// fields (camelCase). Optional fields are omitted when empty, integers are
// written in their most compact form (a JavaScript decoder must get Numbers,
// never BigInt) and timestamps are integer milliseconds since the epoch.
// Because msgpackr decodes every 64-bit MessagePack integer as a BigInt, an
// integer beyond the 32-bit range (a millisecond timestamp) is written as a
// float64 with an integral value, exact up to 2^53: the same bytes msgpackr
// produces for Date.now(). Free-form maps are written with sorted keys, so
// encoding is deterministic.
// An encoded envelope must fit in MaxPacketBytes to travel as one LiveKit
// data packet.
//
// # Decoding
//
// Decoding accepts what real clients send: any integer width, an integral
// float where an integer is expected (JavaScript's Date.now() through
// msgpackr), nil and msgpackr's undefined (fixext1 type 0) for any optional
// field, and unknown keys, which are skipped. It rejects, with a
// *DecodeError carrying the protocol error code, a missing required field,
// a value of the wrong type, an unknown message type, bytes after the
// envelope and envelopes larger than MaxPacketBytes.
package wire
