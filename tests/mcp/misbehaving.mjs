#!/usr/bin/env node
// An MCP server over stdio that misbehaves the way the tests need, chosen by its argument:
//   crash       answers `initialize` and `tools/list`, then exits in the middle of a call
//   silent      never answers `initialize`
//   garbage     answers `initialize`, then writes malformed JSON-RPC for every call
//   huge        answers every call with a 20 MB text result
//   hang        answers every call never
//   fail        exits at once with a message on stderr
//   children    like `hang`, and starts a child process that outlives a plain kill of this one
//   count       behaves: answers each call with "done N" and appends a line to the file
//               $WEFT_MCP_COUNT_FILE, so a test can tell how often a tool really ran
// $WEFT_MCP_TOOLS (names, comma-separated) replaces its one tool `work` with tools of those names.
// Written by hand (no SDK) so that it can break the protocol on purpose.
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const mode = process.argv[2] ?? "crash";
if (mode === "fail") {
  process.stderr.write("misbehaving: cannot open the database at /nowhere\n");
  process.exit(3);
}
if (mode === "children") {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  process.stderr.write(`misbehaving: child ${child.pid}\n`);
}

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const tools = (process.env.WEFT_MCP_TOOLS ?? "work").split(",").map((name) => ({
  name,
  description: "Does some work",
  inputSchema: { type: "object", properties: { task: { type: "string" } } },
}));

createInterface({ input: process.stdin }).on("line", (line) => {
  const request = JSON.parse(line);
  if (request.id === undefined) return;
  if (request.method === "initialize") {
    if (mode === "silent") return;
    send({ jsonrpc: "2.0", id: request.id, result: { protocolVersion: request.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "misbehaving", version: "1.0.0" } } });
  } else if (request.method === "tools/list") {
    send({ jsonrpc: "2.0", id: request.id, result: { tools } });
  } else if (request.method === "tools/call") {
    if (mode === "count") {
      const file = process.env.WEFT_MCP_COUNT_FILE;
      appendFileSync(file, JSON.stringify(request.params.arguments ?? {}) + "\n");
      const count = readFileSync(file, "utf8").trim().split("\n").length;
      send({ jsonrpc: "2.0", id: request.id, result: { content: [{ type: "text", text: `done ${count}` }] } });
    } else if (mode === "crash") {
      process.stderr.write("misbehaving: segmentation fault (pretend)\n");
      process.exit(139);
    } else if (mode === "garbage") {
      process.stdout.write("{\"jsonrpc\": \"2.0\", \"id\": " + request.id + ", \"result\": {oops\n");
      process.stdout.write("not json at all\n");
    } else if (mode === "huge") {
      send({ jsonrpc: "2.0", id: request.id, result: { content: [{ type: "text", text: "x".repeat(20 * 1000 * 1000) }] } });
    }
    // hang, children: no answer
  } else {
    send({ jsonrpc: "2.0", id: request.id, result: {} });
  }
});
