// An Alicia client on @livekit/rtc-node (a server-side or mobile-style
// JavaScript client) with @msgpack/msgpack. Arguments: a JSON object
// {url, token, room, features, attributes, question, answerAsked}.
// Prints "connected" when its Configuration is out, then one JSON line:
// what it received.
import { Room, RoomEvent, dispose } from "@livekit/rtc-node";
import { encode, decode } from "@msgpack/msgpack";
import { converse } from "./handshake-logic.mjs";

const opts = JSON.parse(process.argv[2]);
const room = new Room();
let onData = () => {};
room.on(RoomEvent.DataReceived, (payload, participant, kind, topic) => {
  if (topic === "alicia") onData(payload);
});
await room.connect(opts.url, opts.token, { autoSubscribe: false });
const conn = {
  send: (bytes) => room.localParticipant.publishData(bytes, { reliable: true, topic: "alicia" }),
  setAttributes: (attrs) => room.localParticipant.setAttributes(attrs),
  onData: (cb) => (onData = cb),
};
let code = 0;
try {
  const result = await converse(conn, { encode, decode }, opts, (line) => console.log(line));
  console.log(JSON.stringify(result));
} catch (e) {
  console.error(String(e));
  code = 1;
}
await room.disconnect();
await dispose();
process.exit(code);
