#!/usr/bin/env node
// A real MCP client (the official TypeScript SDK) for the tests of `weft mcp` and `/mcp`:
//   node client.mjs stdio PROGRAM ARG...   starts PROGRAM and talks over its stdin/stdout
//   node client.mjs http URL [TOKEN]       talks streamable HTTP, with a bearer token
// Reads the calls to make from $WEFT_MCP_CALLS (a JSON list of {name, arguments}) and prints
// one JSON document: {tools, calls: [{name, result | error, progress}], elicited, listMs}.
// With $WEFT_MCP_ELICIT (an elicitation result, {action, content?}), the client can be asked
// for input and answers that; `elicited` lists what it was asked.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, ...rest] = process.argv.slice(2);
const calls = JSON.parse(process.env.WEFT_MCP_CALLS ?? "[]");
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: rest, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target), {
        requestInit: rest[0] ? { headers: { Authorization: `Bearer ${rest[0]}` } } : {},
      });
const elicitAnswer = process.env.WEFT_MCP_ELICIT ? JSON.parse(process.env.WEFT_MCP_ELICIT) : null;
const client = new Client(
  { name: "weft-tests", version: "1.0.0" },
  elicitAnswer ? { capabilities: { elicitation: { form: {} } } } : {},
);
const elicited = [];
const late = [];
client.onerror = (error) => late.push(String(error?.message ?? error));
if (elicitAnswer) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicited.push(request.params);
    return elicitAnswer;
  });
}
try {
  await client.connect(transport);
} catch (error) {
  console.log(JSON.stringify({ connectError: String(error?.message ?? error) }));
  process.exit(0);
}
const started = performance.now();
const { tools } = await client.listTools();
const listMs = performance.now() - started;
const results = [];
for (const call of calls) {
  const progress = [];
  try {
    const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, {
      onprogress: (update) => progress.push(update),
      timeout: 60000,
    });
    results.push({ name: call.name, result, progress });
  } catch (error) {
    results.push({ name: call.name, error: String(error?.message ?? error), progress });
  }
}
console.log(JSON.stringify({ tools, calls: results, elicited, late, listMs }));
await client.close();
