// Cross-language check of the Alicia wire format with the MessagePack
// libraries web clients use. Reads the Go golden vectors on stdin and
// writes JSON to stdout:
//   encoded: each vector encoded by @msgpack/msgpack and by msgpackr the way
//            a web client would (optional fields left undefined, timestamps
//            from Date.now()), with the JSON Go must decode it to;
//   failures: every Go encoding a JS library could not read back exactly,
//            or read with a BigInt in it.
import { encode, decode } from "@msgpack/msgpack";
import { pack, unpack } from "msgpackr";

const input = JSON.parse(await new Promise((resolve) => {
  let s = "";
  process.stdin.on("data", (d) => (s += d));
  process.stdin.on("end", () => resolve(s));
}));

const clone = (x) => JSON.parse(JSON.stringify(x));
const toHex = (b) => Buffer.from(b).toString("hex");

// Byte fields travel as MessagePack bin, which JSON spells in base64.
function withBytes(env, bytesFields) {
  for (const f of bytesFields) {
    if (typeof env.body[f] === "string") env.body[f] = new Uint8Array(Buffer.from(env.body[f], "base64"));
  }
  return env;
}

function findBigInt(x, path = "") {
  if (typeof x === "bigint") return path || "(root)";
  if (x && typeof x === "object" && !(x instanceof Uint8Array)) {
    for (const [k, v] of Object.entries(x)) {
      const p = findBigInt(v, `${path}.${k}`);
      if (p) return p;
    }
  }
  return null;
}

function normalise(x) {
  if (typeof x === "bigint") return `${x}n`;
  if (x instanceof Uint8Array) return { bytes: Buffer.from(x).toString("base64") };
  if (Array.isArray(x)) return x.map(normalise);
  if (x && typeof x === "object") {
    const out = {};
    for (const k of Object.keys(x).sort()) out[k] = normalise(x[k]);
    return out;
  }
  return x;
}

const encoded = [];
const failures = [];
for (const v of input) {
  const desc = clone(v.envelope);
  delete desc.typeName;

  encoded.push({ name: v.name, lib: "@msgpack/msgpack", hex: toHex(encode(withBytes(clone(desc), v.bytesFields))), expect: desc });

  // A web client built on msgpackr: unset optional fields stay undefined
  // (msgpackr writes d4 00 00) and timestamps come from Date.now() (a float64).
  const web = withBytes(clone(desc), v.bytesFields);
  for (const f of v.optional) if (!(f in web.body)) web.body[f] = undefined;
  const now = Date.now();
  for (const f of v.timestampFields) web.body[f] = now;
  web.meta = { ...(web.meta || {}), timestamp: now };
  const expect = clone(desc);
  for (const f of v.timestampFields) expect.body[f] = now;
  expect.meta = { ...(expect.meta || {}), timestamp: now };
  encoded.push({ name: v.name, lib: "msgpackr", hex: toHex(pack(web)), expect });

  // Go's bytes, read by both libraries.
  const goBytes = Buffer.from(v.hex, "hex");
  const want = JSON.stringify(normalise(withBytes(clone(desc), v.bytesFields)));
  for (const [lib, dec] of [["@msgpack/msgpack", decode], ["msgpackr", unpack]]) {
    let got;
    try {
      got = dec(goBytes);
    } catch (e) {
      failures.push({ name: v.name, lib, error: `decode failed: ${e.message}` });
      continue;
    }
    const big = findBigInt(got);
    if (big) failures.push({ name: v.name, lib, error: `BigInt at ${big}` });
    const g = JSON.stringify(normalise(got));
    if (g !== want) failures.push({ name: v.name, lib, error: `decoded ${g}, want ${want}` });
  }
}
process.stdout.write(JSON.stringify({ encoded, failures }));
