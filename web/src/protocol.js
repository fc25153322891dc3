// The Alicia protocol as the page speaks it: MessagePack envelopes
// {stanzaId, conversationId, type, meta?, body} in LiveKit data packets on
// the "alicia" topic. The codec is msgpackr; what is written here is only
// the protocol's own rules (type codes, which keys must never be undefined,
// how 64-bit numbers come back).
import { Packr } from 'msgpackr';

export const Topic = 'alicia';

export const T = {
  Error: 1,
  UserMessage: 2,
  AssistantMessage: 3,
  AudioChunk: 4,
  ReasoningStep: 5,
  ToolUseRequest: 6,
  ToolUseResult: 7,
  Acknowledgement: 8,
  Transcription: 9,
  ControlStop: 10,
  ControlVariation: 11,
  Configuration: 12,
  StartAnswer: 13,
  MemoryTrace: 14,
  Commentary: 15,
  AssistantSentence: 16,
};

export const TypeName = Object.fromEntries(Object.entries(T).map(([k, v]) => [v, k]));

// Plain maps, never msgpackr records; 64-bit integers decode as numbers
// (the server writes millisecond timestamps as float64 anyway, but a
// BigInt would break Date arithmetic if one ever came).
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true });

// omitUndefined drops keys whose value is undefined: msgpackr would write
// them as an extension the protocol does not know.
function omitUndefined(o) {
  if (Array.isArray(o)) return o.map(omitUndefined);
  if (o === null || typeof o !== 'object' || o instanceof Uint8Array) return o;
  const out = {};
  for (const [k, v] of Object.entries(o)) {
    if (v !== undefined) out[k] = omitUndefined(v);
  }
  return out;
}

export function encode(stanzaId, conversationId, type, body) {
  return packr.pack(omitUndefined({ stanzaId, conversationId: conversationId || '', type, body }));
}

// decode returns the envelope, or null for bytes that are not one.
export function decode(bytes) {
  let env;
  try {
    env = packr.unpack(bytes);
  } catch {
    return null;
  }
  if (!env || typeof env !== 'object' || typeof env.type !== 'number' || typeof env.stanzaId !== 'number') {
    return null;
  }
  env.body = env.body && typeof env.body === 'object' ? env.body : {};
  return env;
}

// Feature strings of Configuration.
export const F = {
  streaming: 'streaming',
  audioOutput: 'audio_output',
  reasoningSteps: 'reasoning_steps',
  reasoningSummary: 'reasoning_summary',
  partialReasoning: 'partial_reasoning',
};

// What a client can display (reasoning_steps: full steps and summaries)
// is apart from what the user wants to see, the stored preference. A
// client changes the preference only by saying so: the feature
// reasoning_preference:<mode>. The server's Configuration states the
// preference in effect the same way.
export const preferencePrefix = 'reasoning_preference:';

export function preferenceFeature(mode) {
  return preferencePrefix + mode;
}

export function modeOf(features) {
  const f = features || [];
  const stated = f.find((x) => x.startsWith(preferencePrefix));
  if (stated) return stated.slice(preferencePrefix.length);
  if (f.includes(F.reasoningSteps) || f.includes('reasoning_step_display')) return 'full';
  if (f.includes(F.reasoningSummary)) return 'summary';
  return 'off';
}

const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-';

// newId makes a 21-character NanoID-style id with a prefix, from the
// browser's cryptographic random source.
export function newId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(21));
  let id = '';
  for (const b of bytes) id += alphabet[b & 63];
  return `${prefix}_${id}`;
}

// Plain words for the protocol's error codes, shown before the server's
// own message.
export function errorWords(code) {
  if (code >= 100 && code < 200) return 'The page sent something the server could not read.';
  if (code === 201) return 'This conversation does not exist on the server.';
  if (code === 202) return 'That cannot be done right now.';
  if (code >= 200 && code < 300) return 'The conversation hit a problem.';
  if (code >= 300 && code < 400) return 'A tool failed.';
  if (code === 503) return 'The assistant is unavailable.';
  if (code === 504) return 'The server is busy.';
  return 'The server had a problem.';
}
