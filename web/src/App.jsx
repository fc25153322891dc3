import { useEffect, useLayoutEffect, useRef, useState, useSyncExternalStore } from 'react';
import {
  RoomContext,
  RoomAudioRenderer,
  StartAudio,
  BarVisualizer,
  useVoiceAssistant,
  useLocalParticipant,
} from '@livekit/components-react';
import { Track } from 'livekit-client';
import { Conversation, answerText, stepList, identityOf } from './session.js';

// The access key comes once in the link the operator hands out
// (…/#key=…); the page keeps it and takes it out of the address bar.
function takeKeyFromLink() {
  const m = /(?:^|[#&])key=([^&]+)/.exec(location.hash);
  if (m) {
    localStorage.setItem('alicia.key', decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  return localStorage.getItem('alicia.key') || '';
}

export function App() {
  const [conv, setConv] = useState(null);
  const [failure, setFailure] = useState('');
  const join = async (name, key, fresh) => {
    setFailure('');
    localStorage.setItem('alicia.key', key);
    localStorage.setItem('alicia.name', name);
    const room = fresh ? '' : localStorage.getItem('alicia.conversation.' + identityOf(name)) || '';
    const c = new Conversation({ accessKey: key, name, room: room ? JSON.parse(room) : '' });
    window.alicia = c; // for the browser tests and for curious users' consoles
    try {
      await c.start();
      setConv(c);
    } catch (e) {
      c.close();
      setFailure(e.message || String(e));
    }
  };
  // A returning user (name and key kept from last time) goes straight
  // back into their conversation, earlier turns and all.
  const [auto] = useState(() => {
    const key = takeKeyFromLink();
    const name = localStorage.getItem('alicia.name') || '';
    return key && identityOf(name) ? { key, name } : null;
  });
  const [autoTried, setAutoTried] = useState(false);
  useEffect(() => {
    if (auto && !autoTried) {
      setAutoTried(true);
      join(auto.name, auto.key, false);
    }
  }, []);
  if (!conv) return auto && !failure ? <main className="join"><p className="muted" role="status">Joining…</p></main> : <Join onJoin={join} failure={failure} />;
  return (
    <RoomContext.Provider value={conv.room}>
      <Chat conv={conv} onNew={() => { conv.close(); setConv(null); join(conv.name, conv.accessKey, true); }} />
    </RoomContext.Provider>
  );
}

function Join({ onJoin, failure }) {
  const [key, setKey] = useState(takeKeyFromLink);
  const [name, setName] = useState(localStorage.getItem('alicia.name') || '');
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    if (!identityOf(name)) return;
    setBusy(true);
    await onJoin(name.trim(), key.trim(), false);
    setBusy(false);
  };
  return (
    <main className="join">
      <form onSubmit={submit} className="card" aria-labelledby="join-title">
        <h1 id="join-title">Alicia</h1>
        <p className="muted">Talk or type to your assistant.</p>
        <label htmlFor="name">Your name</label>
        <input id="name" name="name" autoComplete="nickname" required autoFocus value={name} onChange={(e) => setName(e.target.value)} />
        <label htmlFor="key">Access key</label>
        <input id="key" name="key" type="password" autoComplete="current-password" required value={key} onChange={(e) => setKey(e.target.value)} />
        <p className="hint">The key is in the link <code>alicia serve</code> prints; opening that link fills it in.</p>
        {failure && <p role="alert" className="error">{failure}</p>}
        <button type="submit" disabled={busy || !identityOf(name) || !key.trim()}>{busy ? 'Joining…' : 'Join'}</button>
      </form>
    </main>
  );
}

function useConv(conv) {
  return useSyncExternalStore(
    (cb) => {
      conv.onChange = cb;
      return () => { conv.onChange = null; };
    },
    () => conv.state,
  );
}

const statusWords = {
  connecting: 'Connecting…',
  waiting: 'Waiting for Alicia…',
  ready: 'Connected',
  reconnecting: 'Connection lost, reconnecting…',
  closed: 'Disconnected',
};

function Chat({ conv, onNew }) {
  const s = useConv(conv);
  const busy = conv.busy();
  const listRef = useRef(null);
  const pinned = useRef(true);
  // Follow the conversation while the reader is at its end; leave the
  // scroll alone once they scroll up to read.
  const onScroll = () => {
    const el = listRef.current;
    pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
  };
  useLayoutEffect(() => {
    const el = listRef.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  });
  return (
    <div className="app">
      <header className="bar">
        <h1 className="title">Alicia</h1>
        <span className={'status status-' + s.status} role="status" aria-live="polite">{statusWords[s.status]}</span>
        <div className="controls">
          <label className="mode">
            <span className="wide">Show reasoning</span><span className="narrow" aria-hidden="true">Reasoning</span>
            <select value={s.mode} onChange={(e) => conv.setMode(e.target.value)} aria-label="Show reasoning">
              <option value="off">Off</option>
              <option value="summary">Summary</option>
              <option value="full">Full</option>
            </select>
          </label>
          <button type="button" className="ghost" onClick={onNew} aria-label="New conversation">
            <span className="wide">New conversation</span><span className="narrow" aria-hidden="true">New</span>
          </button>
        </div>
      </header>
      <Voice conv={conv} s={s} />
      <ol className="turns" ref={listRef} onScroll={onScroll} aria-label="Conversation">
        {s.turns.length === 0 && <li className="empty muted">Ask anything to begin.</li>}
        {s.turns.map((t, i) => (
          <Turn key={t.id} turn={t} mode={s.mode} last={i === s.turns.length - 1} conv={conv} busy={busy} ready={s.status === 'ready'} />
        ))}
      </ol>
      <Errors errors={s.errors} conv={conv} />
      <Composer conv={conv} open={s.status !== 'closed'} busy={busy} stopping={s.stopping} interim={s.interim} />
    </div>
  );
}

function Voice({ conv, s }) {
  const { state, audioTrack } = useVoiceAssistant();
  const { localParticipant, microphoneTrack } = useLocalParticipant();
  const micRef = microphoneTrack && { participant: localParticipant, publication: microphoneTrack, source: Track.Source.Microphone };
  // The live caption: Alicia's interim Transcription, or what a stock
  // LiveKit agent publishes on lk.transcription for the user's speech.
  // The transcribed track tells the user's words from anything else
  // published in the user's name.
  const mine = s.userTranscript;
  const caption = s.interim?.text || (mine && mine.track === microphoneTrack?.trackSid && !mine.final ? mine.text : '');
  return (
    <section className="voice" aria-label="Voice">
      <button type="button" className={s.micOn ? 'mic on' : 'mic'} aria-pressed={s.micOn} onClick={() => conv.toggleMic()}>
        {s.micOn ? 'Mute microphone' : 'Talk'}
      </button>
      {s.micOn && micRef && <BarVisualizer track={micRef} barCount={5} className="visualizer mine" aria-label="Your microphone level" />}
      <button type="button" className="ghost" aria-pressed={!s.speaker} onClick={() => conv.setSpeaker(!s.speaker)}>
        {s.speaker ? 'Mute Alicia' : 'Unmute Alicia'}
      </button>
      {audioTrack && <BarVisualizer state={state} track={audioTrack} barCount={5} className="visualizer" aria-hidden="true" />}
      {state && state !== 'disconnected' && state !== 'connecting' && audioTrack && <span className="agent-state">{state}</span>}
      <span className="caption" aria-live="polite">{caption}</span>
      <RoomAudioRenderer muted={!s.speaker} />
      <StartAudio label="Allow audio" className="ghost" />
    </section>
  );
}

function Turn({ turn, mode, last, conv, busy, ready }) {
  const [shown, setShown] = useState(null); // index of the variant shown; null: the newest
  const n = turn.attempts.length;
  const idx = shown === null || shown >= n ? n - 1 : shown;
  useEffect(() => setShown(null), [n]);
  const a = turn.attempts[idx];
  return (
    <li className="turn">
      <div className={turn.queued ? 'user queued' : 'user'} data-testid="user-message" data-queued={turn.queued ? 'true' : 'false'}>
        <span className="who">{turn.spoken ? 'You said' : 'You'}</span>
        <p>{turn.content}</p>
        {turn.queued && (
          <p className="queued-note muted" data-testid="queued" role="status">
            {ready ? 'Sending once the answer above is complete…' : 'Sending when Alicia is ready…'}
          </p>
        )}
      </div>
      {n === 0 && (turn.pending || turn.regenerating) && <p className="thinking muted">Alicia is thinking…</p>}
      {a && <Answer attempt={a} mode={mode} />}
      {n > 1 && (
        <nav className="variants" aria-label="Answers to this message">
          <button type="button" className="ghost" disabled={idx === 0} onClick={() => setShown(idx - 1)} aria-label="Previous answer">‹</button>
          <span data-testid="variant-position">{idx + 1} / {n}</span>
          <button type="button" className="ghost" disabled={idx === n - 1} onClick={() => setShown(idx + 1)} aria-label="Next answer">›</button>
        </nav>
      )}
      {last && n > 0 && !busy && (
        <button type="button" className="ghost regen" onClick={() => conv.regenerate()}>Regenerate</button>
      )}
    </li>
  );
}

function Answer({ attempt, mode }) {
  const text = answerText(attempt);
  // Its audio stopped before the end: the text is the words heard.
  const cut = attempt.voice === 'cut';
  const steps = stepList(attempt);
  const started = text !== '';
  // Open while Alicia thinks, closed once the answer starts, unless the
  // reader opened or closed it themselves. An answer cut before any word
  // of it was heard is over for the reader, however the model goes on.
  const [choice, setChoice] = useState(null);
  const thinking = !started && !attempt.done && !cut;
  const open = choice ?? thinking;
  const showSteps = mode !== 'off' && steps.length > 0;
  return (
    <div className="answer" data-testid="answer" data-answer-id={attempt.answerId} data-done={attempt.done ? 'true' : 'false'}
      data-voice={attempt.voice || ''}>
      {showSteps && (
        <details className={'reasoning reasoning-' + mode} open={open} data-testid="reasoning"
          onToggle={(e) => { if (e.currentTarget.open !== open) setChoice(e.currentTarget.open); }}>
          <summary>
            {thinking ? 'Thinking' : 'Reasoning'} · {steps.length} {steps.length === 1 ? 'step' : 'steps'}
            {thinking && <span className="dots" aria-hidden="true" />}
          </summary>
          <ol className="steps">
            {steps.map((st) => (
              <li key={st.id} className={st.partial ? 'step partial' : 'step'} data-testid="step" data-step-index={st.index}>
                <span className="step-label">Step {st.index}</span>
                <span className="step-text">{st.content}</span>
              </li>
            ))}
          </ol>
        </details>
      )}
      {!showSteps && thinking && <p className="thinking muted">Alicia is thinking…</p>}
      {(text !== '' || thinking) && <p className={cut ? 'text cut' : 'text'} data-testid="answer-text">{text}</p>}
      {attempt.stopped && <p className="note muted">Stopped.</p>}
      {cut && !attempt.stopped && (
        <p className="note muted" data-testid="interrupted">
          {text === '' ? 'Interrupted before Alicia said any of it.' : 'Interrupted: Alicia stopped speaking here.'}
        </p>
      )}
      {attempt.failed && <p className="note muted">This answer failed before it was complete.</p>}
      {attempt.interrupted && (
        <p className="note muted" data-testid="cut-short">
          This answer was cut short: the server writing it stopped.
        </p>
      )}
    </div>
  );
}

function Errors({ errors, conv }) {
  if (errors.length === 0) return null;
  return (
    <div className="errors" role="alert">
      {errors.slice(-3).map((e) => (
        <p key={e.id} className="error" data-testid="error">
          <span>{e.text}</span>
          <button type="button" className="ghost" onClick={() => conv.dismissError(e.id)} aria-label="Dismiss">×</button>
        </p>
      ))}
    </div>
  );
}

function Composer({ conv, open, busy, stopping, interim }) {
  const [text, setText] = useState('');
  const send = () => {
    if (conv.ask(text)) setText('');
  };
  const onKey = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === 'Escape' && busy) {
      e.preventDefault();
      conv.stop();
    }
  };
  return (
    <form className="composer" onSubmit={(e) => { e.preventDefault(); send(); }}>
      <label htmlFor="message" className="sr-only">Message</label>
      <textarea id="message" rows={1} value={text} placeholder={interim ? interim.text : 'Type a message'}
        onChange={(e) => setText(e.target.value)} onKeyDown={onKey} />
      {busy ? (
        <button type="button" className="stop" onClick={() => conv.stop()} disabled={stopping}>Stop</button>
      ) : (
        <button type="submit" disabled={!open || !text.trim()}>Send</button>
      )}
    </form>
  );
}
