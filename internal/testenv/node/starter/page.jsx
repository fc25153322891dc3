// A page built the way LiveKit's agent-starter-react builds its session
// (components-react 2.9.20: a token route whose room configuration
// dispatches the agent, useSession, useAgent, useSessionMessages), plus
// the docs/starters.md recipe: a reasoning panel from useTextStream and a
// show-reasoning toggle that sets participant attributes. The test opens
// it as /?identity=…&room=…; a real app's token route picks both.
import { useEffect, useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { TokenSource } from 'livekit-client';
import {
  RoomAudioRenderer,
  SessionProvider,
  useAgent,
  useLocalParticipant,
  useSession,
  useSessionContext,
  useSessionMessages,
  useTextStream,
} from '@livekit/components-react';

const params = new URLSearchParams(location.search);

function App() {
  const tokenSource = useMemo(() => TokenSource.endpoint('/api/token'), []);
  const session = useSession(tokenSource, {
    agentName: 'alicia',
    roomName: params.get('room') ?? undefined,
    participantIdentity: params.get('identity') ?? undefined,
  });
  useEffect(() => {
    session.start({ tracks: { microphone: { enabled: params.get('mic') === '1' } } });
    return () => {
      session.end();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return (
    <SessionProvider session={session}>
      <RoomAudioRenderer />
      <SessionView />
    </SessionProvider>
  );
}

function SessionView() {
  const session = useSessionContext();
  const agent = useAgent();
  const { messages, send } = useSessionMessages(session);
  const [draft, setDraft] = useState('');
  // As the starter does: a failed agent ends the session.
  useEffect(() => {
    if (agent.state === 'failed') session.end();
  }, [agent.state]);
  return (
    <main>
      <p id="status" data-connection={session.connectionState} data-agent={agent.state}
        data-failure={(agent.failureReasons ?? []).join('; ')}>
        {session.connectionState} · {agent.state}
      </p>
      <ReasoningToggle />
      <Transcript messages={messages} />
      <form onSubmit={(e) => { e.preventDefault(); send(draft); setDraft(''); }}>
        <input id="chat" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button type="submit">Send</button>
      </form>
    </main>
  );
}

// ---- The recipe (docs/starters.md) ----

const REASONING_TOPIC = 'alicia.reasoning';

// The show-reasoning toggle: the page says it reads reasoning streams,
// and the choice is the user's stored preference (remembered here too, so
// the toggle shows it after a reload).
function ReasoningToggle() {
  const { localParticipant } = useLocalParticipant();
  const session = useSessionContext();
  const [level, setLevel] = useState(() => localStorage.getItem('alicia.reasoning') ?? 'full');
  const [applied, setApplied] = useState('');
  useEffect(() => {
    if (!session.isConnected) return;
    localStorage.setItem('alicia.reasoning', level);
    localParticipant
      .setAttributes({ 'alicia.reasoning_streams': '1', 'alicia.reasoning_preference': level })
      .then(() => setApplied(level), (e) => console.error('setAttributes', e));
  }, [session.isConnected, localParticipant, level]);
  return (
    <label>
      Show reasoning{' '}
      <select id="reasoning" data-applied={applied} value={level} onChange={(e) => setLevel(e.target.value)}>
        <option value="off">Off</option>
        <option value="summary">Summary</option>
        <option value="full">Full</option>
      </select>
    </label>
  );
}

// Each agent transcript with the reasoning of its answer beside it; the
// reasoning of an answer not spoken yet comes last, as it is written.
function Transcript({ messages }) {
  const { textStreams: steps } = useTextStream(REASONING_TOPIC);
  const { textStreams: transcripts } = useTextStream('lk.transcription');
  const answerOf = new Map(transcripts.map((t) => [t.streamInfo.id, t.streamInfo.attributes?.['alicia.answer_id']]));
  const byAnswer = new Map();
  for (const s of steps) {
    const id = s.streamInfo.attributes?.['alicia.answer_id'] ?? '';
    byAnswer.set(id, [...(byAnswer.get(id) ?? []), s]);
  }
  const shown = new Set();
  return (
    <ol id="transcript">
      {messages.map((m) => {
        const answerId = m.type === 'agentTranscript' ? answerOf.get(m.id) : undefined;
        if (answerId) shown.add(answerId);
        return (
          <li key={m.id} className={m.type} data-answer-id={answerId ?? ''}>
            {answerId && <Reasoning steps={byAnswer.get(answerId)} />}
            <p className="text">{m.message}</p>
          </li>
        );
      })}
      {[...byAnswer.keys()].filter((id) => !shown.has(id)).map((id) => (
        <li key={id} className="thinking" data-answer-id={id}>
          <Reasoning steps={byAnswer.get(id)} />
        </li>
      ))}
    </ol>
  );
}

function Reasoning({ steps }) {
  if (!steps?.length) return null;
  const ordered = [...steps].sort((a, b) =>
    Number(a.streamInfo.attributes['alicia.step_index']) - Number(b.streamInfo.attributes['alicia.step_index']));
  return (
    <ol className="reasoning">
      {ordered.map((s) => (
        <li key={s.streamInfo.id} className="step" data-index={s.streamInfo.attributes['alicia.step_index']}
          data-level={s.streamInfo.attributes['alicia.reasoning_level']}>{s.text}</li>
      ))}
    </ol>
  );
}

createRoot(document.getElementById('root')).render(<App />);
