// Stock LiveKit clients on @livekit/rtc-node reading Alicia's reasoning
// as text streams, as a React Native app on the same JavaScript SDK does.
// Argument: a JSON object {url, users: [{identity, token, ask?}],
// question}. Each user joins with its attributes in its token, waits for
// the bot's greeting (the bot knows it then), and reads the topics
// alicia.reasoning and lk.transcription. The user with ask types the
// question on lk.chat once everyone is greeted. Everyone stops at the end
// of the answer's spoken transcript: the bot sent each step's stream
// before it, in order. Prints one JSON object: per identity, the
// reasoning streams it read, in the order they opened.
import { Room, RoomEvent, dispose } from "@livekit/rtc-node";

const opts = JSON.parse(process.argv[2]);

async function join(user) {
  const room = new Room();
  const got = { streams: [], answer: "" };
  let greeted, answered;
  const greeting = new Promise((resolve) => (greeted = resolve));
  const answer = new Promise((resolve) => (answered = resolve));
  room.on(RoomEvent.DataReceived, (_payload, _participant, _kind, topic) => {
    if (topic === "alicia") greeted();
  });
  room.registerTextStreamHandler("alicia.reasoning", async (reader, from) => {
    const s = { from: from.identity, attributes: { ...reader.info.attributes }, text: "" };
    got.streams.push(s);
    for await (const chunk of reader) s.text += chunk;
    s.closed = true;
  });
  room.registerTextStreamHandler("lk.transcription", async (reader) => {
    const segment = reader.info.attributes?.["lk.segment_id"] ?? "";
    let text = "";
    for await (const chunk of reader) text += chunk;
    if (segment.startsWith("SG_answer_") && text !== "") {
      got.answer = text;
      answered();
    }
  });
  await room.connect(opts.url, user.token, { autoSubscribe: false });
  return { user, room, got, greeting, answer };
}

const within = (p, ms, what) =>
  Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(what)), ms))]);

let code = 0;
const clients = [];
try {
  for (const u of opts.users) clients.push(await join(u));
  for (const c of clients) await within(c.greeting, 30000, `${c.user.identity}: no greeting`);
  const asker = clients.find((c) => c.user.ask);
  await asker.room.localParticipant.sendText(opts.question, { topic: "lk.chat" });
  for (const c of clients) await within(c.answer, 60000, `${c.user.identity}: no spoken answer`);
  const out = {};
  for (const c of clients) out[c.user.identity] = c.got;
  console.log(JSON.stringify(out));
} catch (e) {
  console.error(String(e));
  code = 1;
}
for (const c of clients) await c.room.disconnect();
await dispose();
process.exit(code);
