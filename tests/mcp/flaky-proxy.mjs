#!/usr/bin/env node
// An HTTP proxy in front of a streamable HTTP MCP server that answers some POSTs with an error
// status first, the way a busy or restarting server does:
//   node flaky-proxy.mjs UPSTREAM_URL METHOD:STATUS:COUNT...
// fails the first COUNT POSTs of JSON-RPC method METHOD (`initialize`, `tools/call`, ...) with
// STATUS (and `Retry-After: 0`), and forwards everything else. It prints {"url": ...} once it
// listens, and one line per POST to stderr: `METHOD STATUS` (the status it answered itself) or
// `METHOD forwarded`.
import http from "node:http";

const [upstream, ...plans] = process.argv.slice(2);
const failures = new Map();
for (const plan of plans) {
  const [method, status, count] = plan.split(":");
  failures.set(method, { status: Number(status), left: Number(count) });
}
const target = new URL(upstream);

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const body = Buffer.concat(chunks);
    let method = "";
    if (request.method === "POST") {
      try {
        method = JSON.parse(body.toString()).method ?? "";
      } catch {
        method = "?";
      }
      const failure = failures.get(method);
      if (failure && failure.left > 0) {
        failure.left -= 1;
        process.stderr.write(`${method} ${failure.status}\n`);
        response.writeHead(failure.status, { "content-type": "text/plain", "retry-after": "0" });
        response.end(`flaky-proxy: ${failure.status} for ${method}`);
        return;
      }
      process.stderr.write(`${method} forwarded\n`);
    }
    const forwarded = http.request(
      { host: target.hostname, port: target.port, path: request.url, method: request.method, headers: request.headers },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forwarded.on("error", (error) => {
      response.writeHead(502);
      response.end(String(error));
    });
    forwarded.end(body);
  });
});
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}${target.pathname}` }) + "\n");
});
