// One Alicia client's session, whatever LiveKit SDK carries it: the
// rtc-node script and the browser page both run it, so that the Go tests
// check the same behaviour in every client family.
//
// conn: { send(bytes) → Promise, setAttributes(attrs) → Promise,
//         onData(callback(bytes)) }
// codec: { encode(object) → Uint8Array, decode(bytes) → object }
// opts: { features: [..] | null (no Configuration is sent),
//         attributes: {..} | null (set with setAttributes at connect),
//         question, answerAsked: re-send the Configuration when the bot
//         asks for it (a client that handles 202) }
// signal(line): progress for the test ("connected" once the
//         Configuration was sent, so the test may dispatch the bot now).
export async function converse(conn, codec, opts, signal) {
  const T = { error: 1, user: 2, assistant: 3, step: 5, ack: 8, config: 12, start: 13, sentence: 16 };
  const got = [];
  let wake = () => {};
  conn.onData((bytes) => {
    let env;
    try {
      env = codec.decode(bytes);
    } catch (e) {
      got.push({ type: -1, body: { error: String(e) } });
      return;
    }
    got.push(env);
    wake();
  });
  let stanza = 0;
  const send = (type, body) => conn.send(codec.encode({ stanzaId: ++stanza, conversationId: opts.room, type, body }));
  const until = (pred, what, ms = 60000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; got types ${got.map((e) => e.type).join(",")}`)), ms);
      const check = () => {
        if (pred()) {
          clearTimeout(timer);
          wake = () => {};
          resolve();
        }
      };
      wake = check;
      check();
    });

  if (opts.attributes) await conn.setAttributes(opts.attributes);
  // Exactly once, right after connecting, as web clients do on Connected.
  if (opts.features) await send(T.config, { features: opts.features });
  signal("connected");

  await until(() => got.some((e) => e.type === T.config && e.stanzaId < 0), "the bot's greeting");
  await send(T.user, { id: "msg_q1", conversationId: opts.room, content: opts.question });
  let reconfigured = false;
  const answered = () => got.some((e) => (e.type === T.sentence && e.body.isFinal) || e.type === T.assistant);
  await until(() => {
    if (opts.answerAsked && !reconfigured && got.some((e) => e.type === T.error && e.body.code === 202)) {
      reconfigured = true;
      send(T.config, { features: opts.answerAsked });
    }
    return answered();
  }, "the answer");

  const greeting = got.find((e) => e.type === T.config && e.stanzaId < 0);
  const steps = got.filter((e) => e.type === T.step);
  return {
    greetingFeatures: greeting.body.features || [],
    configurations: got.filter((e) => e.type === T.config).map((e) => e.body.features || []),
    errors: got.filter((e) => e.type === T.error).map((e) => ({ code: e.body.code, message: e.body.message })),
    acks: got.filter((e) => e.type === T.ack).length,
    startAnswers: got.filter((e) => e.type === T.start).length,
    sentences: got.filter((e) => e.type === T.sentence).map((e) => e.body.text),
    assistantMessages: got.filter((e) => e.type === T.assistant).length,
    finalSteps: steps.filter((e) => !e.body.partial).map((e) => e.body.content),
    partialSteps: steps.filter((e) => e.body.partial).length,
    undecodable: got.filter((e) => e.type === -1).length,
  };
}
