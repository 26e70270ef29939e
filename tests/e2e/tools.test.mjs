// End-to-end tests of MCP tools in the real app: servers for every flow in Settings (with a
// variable read as ${NAME}), the flow's own servers with Test connection, the agent's tool
// picker, tool calls in the log and the node's visits, a tool breakpoint with replaced
// arguments, and tool approvals decided in the side panel and in the inbox. The servers are
// real: the filesystem server from npm and the tests' own counting server (tests/mcp).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import {
  APP,
  ROOT,
  TMP,
  allByTestId,
  byTestId,
  inboxItem,
  node,
  openApp,
  openFile,
  promptReady,
  shot,
  standsStill,
  typeInto,
  waitForRunStatus,
} from "./harness.mjs";

const flowFile = path.join(TMP, "tools.json");
const countFile = path.join(TMP, "tool-calls.txt");
const filesystemServer = path.join(ROOT, "tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
const countingServer = path.join(ROOT, "tests/mcp/misbehaving.mjs");
const NOTE = "The meeting moved to Thursday at ten.";
const OTHER = "The other note: bring the projector.";

let browser;

before(async () => {
  assert.ok(existsSync(filesystemServer), `${filesystemServer} is missing: run scripts/setup-mcp.sh`);
  copyFileSync(path.join(ROOT, "tests/e2e/flows/tools.json"), flowFile);
  writeFileSync(path.join(TMP, "note.txt"), NOTE);
  writeFileSync(path.join(TMP, "other.txt"), OTHER);
  browser = await openApp();
});

after(async () => {
  await browser?.deleteSession();
});

/** Clicks a node on the canvas and shows it in the inspector. */
async function selectNode(nodeId) {
  await standsStill(browser, `node-${nodeId}`);
  await node(browser, nodeId).click();
  await byTestId(browser, "tab-inspector").click();
}

/** The inspector's flow panel: nothing selected. */
async function showFlowPanel() {
  // Near the pane's corner: its middle is where the flow's nodes are.
  const pane = browser.$(".react-flow__pane");
  const { width, height } = await pane.getSize();
  await pane.click({ x: Math.round(-width / 2 + 12), y: Math.round(-height / 2 + 12) });
  await byTestId(browser, "tab-inspector").click();
  await byTestId(browser, "flow-mcp").waitForDisplayed();
}

/** Each listed server under `testId`, as {name, ok, tools, error}. */
async function listedServers(testId) {
  const list = byTestId(browser, testId);
  await list.waitForDisplayed({ timeout: 20_000 });
  const servers = [];
  for (const entry of await list.$$('[data-testid="mcp-server"]')) {
    const tools = [];
    for (const tool of await entry.$$('[data-testid="mcp-tool"] code')) tools.push(await tool.getText());
    const error = await entry.$('[data-testid="mcp-server-error"]');
    servers.push({
      name: await entry.getAttribute("data-server"),
      ok: (await entry.getAttribute("data-ok")) === "true",
      text: await entry.getText(),
      tools,
      error: (await error.isExisting()) ? await error.getText() : null,
    });
  }
  return servers;
}

/** The checkbox of `entry` in the picker of field `field` (`tools.mcp`, `approveTools`). */
function pick(field, entry) {
  return byTestId(browser, `field-${field}`).$(`[data-testid="mcp-pick"][data-entry="${entry}"]`);
}

/** The run's log rows of `type`, as {summary, node}. */
async function logRows(type) {
  const rows = [];
  for (const row of await browser.$$(`[data-testid="log-row"][data-type="${type}"]`)) {
    rows.push((await row.$(".log-content").getProperty("textContent")).trim());
  }
  return rows;
}

/** The text the output node `result` gave, from its inspector. */
async function resultText() {
  await selectNode("result");
  const output = byTestId(browser, "node-output");
  await output.waitForDisplayed();
  return (await output.getText()).trim();
}

function countedCalls() {
  return existsSync(countFile) ? readFileSync(countFile, "utf8").trim().split("\n").filter(Boolean).map((line) => JSON.parse(line)) : [];
}

test("Settings: MCP servers for every flow, checked when saved; a variable set there is read as ${NAME}", async () => {
  await byTestId(browser, "tab-settings").click();
  const servers = byTestId(browser, "settings-mcp-servers");
  await servers.waitForDisplayed();
  // A definition with both a command and a URL is refused, naming it.
  await typeInto(browser, servers, '{"broken": {"command": "node", "url": "http://127.0.0.1:9/mcp"}}');
  await byTestId(browser, "settings-save-mcp").click();
  await byTestId(browser, "settings-mcp-error").waitForDisplayed();
  assert.match(await byTestId(browser, "settings-mcp-error").getText(), /settings\.mcpServers\.broken/);

  const counter = {
    counter: {
      command: "node",
      args: [countingServer, "count"],
      env: { WEFT_MCP_COUNT_FILE: "${COUNT_FILE}" },
    },
  };
  await typeInto(browser, servers, JSON.stringify(counter));
  await byTestId(browser, "settings-save-mcp").click();
  await browser.waitUntil(async () => !(await byTestId(browser, "settings-mcp-error").isExisting()), {
    timeout: 5_000,
    timeoutMsg: "a valid server list was refused",
  });

  // Before the variable is set, the server cannot start, and Test connection says why.
  await byTestId(browser, "settings-test-mcp").click();
  let listed = await listedServers("settings-mcp-tools");
  assert.equal(listed.length, 1);
  assert.equal(listed[0].ok, false);
  assert.match(listed[0].error, /COUNT_FILE/);

  await typeInto(browser, byTestId(browser, "settings-variable-name"), "COUNT_FILE");
  await typeInto(browser, byTestId(browser, "settings-variable-value"), countFile);
  await byTestId(browser, "settings-save-variable").click();
  await browser.$('[data-testid="settings-variable"][data-name="COUNT_FILE"]').waitForDisplayed({ timeout: 5_000 });
  // The value is never shown back.
  assert.ok(!(await byTestId(browser, "settings-variables").getText()).includes(countFile));
  await byTestId(browser, "settings-test-mcp").click();
  await browser.waitUntil(async () => (await listedServers("settings-mcp-tools"))[0]?.ok === true, {
    timeout: 20_000,
    timeoutMsg: "the server did not start once COUNT_FILE was set",
  });
  listed = await listedServers("settings-mcp-tools");
  assert.deepEqual(listed[0].tools, ["work"]);
  await shot(browser, "40-settings-mcp");
});

test("the flow's MCP servers: Test connection lists them with Settings' ones; the tool picker; a run's tool calls in the log and the visit", async () => {
  await openFile(browser, flowFile);
  await node(browser, "reader").waitForExist();
  await showFlowPanel();
  const files = { files: { command: "node", args: [filesystemServer, "."] } };
  await typeInto(browser, byTestId(browser, "flow-mcp-servers"), JSON.stringify(files));
  await byTestId(browser, "flow-mcp-test").click();
  await browser.waitUntil(async () => (await listedServers("flow-mcp-tools")).length === 2, {
    timeout: 20_000,
    timeoutMsg: "Test connection did not list both servers",
  });
  const listed = await listedServers("flow-mcp-tools");
  const byName = Object.fromEntries(listed.map((server) => [server.name, server]));
  assert.ok(byName.files.ok, byName.files.error ?? "");
  assert.ok(byName.files.tools.includes("read_text_file"), byName.files.tools.join(", "));
  assert.match(byName.counter.text, /from Settings/);
  await shot(browser, "41-flow-mcp-servers");

  // The picker offers what the servers listed.
  await selectNode("reader");
  const readFile = pick("tools.mcp", "files/read_text_file");
  await readFile.waitForDisplayed({ timeout: 10_000 });
  await readFile.click();
  assert.equal(await readFile.isSelected(), true);
  await shot(browser, "42-tool-picker");

  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "completed", 30_000);
  assert.equal(await resultText(), `Tool said: ${NOTE}`);
  const calls = await logRows("tool_call");
  assert.deepEqual(calls, ['files/read_text_file {"path":"note.txt"}']);
  const results = await logRows("tool_result");
  assert.equal(results.length, 1);
  assert.match(results[0], /^files\/read_text_file \(\d+ ms\) → The meeting moved/);
  // The agent's visit lists its tool call.
  await selectNode("reader");
  const visitCalls = byTestId(browser, "visit-tool-calls");
  await visitCalls.waitForDisplayed({ timeout: 10_000 });
  assert.match(await visitCalls.getText(), /files\/read_text_file/);
  await shot(browser, "43-tool-calls-in-log");
});

test("stop before tool calls: the run stops with the arguments, and replaced arguments are what the tool gets", async () => {
  await selectNode("reader");
  await byTestId(browser, "breakpoint-when").selectByAttribute("value", "tool");
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "paused", 30_000);
  await promptReady(browser, "breakpoint-prompt", 10_000);
  const message = await byTestId(browser, "breakpoint-message").getText();
  assert.match(message, /read_text_file/);
  assert.match(message, /note\.txt/);
  await shot(browser, "44-tool-breakpoint");
  await typeInto(browser, byTestId(browser, "breakpoint-value"), '{"path": "other.txt"}');
  await byTestId(browser, "breakpoint-continue").click();
  await waitForRunStatus(browser, "completed", 30_000);
  assert.equal(await resultText(), `Tool said: ${OTHER}`);
  await selectNode("reader");
  await byTestId(browser, "breakpoint-when").selectByAttribute("value", "none");
});

test("a tool that needs approval pauses the run: the side panel approves it with edited arguments, the inbox rejects the next", async () => {
  // The run's input, typed where a person types it.
  await typeInto(browser, byTestId(browser, "run-input"), "TOOLS-E2E work on it");
  await selectNode("reader");
  await pick("tools.mcp", "counter").waitForDisplayed({ timeout: 10_000 });
  await pick("tools.mcp", "counter").click();
  await pick("approveTools", "counter/*").click();
  assert.equal(await pick("approveTools", "counter/*").isSelected(), true);

  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "paused", 30_000);
  const card = byTestId(browser, "paused-card");
  await card.waitForDisplayed({ timeout: 10_000 });
  // The model's arguments are in the question; a field left empty keeps the model's value.
  assert.match(await card.getText(), /Allow `counter\/work` with \{"task":"ship"\}\?/);
  const task = byTestId(browser, "panel-approval-field-task");
  await task.waitForDisplayed({ timeout: 10_000 });
  assert.equal(await task.getValue(), "");
  await typeInto(browser, task, "ship it");
  await shot(browser, "45-tool-approval");
  assert.deepEqual(countedCalls(), [], "the tool ran before it was approved");
  await byTestId(browser, "panel-approve").click();
  await waitForRunStatus(browser, "completed", 30_000);
  assert.deepEqual(countedCalls(), [{ task: "ship it" }]);
  assert.equal(await resultText(), "Tool said: done 1");

  // The next run waits in the inbox too; rejected there, the model hears so and the tool never runs.
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "paused", 30_000);
  const runId = await byTestId(browser, "log").getAttribute("data-run-id");
  await byTestId(browser, "tab-inbox").click();
  let item;
  await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, {
    timeout: 10_000,
    timeoutMsg: "the paused tool call is not in the inbox",
  });
  assert.match(await item.getText(), /counter\/work/);
  await shot(browser, "46-tool-approval-inbox");
  await item.$('[data-testid="inbox-reject"]').click();
  await waitForRunStatus(browser, "completed", 30_000);
  assert.equal(countedCalls().length, 1, "a rejected tool call ran");
  assert.match(await resultText(), /^Tool said: .*refused/);

  // What was stored names the variable, never its value.
  const weft = path.join(path.dirname(APP), "weft");
  const stored = execFileSync(weft, ["show", runId, "--db", process.env.WEFT_DB, "--json"]).toString();
  assert.ok(!stored.includes(countFile), "the variable's value reached the run store");
  assert.ok(stored.includes("${COUNT_FILE}"), "the run keeps the servers it used, with their ${NAME}s");
});
