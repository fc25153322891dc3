// Runs one AG-UI run against a server with the official @ag-ui/client
// 1.0.0 and reports what it saw as JSON on stdout. Input on stdin:
//   {url, input: RunAgentInput, agent: bool}
// The report: HTTP status and content type, whether a CR byte appeared,
// the raw event types, every event that fails EventSchemas, the error (if
// any) of the client's own enforce -> transformChunks -> verify pipeline,
// the client's warnings, and with agent:true the messages HttpAgent built.
import { runHttpRequest, transformHttpEventStream, enforceEvents, transformChunks, verifyEvents, HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

const { url, input, agent } = JSON.parse(await new Promise((resolve) => {
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
const post = () => fetch(url, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
  body: JSON.stringify(input),
});

// The wire, byte for byte.
const res = await post();
report.status = res.status;
report.contentType = res.headers.get("content-type");
const text = await res.text();
report.crFound = text.includes("\r");
report.badFrames = text.split("\n\n").filter((f) => f !== "" && !/^data: [^\n]*$/.test(f)).length;

if (res.status === 200) {
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
  const a = new HttpAgent({ url, threadId: input.threadId, initialMessages: input.messages });
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
  report.agentMessages = a.messages.map((m) => ({ id: m.id, role: m.role, content: typeof m.content === "string" ? m.content : null, encryptedValue: m.encryptedValue ?? null, toolCalls: m.toolCalls ?? null }));
}
process.stdout.write(JSON.stringify(report));
