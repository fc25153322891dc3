// The page's side of a conversation: it joins the LiveKit room with a token
// from the HTTP API, speaks the Alicia protocol (handshake, resume after a
// drop, numbering), and keeps the conversation as plain state that the UI
// renders. Every piece of state is keyed by the ids the server sends, so an
// envelope that arrives twice (live and again by replay) changes nothing.
import { Room, RoomEvent, ConnectionState, ParticipantKind, DisconnectReason } from 'livekit-client';
import { T, Topic, encode, decode, preferenceFeature, modeOf, newId, errorWords, F } from './protocol.js';

const clientVersion = 'alicia-web/1';

// LiveKit's transcripts are text streams on this topic: one stream per
// update of a user's utterance, and one per answer spoken, its words
// written as their audio plays and the stream closed final once all were
// heard, not final where the audio was cut (the user spoke over it, or a
// stop).
const TranscriptionTopic = 'lk.transcription';
const SegmentAttribute = 'lk.segment_id';
const FinalAttribute = 'lk.transcription_final';
const TrackAttribute = 'lk.transcribed_track_id';

// Alicia names the transcript segment of an answer after the user message
// it answers, and every answer to that message (a regeneration) shares
// it; the answer's own id comes in an attribute of its own. An answer cut
// before any of its words was heard gets an empty stream, closed not
// final: the id, not the segment, says which answer heard nothing.
const answerSegmentPrefix = 'SG_answer_';
const AnswerAttribute = 'alicia.answer_id';

// How long the page waits for the bot's greeting before it configures
// itself unasked (the greeting carries the user's remembered preference,
// so the page prefers to hear it first).
const greetingWait = 5000;

// How long a queued message that went out may hold the ones behind it
// without its answer ending: an answer can be lost (across a reconnect
// the server no longer replays, or after an error that names no message),
// and the queue must not stall on it. Generous: a long answer with full
// reasoning can stream for minutes.
const answerWait = 180000;

// rawMicrophone turns off the browser's own processing of the
// microphone. Pages keep it on unless told otherwise
// (alicia.microphone.processing = false): for a headset, a speaker with
// its own echo canceller, and the tests that play Alicia's voice back into
// the microphone, as a phone on speaker without an echo canceller does.
// One channel: without the echo canceller, which is mono, a browser opens
// a stereo microphone as stereo, and LiveKit's client then sends it
// without DTX or redundancy, for a listener that hears in mono.
const rawMicrophone = { echoCancellation: false, noiseSuppression: false, autoGainControl: false, channelCount: 1 };

function load(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;
  }
}

function save(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Private mode: the page still works, it just forgets on reload.
  }
}

// identityOf turns a typed name into a LiveKit identity: the same name
// always gives the same identity, so a user's preference follows the name
// across devices.
export function identityOf(name) {
  return name
    .trim()
    .toLowerCase()
    .normalize('NFKC')
    .replace(/[^\p{L}\p{N}_.@-]+/gu, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
}

export class Conversation {
  constructor({ apiBase = '', accessKey, name, room: roomName, onChange }) {
    this.apiBase = apiBase;
    this.accessKey = accessKey;
    this.name = name;
    this.identity = identityOf(name);
    this.onChange = onChange;
    this.state = {
      status: 'connecting', // connecting, waiting (for the bot), ready, reconnecting, closed
      conversationId: roomName || '',
      mode: load('alicia.mode.' + this.identity, 'full'),
      speaker: load('alicia.speaker', true),
      micOn: false,
      turns: [], // [{id, content, from, pending, queued, attempts: [attempt]}]
      errors: [], // [{id, text, turnId}]
      interim: null, // {id, text} of the user's speech being recognised
      // The user's speech as lk.transcription carries it (what a stock
      // LiveKit agent sends instead of Transcriptions): {track, text, final}.
      userTranscript: null,
      stopping: false,
    };
    this.room = null;
    this.stats = { received: {}, applied: {} };
    this.seen = new Set();
    this.configured = false; // our Configuration went out on this connection
    // The bot our Configuration went to (its participant sid; '' for none).
    this.agentAtConfig = '';
    this.greetTimer = null;
    this.awaiting = null; // the queued message sent last, until its answer ends
    this.awaitTimer = null;
    // How far the audio of answers not shown yet got, by answer id: a
    // transcript can come before the answer's StartAnswer.
    this.voices = new Map();
  }

  // --- state plumbing ---------------------------------------------------

  set(patch) {
    this.state = { ...this.state, ...patch };
    this.onChange?.(this.state);
  }

  updateTurns(fn) {
    const turns = this.state.turns.map((t) => ({ ...t, attempts: t.attempts.map((a) => ({ ...a })) }));
    fn(turns);
    this.set({ turns });
  }

  stanzaKey() {
    return 'alicia.stanzas.' + this.state.conversationId + '.' + this.identity;
  }

  // Client stanzas count 1, 2, 3… per conversation, also across reloads;
  // lastSeen is the highest server stanza received, for resume.
  counters() {
    return load(this.stanzaKey(), { next: 1, lastSeen: 0 });
  }

  // --- joining ----------------------------------------------------------

  async token() {
    const res = await fetch(this.apiBase + '/v1/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + this.accessKey },
      // The features also go into the token's participant attributes, which
      // reach the bot whichever of the two joins the room first.
      body: JSON.stringify({ identity: this.identity, name: this.name, room: this.state.conversationId || undefined, features: this.features() }),
    });
    const body = await res.json().catch(() => ({}));
    if (res.status === 401) throw new Error('The access key was not accepted. Ask whoever runs this Alicia for the link again.');
    if (!res.ok) throw new Error(body.error || `The server refused a token (HTTP ${res.status}).`);
    return body;
  }

  async history(token) {
    const res = await fetch(this.apiBase + '/v1/conversations/' + encodeURIComponent(this.state.conversationId), {
      headers: { Authorization: 'Bearer ' + token },
    });
    if (res.status === 404) return null; // a new conversation
    if (!res.ok) throw new Error(`Earlier messages could not be loaded (HTTP ${res.status}).`);
    return res.json();
  }

  async start() {
    const grant = await this.token();
    const fresh = !this.state.conversationId;
    this.set({ conversationId: grant.room });
    save('alicia.conversation.' + this.identity, grant.room);
    if (!fresh) {
      const h = await this.history(grant.token).catch((e) => {
        this.addError(e.message);
        return null;
      });
      if (h) this.applyHistory(h.messages || []);
    }
    const room = new Room({ adaptiveStream: false, dynacast: false });
    this.room = room;
    room
      .on(RoomEvent.DataReceived, (payload, _participant, _kind, topic) => {
        if (topic === Topic || topic === undefined || topic === '') this.receive(payload);
      })
      .on(RoomEvent.ParticipantConnected, (p) => {
        // A bot that came after this page configured itself (one that took
        // the conversation over) must be told too: its greeting is answered
        // (onConfiguration), or, if the greeting came first, after the wait.
        if (p.kind === ParticipantKind.AGENT) this.scheduleFallback();
      })
      .on(RoomEvent.Reconnecting, () => this.set({ status: 'reconnecting' }))
      .on(RoomEvent.SignalReconnecting, () => this.set({ status: 'reconnecting' }))
      .on(RoomEvent.Reconnected, () => {
        // The server may have seen this as a new connection and now waits
        // for a handshake before it sends anything; either way it replays
        // what came after the last stanza we saw.
        this.configured = false;
        // The answer the queue waits for may have been lost with the
        // connection: the next queued message goes once the bot has
        // answered the handshake again.
        this.stopAwaiting();
        this.configure();
      })
      .on(RoomEvent.Disconnected, (reason) => {
        this.set({ status: 'closed' });
        if (reason === DisconnectReason.DUPLICATE_IDENTITY) {
          this.addError('This conversation was opened in another tab or device under the same name; reload to continue here.');
        } else if (reason !== DisconnectReason.CLIENT_INITIATED) {
          this.addError('The connection to the room ended; reload the page to reconnect.');
        }
      })
      .on(RoomEvent.LocalTrackPublished, () => this.set({ micOn: room.localParticipant.isMicrophoneEnabled }))
      .on(RoomEvent.TrackMuted, () => this.set({ micOn: room.localParticipant.isMicrophoneEnabled }))
      .on(RoomEvent.TrackUnmuted, () => this.set({ micOn: room.localParticipant.isMicrophoneEnabled }));
    // The page reads lk.transcription itself (LiveKit allows one reader
    // per topic): the user's caption, and where an answer's audio was cut.
    room.registerTextStreamHandler(TranscriptionTopic, (reader, from) => {
      this.onTranscriptStream(reader, from.identity);
    });
    // Envelopes over 15 KiB come as byte streams on the same topic.
    room.registerByteStreamHandler(Topic, async (reader) => {
      const chunks = await reader.readAll();
      const size = chunks.reduce((n, c) => n + c.length, 0);
      const all = new Uint8Array(size);
      let off = 0;
      for (const c of chunks) {
        all.set(c, off);
        off += c.length;
      }
      this.receive(all);
    });
    this.set({ status: 'waiting' });
    await room.connect(grant.url, grant.token);
    this.scheduleFallback();
    return room;
  }

  scheduleFallback() {
    clearTimeout(this.greetTimer);
    this.greetTimer = setTimeout(() => {
      const bot = this.agentSid();
      if (bot && (!this.configured || bot !== this.agentAtConfig)) this.configure();
    }, greetingWait);
  }

  // agentSid is the bot's participant sid, '' while no bot is in the room.
  agentSid() {
    for (const p of this.room?.remoteParticipants.values() ?? []) {
      if (p.kind === ParticipantKind.AGENT) return p.sid;
    }
    return '';
  }

  close() {
    clearTimeout(this.greetTimer);
    this.stopAwaiting();
    this.room?.disconnect();
  }

  // --- sending ----------------------------------------------------------

  send(type, body) {
    const c = this.counters();
    const stanza = c.next;
    save(this.stanzaKey(), { ...c, next: c.next + 1 });
    const bytes = encode(stanza, this.state.conversationId, type, body);
    this.room?.localParticipant.publishData(bytes, { reliable: true, topic: Topic }).catch((e) => {
      this.addError('A message could not be sent: ' + e.message);
    });
    return stanza;
  }

  // features are what this page can display and play; the user's
  // show-reasoning choice is not among them.
  features() {
    const f = [F.streaming, F.reasoningSteps, F.partialReasoning];
    if (this.state.speaker) f.push(F.audioOutput);
    return f;
  }

  // configure sends the handshake (or a settings update): features, and
  // the last server stanza seen so that the server replays what came after.
  configure() {
    this.configured = true;
    this.agentAtConfig = this.agentSid();
    this.configStanza = this.send(T.Configuration, {
      conversationId: this.state.conversationId,
      lastSequenceSeen: this.counters().lastSeen,
      clientVersion,
      device: 'web',
      // The preference goes along only when the user just chose it here:
      // another device may have changed it since this page loaded.
      features: this.chosenMode ? [...this.features(), preferenceFeature(this.chosenMode)] : this.features(),
    });
    this.chosenMode = undefined;
  }

  setMode(mode) {
    save('alicia.mode.' + this.identity, mode);
    this.set({ mode });
    this.chosenMode = mode;
    if (this.configured) this.configure();
  }

  setSpeaker(on) {
    save('alicia.speaker', on);
    this.set({ speaker: on });
    if (this.configured) this.configure();
  }

  async toggleMic() {
    const lp = this.room?.localParticipant;
    if (!lp) return;
    try {
      const raw = !load('alicia.microphone.processing', true);
      await lp.setMicrophoneEnabled(!lp.isMicrophoneEnabled, raw ? rawMicrophone : undefined);
    } catch (e) {
      this.addError('The microphone could not be opened: ' + e.message);
    }
    this.set({ micOn: lp.isMicrophoneEnabled });
  }

  // ask sends a typed message, or, before the bot has answered the
  // handshake (just joined, or reconnecting), shows it as queued and sends
  // it once the session is ready: a message sent earlier would reach no
  // one, or a bot that does not know yet what this page can display. A
  // message typed while others still wait goes behind them.
  ask(text) {
    const content = text.trim();
    if (!content || this.state.status === 'closed') return false;
    const id = newId('msg');
    const now = this.state.status === 'ready' && !this.state.turns.some((t) => t.queued);
    this.updateTurns((turns) => {
      turns.push({ id, content, from: this.identity, pending: now, queued: !now, attempts: [] });
    });
    if (now) this.sendMessage(id, content);
    return true;
  }

  sendMessage(id, content) {
    const last = this.lastAnswerId();
    this.send(T.UserMessage, {
      id,
      previousId: last || undefined,
      conversationId: this.state.conversationId,
      content,
      timestamp: Date.now(),
    });
  }

  // sendQueued sends the first message still queued once the session is
  // ready, and the next one once the answer to it has ended: a new
  // message stops the answer in progress, and each was typed to be
  // answered.
  sendQueued() {
    if (this.state.status !== 'ready') return;
    if (this.awaiting) {
      const t = this.state.turns.find((x) => x.id === this.awaiting);
      if (t && !t.ended && !t.attempts.at(-1)?.done) return;
      this.stopAwaiting();
    }
    const next = this.state.turns.find((t) => t.queued);
    if (!next) return;
    this.awaiting = next.id;
    this.awaitTimer = setTimeout(() => {
      if (this.awaiting !== next.id) return;
      this.stopAwaiting();
      this.sendQueued();
    }, answerWait);
    this.updateTurns((turns) => {
      const t = turns.find((x) => x.id === next.id);
      t.queued = false;
      t.pending = true;
    });
    this.sendMessage(next.id, next.content);
  }

  // stopAwaiting lets the queue go on without the answer it waited for.
  stopAwaiting() {
    clearTimeout(this.awaitTimer);
    this.awaitTimer = null;
    this.awaiting = null;
  }

  stop() {
    const turn = this.state.turns.at(-1);
    const attempt = turn?.attempts.at(-1);
    this.set({ stopping: true });
    this.send(T.ControlStop, {
      conversationId: this.state.conversationId,
      targetId: attempt?.answerId || undefined,
      stopType: 'all',
      reason: 'user',
    });
  }

  regenerate() {
    const turn = this.state.turns.at(-1);
    if (!turn) return;
    this.send(T.ControlVariation, { conversationId: this.state.conversationId, targetId: turn.id, mode: 'regenerate' });
    this.updateTurns((turns) => {
      turns.at(-1).regenerating = true;
    });
  }

  lastAnswerId() {
    for (let i = this.state.turns.length - 1; i >= 0; i--) {
      const a = this.state.turns[i].attempts.at(-1);
      if (a?.answerId) return a.answerId;
    }
    return '';
  }

  busy() {
    const a = this.state.turns.at(-1)?.attempts.at(-1);
    const t = this.state.turns.at(-1);
    return Boolean((t && (t.pending || t.regenerating)) || (a && !a.done));
  }

  addError(text, turnId) {
    this.set({ errors: [...this.state.errors, { id: newId('e'), text, turnId }] });
  }

  dismissError(id) {
    this.set({ errors: this.state.errors.filter((e) => e.id !== id) });
  }

  // --- receiving --------------------------------------------------------

  receive(payload) {
    const env = decode(payload);
    if (!env) return;
    this.stats.received[env.type] = (this.stats.received[env.type] || 0) + 1;
    const n = Math.abs(env.stanzaId);
    if (env.type !== T.Configuration) {
      // The same stanza can come live and again by replay: apply it once.
      if (this.seen.has(n)) return;
      this.seen.add(n);
      if (this.seen.size > 8192) {
        // Replays only go back to the last stanza seen: old numbers can go.
        for (const k of this.seen) if (k < n - 4096) this.seen.delete(k);
      }
      const c = this.counters();
      // The server's Configuration belongs to one connection and is never
      // replayed, so it does not count towards what resume asks for.
      if (n > c.lastSeen) save(this.stanzaKey(), { ...c, lastSeen: n });
    }
    this.stats.applied[env.type] = (this.stats.applied[env.type] || 0) + 1;
    if (env.type === T.Error && env.meta?.originatingStanzaId === this.configStanza && env.body.code === 202) {
      // The server no longer keeps what this page missed (it restarted
      // without a database, and counts its stanzas from −1 again): history
      // already shows what was stored, so carry on from here without a
      // replay, and forget the old numbers.
      const c = this.counters();
      save(this.stanzaKey(), { ...c, lastSeen: 0 });
      this.seen.clear();
      this.configure();
      return;
    }
    this.apply(env.type, env.body);
    // After the greeting (and this page's Configuration, which answering
    // it sent first), or the end of an answer: the next queued message.
    this.sendQueued();
  }

  apply(type, b) {
    switch (type) {
      case T.Configuration:
        return this.onConfiguration(b);
      case T.Acknowledgement:
        return this.onAck(b);
      case T.ReasoningStep:
        return this.onStep(b);
      case T.StartAnswer:
        return this.onStartAnswer(b);
      case T.AssistantSentence:
        return this.onSentence(b);
      case T.AssistantMessage:
        return this.onWholeAnswer(b);
      case T.Transcription:
        return this.onTranscription(b);
      case T.Error:
        return this.onError(b);
      default:
        return undefined;
    }
  }

  onConfiguration(b) {
    const mode = modeOf(b.features);
    if (!this.configured) {
      // The greeting: it carries the user's remembered preference, which
      // the page then confirms in its own Configuration.
      this.set({ mode });
      save('alicia.mode.' + this.identity, mode);
      this.configure();
    } else if (this.agentAtConfig !== this.agentSid()) {
      // Our Configuration went out before this bot was in the room: to
      // nobody, or to a bot that has since been replaced, as when its
      // process died and another took the conversation over. This is the
      // new bot's greeting: answer it, resuming, which also tells this page
      // of an answer the old bot left unfinished.
      this.configure();
    } else {
      this.set({ mode });
      save('alicia.mode.' + this.identity, mode);
    }
    clearTimeout(this.greetTimer);
    this.set({ status: 'ready' });
  }

  onAck(b) {
    if (b.acknowledgedMessageId) {
      this.updateTurns((turns) => {
        const t = turns.find((x) => x.id === b.acknowledgedMessageId);
        if (t) t.pending = false;
      });
    }
    if (b.notes === 'interrupted') {
      // The process writing that answer died; the bot that took the
      // conversation over stored it as it was. It will not go on.
      let ended = null;
      this.updateTurns((turns) => {
        const t = turns.find((x) => x.attempts.some((a) => a.answerId === b.acknowledgedMessageId));
        if (!t) return;
        const a = t.attempts.find((x) => x.answerId === b.acknowledgedMessageId);
        a.interrupted = true;
        a.done = true;
        t.ended = true;
        ended = t.id;
      });
      if (ended !== null && ended === this.awaiting) this.stopAwaiting();
    }
    if (b.notes === 'stopped' || b.notes === 'nothing to stop') {
      this.set({ stopping: false });
      if (b.notes === 'stopped') {
        this.updateTurns((turns) => {
          const a = turns.at(-1)?.attempts.at(-1);
          if (a) {
            a.stopped = true;
            a.done = true;
          }
        });
      }
    }
  }

  // turnFor finds the turn of a user message, creating it for a message
  // this page did not send (another device of the same user, a spoken one).
  turnFor(turns, userId) {
    let t = turns.find((x) => x.id === userId);
    if (!t) {
      t = { id: userId, content: '', from: '', pending: false, attempts: [] };
      turns.push(t);
    }
    return t;
  }

  // attemptFor is the answer a packet belongs to: the one that is still
  // open, or a new one once the previous has ended (a regeneration).
  attemptFor(turn, answerId) {
    if (answerId) {
      const byId = turn.attempts.find((a) => a.answerId === answerId);
      if (byId) return byId;
    }
    let a = turn.attempts.at(-1);
    if (!a || a.done || (answerId && a.answerId && a.answerId !== answerId)) {
      a = { answerId: '', steps: {}, sentences: {}, done: false, stopped: false, text: '' };
      turn.attempts.push(a);
      turn.regenerating = false;
    }
    if (answerId && !a.answerId) {
      a.answerId = answerId;
      const v = this.voices.get(answerId);
      if (v) {
        this.voices.delete(answerId);
        a.voice = v.voice;
        if (v.voice === 'cut') a.heard = v.heard;
      }
    }
    return a;
  }

  onStep(b) {
    this.updateTurns((turns) => {
      const t = this.turnFor(turns, b.previousId);
      t.pending = false;
      const a = this.attemptFor(t, '');
      a.steps = { ...a.steps, [b.id]: { id: b.id, index: b.stepIndex, content: b.content, partial: Boolean(b.partial) } };
    });
  }

  onStartAnswer(b) {
    this.updateTurns((turns) => {
      const t = this.turnFor(turns, b.previousId);
      t.pending = false;
      this.attemptFor(t, b.id);
    });
  }

  onSentence(b) {
    this.updateTurns((turns) => {
      for (const t of turns) {
        const a = t.attempts.find((x) => x.answerId === b.previousId);
        if (!a) continue;
        a.sentences = { ...a.sentences, [b.sequence]: b.text };
        if (b.isFinal) a.done = true;
        return;
      }
    });
  }

  onWholeAnswer(b) {
    this.updateTurns((turns) => {
      const t = this.turnFor(turns, b.previousId);
      const a = this.attemptFor(t, b.id);
      a.text = b.content;
      a.done = true;
      a.stopped = b.state === 'stopped';
    });
  }

  onTranscription(b) {
    if (!b.final) {
      this.set({ interim: { id: b.id, text: b.text } });
      return;
    }
    // A final transcription is the user's message, under its id.
    this.set({ interim: null });
    this.updateTurns((turns) => {
      const t = this.turnFor(turns, b.id);
      t.content = b.text;
      t.spoken = true;
    });
  }

  onError(b) {
    const text = `${errorWords(b.code)} ${b.message || ''}`.trim();
    this.addError(text, b.originatingId);
    // An error about the message the queue waits for ends its answer; one
    // that names no message may be about it too, and the user has been
    // told: either way the next queued message goes.
    if (!b.originatingId || b.originatingId === this.awaiting) this.stopAwaiting();
    if (b.originatingId) {
      this.updateTurns((turns) => {
        const t = turns.find((x) => x.id === b.originatingId);
        if (t) {
          t.pending = false;
          t.regenerating = false;
          t.ended = true;
          const a = t.attempts.at(-1);
          if (a) {
            // A server failure names the user message whose answer broke.
            if (b.code >= 500) a.failed = true;
            a.done = true;
          }
        }
      });
    }
    if (b.recoverable === false) {
      this.set({ status: 'closed' });
    }
  }

  // onTranscriptStream reads one lk.transcription stream to its end. An
  // answer's stream that ends not final was cut where its audio stopped:
  // it holds the words the user heard, where the server cuts the answer it
  // stores, and the page shows them instead of all that was written.
  async onTranscriptStream(reader, sender) {
    const attr = (k) => reader.info.attributes?.[k] ?? '';
    const segment = attr(SegmentAttribute);
    const answering = sender !== this.identity && segment.startsWith(answerSegmentPrefix)
      ? segment.slice(answerSegmentPrefix.length)
      : '';
    // The answer the stream names; from an agent that names none, the
    // answer being spoken when its words begin: a regeneration speaks
    // under the same segment, and its cut must not land on the new one.
    const named = answering ? attr(AnswerAttribute) : '';
    const answerId = named || (answering ? this.state.turns.find((t) => t.id === answering)?.attempts.at(-1)?.answerId || '' : '');
    const mine = !answering && sender === this.identity;
    if (answering) this.onVoice(answering, answerId, 'speaking', '', Boolean(named));
    let text = '';
    try {
      for await (const chunk of reader) {
        text += chunk;
        if (mine) this.set({ userTranscript: { track: attr(TrackAttribute), text, final: attr(FinalAttribute) === 'true' } });
      }
    } catch {
      // Ended abnormally (the sender went away mid-stream): it says
      // nothing of where the audio stopped.
      return;
    }
    // The trailer's attributes, merged in by now, say whether it was final.
    const final = attr(FinalAttribute) === 'true';
    if (mine) this.set({ userTranscript: { track: attr(TrackAttribute), text, final } });
    if (answering) this.onVoice(answering, answerId, final ? 'heard' : 'cut', text, Boolean(named));
  }

  // onVoice follows an answer's audio: speaking, heard to its end, or cut
  // (with the words heard). An answer the stream named exactly is only
  // ever that answer: one the page does not show yet gets it when it
  // comes, never the turn's latest answer in its place.
  onVoice(turnId, answerId, voice, heard, exact) {
    if (exact && !this.state.turns.some((t) => t.attempts.some((x) => x.answerId === answerId))) {
      if (voice !== 'speaking' || !this.voices.has(answerId)) this.voices.set(answerId, { voice, heard });
      return;
    }
    this.updateTurns((turns) => {
      const t = turns.find((x) => x.id === turnId);
      const byId = answerId && turns.flatMap((x) => x.attempts).find((x) => x.answerId === answerId);
      const a = byId || (!exact && t && t.attempts.at(-1));
      if (!a) return;
      a.voice = voice;
      if (voice === 'cut') a.heard = heard;
    });
  }

  // applyHistory fills the conversation from the history endpoint: user
  // messages and their answers, variants in order, stored reasoning.
  applyHistory(messages) {
    this.updateTurns((turns) => {
      for (const m of messages) {
        if (m.role === 'user') {
          if (m.status === 'superseded') continue;
          const t = this.turnFor(turns, m.id);
          t.content = m.content;
          t.from = this.identity;
          continue;
        }
        if (m.role !== 'assistant') continue;
        const t = turns.find((x) => x.id === m.previousId);
        if (!t) continue;
        let a = t.attempts.find((x) => x.answerId === m.id);
        if (!a) {
          a = { answerId: m.id, steps: {}, sentences: {}, done: true, stopped: false, text: '' };
          t.attempts.push(a);
        }
        a.text = m.content;
        a.done = m.status !== 'streaming';
        a.stopped = m.status === 'stopped';
        a.failed = m.status === 'failed';
        a.interrupted = m.status === 'interrupted';
        for (const s of m.reasoning || []) {
          a.steps[s.id] = { id: s.id, index: s.stepIndex, content: s.content, partial: false };
        }
      }
    });
  }
}

// answerText is what an attempt says so far: its streamed sentences in
// order, or the whole text when it came in one piece; once its audio was
// cut, only the words heard.
export function answerText(a) {
  if (a.voice === 'cut') return a.heard;
  const seqs = Object.keys(a.sentences)
    .map(Number)
    .sort((x, y) => x - y);
  if (seqs.length === 0) return a.text;
  return seqs
    .map((s) => a.sentences[s])
    .filter((s) => s !== '')
    .join(' ');
}

export function stepList(a) {
  return Object.values(a.steps).sort((x, y) => x.index - y.index);
}

export { ConnectionState };
