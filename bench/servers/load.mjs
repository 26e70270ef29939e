// One load measurement against one server: CLIENTS clients send REQUESTS requests in all, each
// client one request at a time (a request is one run: its answer is the completed run), and
// every answer is checked. Prints one JSON line: completed, failed (with the first few reasons),
// each request's milliseconds, and the wall time.
//
//   node load.mjs '{"url": ..., "headers": {...}, "body": "... {{id}} ...", "expect": "... {{id}} ...",
//                   "clients": 16, "requests": 320, "timeoutMs": 60000}'
//
// `{{id}}` in the body and in `expect` is replaced by a number unique to the request, so an
// answer counts only when it carries the LLM's reply to that very request's input.

import http from "node:http";

const spec = JSON.parse(process.argv[2]);
const url = new URL(spec.url);
// A connection per client, kept alive between its requests, as a pool of callers would.
const agent = new http.Agent({ keepAlive: true, maxSockets: spec.clients });

function once(id) {
  const body = spec.body.replaceAll("{{id}}", String(id));
  const expect = spec.expect.replaceAll("{{id}}", String(id));
  const started = performance.now();
  return new Promise((resolve) => {
    const request = http.request(
      url,
      {
        method: "POST",
        agent,
        headers: { ...spec.headers, "content-length": Buffer.byteLength(body) },
        timeout: spec.timeoutMs,
      },
      (response) => {
        const chunks = [];
        response.on("data", (chunk) => chunks.push(chunk));
        response.on("end", () => {
          const ms = performance.now() - started;
          const text = Buffer.concat(chunks).toString("utf8");
          if (response.statusCode !== 200) {
            resolve({ ok: false, ms, why: `HTTP ${response.statusCode}: ${text.slice(0, 200)}` });
          } else if (!text.includes(expect)) {
            resolve({ ok: false, ms, why: `no "${expect}" in the answer: ${text.slice(0, 200)}` });
          } else {
            resolve({ ok: true, ms });
          }
        });
        response.on("error", (error) => resolve({ ok: false, ms: performance.now() - started, why: String(error) }));
      },
    );
    request.on("timeout", () => request.destroy(new Error(`no answer within ${spec.timeoutMs} ms`)));
    request.on("error", (error) => resolve({ ok: false, ms: performance.now() - started, why: String(error) }));
    request.end(body);
  });
}

let next = 0;
const results = [];
async function client() {
  while (next < spec.requests) {
    const id = (spec.firstId ?? 0) + next++;
    results.push(await once(id));
  }
}

const wallStarted = performance.now();
await Promise.all(Array.from({ length: spec.clients }, client));
const wallMs = performance.now() - wallStarted;
agent.destroy();
const failures = results.filter((result) => !result.ok);
console.log(
  JSON.stringify({
    completed: results.length - failures.length,
    failed: failures.length,
    reasons: [...new Set(failures.map((failure) => failure.why))].slice(0, 3),
    latenciesMs: results.filter((result) => result.ok).map((result) => result.ms),
    wallMs,
  }),
);
