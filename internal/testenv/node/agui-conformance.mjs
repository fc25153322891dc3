// Runs one AG-UI run against a server with the official @ag-ui/client
// 1.0.0 and reports what it saw as JSON on stdout. Input on stdin:
//   {url, input: RunAgentInput, agent: bool, headers?: {…}, client?: "0.0.58",
//    abort?: bool}
// client "0.0.58" runs only HttpAgent, from that older client; abort
// aborts the raw request once the model's first words have arrived (so
// the model is generating when the client hangs up, not yet to be asked).
// The report: HTTP status and content type, whether a CR byte appeared,
// the raw event types, every event that fails EventSchemas, the error (if
// any) of the client's own enforce -> transformChunks -> verify pipeline,
// the client's warnings, and with agent:true the messages HttpAgent built.
import { runHttpRequest, transformHttpEventStream, enforceEvents, transformChunks, verifyEvents, HttpAgent as HttpAgent10 } from "@ag-ui/client";
import { HttpAgent as HttpAgent058 } from "client058";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

const { url, input, agent, headers = {}, client = "1.0", abort = false } = JSON.parse(await new Promise((resolve) => {
  let s = "";
  process.stdin.on("data", (d) => (s += d));
  process.stdin.on("end", () => resolve(s));
}));

const warnings = [];
const warn = console.warn;
console.warn = (...args) => {
  const msg = args.map(String).join(" ");
  if (msg.startsWith("[ag-ui][")) warnings.push(msg);
  else warn(...args);
};

const report = { warnings };
const post = (signal) => fetch(url, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...headers },
  body: JSON.stringify(input),
  signal,
});

if (abort) {
  // Read until the model's first words, then hang up.
  const ctl = new AbortController();
  const res = await post(ctl.signal);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const modelWords = /"type":"(REASONING_MESSAGE|TEXT_MESSAGE)_CONTENT"/;
  let seen = "";
  while (!modelWords.test(seen)) {
    const { value, done } = await reader.read();
    if (done) break;
    const chunk = decoder.decode(value, { stream: true });
    if (seen === "") report.firstFrame = chunk;
    seen += chunk;
  }
  report.modelSpoke = modelWords.test(seen);
  ctl.abort();
  process.stdout.write(JSON.stringify(report));
  process.exit(0);
}

// The wire, byte for byte.
const res = await post();
report.status = res.status;
report.contentType = res.headers.get("content-type");
const text = await res.text();
report.crFound = text.includes("\r");
report.badFrames = text.split("\n\n").filter((f) => f !== "" && !/^data: [^\n]*$/.test(f)).length;

report.body = res.status === 200 ? null : text;
if (res.status === 200 && client === "1.0") {
  // The client's own transport, then its schema and sequencing checks.
  const raw = await lastValueFrom(transformHttpEventStream(runHttpRequest(post)).pipe(toArray()));
  report.types = raw.map((e) => e.type);
  report.schemaFailures = raw.filter((e) => !EventSchemas.safeParse(e).success).map((e) => JSON.stringify(e));
  report.runStarted = raw.find((e) => e.type === "RUN_STARTED") || null;
  report.last = raw.length ? raw[raw.length - 1] : null;
  try {
    await lastValueFrom(from(raw).pipe(enforceEvents(), transformChunks(), verifyEvents(), toArray()));
    report.verifyError = null;
  } catch (e) {
    report.verifyError = String(e && e.message ? e.message : e);
  }
}

if (agent) {
  const HttpAgent = client === "0.0.58" ? HttpAgent058 : HttpAgent10;
  const a = new HttpAgent({ url, headers, threadId: input.threadId, initialMessages: input.messages });
  let failed = null;
  let runError = null;
  try {
    await a.runAgent({ runId: input.runId + "-agent", tools: input.tools || [], context: [], forwardedProps: input.forwardedProps || {} }, {
      onRunFailed: ({ error }) => { failed = String(error && error.message ? error.message : error); },
      onRunErrorEvent: ({ event }) => { runError = event.message; },
    });
  } catch (e) {
    failed = failed || String(e && e.message ? e.message : e);
  }
  report.agentFailed = failed;
  report.agentRunError = runError;
  if (!failed && !runError) {
    // A second run carries the first run's messages, reasoning included.
    report.firstRunMessages = a.messages.length;
    a.messages.push({ id: "u-second-" + input.runId, role: "user", content: "And a second question?" });
    let failed2 = null;
    try {
      await a.runAgent({ runId: input.runId + "-second", tools: input.tools || [], context: [], forwardedProps: input.forwardedProps || {} },
        { onRunFailed: ({ error }) => { failed2 = String(error && error.message ? error.message : error); } });
    } catch (e) {
      failed2 = failed2 || String(e && e.message ? e.message : e);
    }
    report.secondRunFailed = failed2;
  }
  report.agentMessages = a.messages.map((m) => ({ id: m.id, role: m.role, content: typeof m.content === "string" ? m.content : null, encryptedValue: m.encryptedValue ?? null, toolCalls: m.toolCalls ?? null }));
}
process.stdout.write(JSON.stringify(report));
