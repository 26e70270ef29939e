// End-to-end tests of the real Weft app: a person builds, runs, approves, saves and reopens
// flows on the canvas, against the scripted LLM server on loopback. Run with run.sh.
// Screenshots of the key moments are written to $WEFT_E2E_SCREENSHOTS (run.sh: the build's
// target folder).

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import {
  APP,
  ROOT,
  TMP,
  allByTestId,
  byTestId,
  canvasZoom,
  connect,
  drag,
  dropFiles,
  dropKind,
  handle,
  inboxItem,
  node,
  openApp,
  openFile,
  problems,
  promptReady,
  shot,
  standsStill,
  typeInto,
  waitForEdges,
  waitForRunStatus,
  waitForStatus,
  waitUntilGone,
} from "./harness.mjs";

const STREAMED = "Cold water wakes up and runs past the old stones toward the sea at last";
const builtFile = path.join(TMP, "built.json");
const approvalFile = path.join(TMP, "approval.json");

/** Clicks a node on the canvas (selecting it and showing it in the inspector). */
async function selectNode(browser, nodeId) {
  await standsStill(browser, `node-${nodeId}`);
  await node(browser, nodeId).click();
  await byTestId(browser, "tab-inspector").click();
}

async function errorCodes(browser) {
  await byTestId(browser, "tab-problems").click();
  return (await problems(browser)).filter((p) => p.severity === "error").map((p) => p.code);
}

/** Waits until the validator's answer for the current flow lists (or no longer lists) `code`. */
async function waitForProblem(browser, code, present) {
  await browser.waitUntil(async () => (await errorCodes(browser)).includes(code) === present, {
    timeout: 10_000,
    timeoutMsg: `problem ${code} ${present ? "never appeared" : "never went away"}`,
  });
}

/** Waits until process `pid` has ended. */
async function waitForExit(pid, timeout = 10_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) throw new Error(`process ${pid} did not end`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Text of the inspector's "Latest output" of a node. */
async function latestOutput(browser, nodeId) {
  await selectNode(browser, nodeId);
  const output = byTestId(browser, "node-output");
  await output.waitForDisplayed();
  return (await output.getText()).trim();
}

let browser;

before(async () => {
  copyFileSync(path.join(ROOT, "tests/e2e/flows/approval.json"), approvalFile);
  browser = await openApp();
});

after(async () => {
  await browser?.deleteSession();
});

test("a new window: the empty MCP servers box holds its whole example and does not scroll", async () => {
  // A box that scrolls, even for its placeholder, shows a scrollbar that WebKit goes on
  // redrawing for seconds: without a GPU that took most of the CPU of the app's first seconds.
  await byTestId(browser, "flow-mcp-servers").waitForDisplayed();
  const box = JSON.parse(
    await browser.execute(() => {
      const element = document.querySelector('[data-testid="flow-mcp-servers"]');
      return JSON.stringify({
        value: element.value,
        placeholder: element.placeholder,
        scrollHeight: element.scrollHeight,
        clientHeight: element.clientHeight,
        overflow: getComputedStyle(element).overflowY,
      });
    }),
  );
  assert.equal(box.value, "", "a new flow has no MCP servers");
  assert.match(box.placeholder, /server-filesystem/, "the box shows an example");
  assert.ok(box.scrollHeight <= box.clientHeight, `the example needs ${box.scrollHeight} px, the box has ${box.clientHeight}`);
  assert.equal(box.overflow, "hidden", "the empty box cannot scroll");
});

test("builds a flow by drag-and-drop and wiring, shows a problem and its fix", async () => {
  await byTestId(browser, "file-new").click();
  await waitForProblem(browser, "start-unconnected", true);
  const run = byTestId(browser, "run");
  assert.equal(await run.isEnabled(), false, "Run is refused while the flow is invalid");
  // textContent: WebKitWebDriver reads no text from an element cut with text-overflow.
  const reason = await byTestId(browser, "run-blocked-reason").getProperty("textContent");
  assert.match(reason, /start/i, "the reason names the problem");
  await shot(browser, "01-new-flow-invalid");

  const start = await node(browser, "start").getLocation();
  await dropKind(browser, "agent", Math.round(start.x + 250), Math.round(start.y + 40));
  await node(browser, "agent-1").waitForExist({ timeout: 5_000 });
  await dropKind(browser, "output", Math.round(start.x + 500), Math.round(start.y + 40));
  await node(browser, "output-1").waitForExist({ timeout: 5_000 });

  await connect(browser, "start", "output", "agent-1");
  await connect(browser, "agent-1", "output", "output-1");
  await waitForEdges(browser, 2, "the two connections");
  await waitForProblem(browser, "start-unconnected", false);

  // A broken template is a problem on the agent node; fixing it clears it.
  await selectNode(browser, "agent-1");
  await typeInto(browser, byTestId(browser, "field-model"), "gpt-4o-mini");
  await typeInto(browser, byTestId(browser, "field-userPrompt"), "A poem about a river: {{ PREVIOUS_OUTPUT");
  await waitForProblem(browser, "template-syntax", true);
  assert.equal(await node(browser, "agent-1").getAttribute("data-invalid"), "true");
  assert.equal(await byTestId(browser, "run").isEnabled(), false);
  await shot(browser, "02-template-problem");

  await selectNode(browser, "agent-1");
  await typeInto(browser, byTestId(browser, "field-userPrompt"), "A poem about a river: {{ PREVIOUS_OUTPUT }}");
  await waitForProblem(browser, "template-syntax", false);
  assert.deepEqual(await errorCodes(browser), []);
  assert.notEqual(await node(browser, "agent-1").getAttribute("data-invalid"), "true");
  await browser.waitUntil(() => byTestId(browser, "run").isEnabled(), { timeout: 5_000 });
  await shot(browser, "03-flow-valid");
});

test("runs it: statuses and streamed tokens arrive live", async () => {
  await typeInto(browser, byTestId(browser, "run-input"), "in spring");
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "agent-1", "running");
  const stream = byTestId(browser, "node-stream-agent-1");
  // The scripted server sends one word every 150 ms: part of the answer shows first.
  let partial = "";
  await browser.waitUntil(
    async () => {
      const text = (await stream.getText()).trim();
      if (text.length > 0 && text !== STREAMED) partial = text;
      return partial !== "";
    },
    { timeout: 10_000, interval: 50, timeoutMsg: "no partial answer was seen" },
  );
  assert.ok(STREAMED.startsWith(partial), `"${partial}" is the start of the answer`);
  await shot(browser, "04-streaming");

  await waitForRunStatus(browser, "completed");
  assert.equal((await stream.getText()).trim(), STREAMED);
  await waitForStatus(browser, "start", "done");
  await waitForStatus(browser, "agent-1", "done");
  await waitForStatus(browser, "output-1", "done");
  assert.equal(await latestOutput(browser, "output-1"), STREAMED);

  const types = [];
  for (const row of await allByTestId(browser, "log-row")) {
    types.push(await row.getAttribute("data-type"));
  }
  for (const type of ["run_start", "step_start", "llm_delta", "step_end", "run_end"]) {
    assert.ok(types.includes(type), `the log shows ${type} (it shows ${[...new Set(types)]})`);
  }
  // The log has room, and follow mode keeps the newest row inside it.
  const [log, newest] = await browser.execute(() => {
    const rows = document.querySelectorAll('[data-testid="log-row"]');
    const box = (element) => element.getBoundingClientRect().toJSON();
    return [box(document.querySelector(".log-rows")), box(rows[rows.length - 1])];
  });
  assert.ok(log.height >= 100, `the log's rows get room (${log.height} px)`);
  assert.ok(newest.top >= log.top && newest.bottom <= log.bottom + 1, "the newest row is in sight");
  await shot(browser, "05-run-completed");
});

test("saves the flow and reopens it with the same content", async () => {
  await byTestId(browser, "file-save").click(); // Untitled: Save asks where.
  const input = byTestId(browser, "path-input");
  await input.waitForDisplayed();
  await typeInto(browser, input, builtFile);
  await byTestId(browser, "path-confirm").click();
  const title = byTestId(browser, "title");
  await browser.waitUntil(async () => (await title.getAttribute("data-dirty")) === "false", {
    timeout: 5_000,
  });
  assert.match(await title.getText(), /built\.json/);

  const saved = readFileSync(builtFile, "utf8");
  const flow = JSON.parse(saved);
  assert.deepEqual(flow.nodes.map((n) => [n.id, n.type]).sort(), [
    ["agent-1", "agent"],
    ["output-1", "output"],
    ["start", "start"],
  ]);
  assert.deepEqual(
    flow.edges.map((e) => [e.source, e.sourceHandle ?? "output", e.target]).sort(),
    [
      ["agent-1", "output", "output-1"],
      ["start", "output", "agent-1"],
    ],
  );
  const agent = flow.nodes.find((n) => n.id === "agent-1");
  assert.equal(agent.data.userPrompt, "A poem about a river: {{ PREVIOUS_OUTPUT }}");
  assert.equal(agent.data.model, "gpt-4o-mini");
  for (const n of flow.nodes) {
    assert.ok(Number.isInteger(n.position.x) && Number.isInteger(n.position.y), "integer positions");
  }

  // An edit marks the flow dirty; opening the file again asks before discarding it.
  await selectNode(browser, "agent-1");
  await typeInto(browser, byTestId(browser, "field-label"), "Changed");
  await browser.waitUntil(async () => (await title.getAttribute("data-dirty")) === "true", {
    timeout: 5_000,
  });
  await byTestId(browser, "file-open").click();
  await byTestId(browser, "confirm-discard").waitForDisplayed();
  await shot(browser, "06-confirm-discard");
  await byTestId(browser, "discard-confirm").click();
  const pathInput = byTestId(browser, "path-input");
  await pathInput.waitForDisplayed();
  await typeInto(browser, pathInput, builtFile);
  await byTestId(browser, "path-confirm").click();
  await browser.waitUntil(async () => (await title.getAttribute("data-dirty")) === "false", {
    timeout: 5_000,
  });
  await node(browser, "agent-1").waitForExist();
  await selectNode(browser, "agent-1");
  assert.equal(await byTestId(browser, "field-label").getValue(), "Agent");

  // Saving the reopened flow unchanged writes the same bytes.
  await browser.keys(["Control", "s"]);
  await browser.pause(500);
  assert.equal(readFileSync(builtFile, "utf8"), saved);

  // So does saving an example flow, written by hand in canonical form (`weft fmt --check`).
  const example = path.join(TMP, "example-triage.json");
  copyFileSync(path.join(ROOT, "flows/triage.json"), example);
  const original = readFileSync(example, "utf8");
  await openFile(browser, example);
  await node(browser, "review").waitForExist();
  await browser.keys(["Control", "s"]);
  await browser.pause(500);
  assert.equal(readFileSync(example, "utf8"), original, "saving an unchanged flow changes no byte");
  // The next tests go on with the built flow.
  await openFile(browser, builtFile);
  await node(browser, "agent-1").waitForExist();
});

test("keyboard: Delete removes the selected node with its edges, Ctrl+Z brings them back", async () => {
  await node(browser, "agent-1").click();
  await browser.keys(["Delete"]);
  await waitUntilGone(browser, "node-agent-1");
  await waitForEdges(browser, 0, "its two edges went with it");
  assert.equal(await byTestId(browser, "title").getAttribute("data-dirty"), "true");
  await browser.keys(["Control", "z"]);
  await node(browser, "agent-1").waitForExist({ timeout: 5_000 });
  await waitForEdges(browser, 2, "Ctrl+Z brought its two edges back");
  // Undone back to the saved flow: nothing to save.
  assert.equal(await byTestId(browser, "title").getAttribute("data-dirty"), "false");

  // Copy and paste: a second agent with a new id and the same fields.
  await node(browser, "agent-1").click();
  await browser.keys(["Control", "c"]);
  await browser.keys(["Control", "v"]);
  await node(browser, "agent-2").waitForExist({ timeout: 5_000 });
  await selectNode(browser, "agent-2");
  assert.equal(
    await byTestId(browser, "field-userPrompt").getValue(),
    "A poem about a river: {{ PREVIOUS_OUTPUT }}",
  );
  await node(browser, "agent-2").click();
  await browser.keys(["Delete"]);
  await waitUntilGone(browser, "node-agent-2");

  // `?` lists the shortcuts.
  await browser.$(".react-flow__pane").click();
  await browser.keys(["?"]);
  const help = byTestId(browser, "help");
  await help.waitForDisplayed({ timeout: 5_000 });
  const shortcuts = await help.getText();
  for (const expected of ["Undo", "Redo", "Copy", "Paste", "Delete", "Fit the flow"]) {
    assert.match(shortcuts, new RegExp(expected, "i"), `the help lists ${expected}`);
  }
  await shot(browser, "06b-shortcuts");
  await browser.keys(["Escape"]);
  await waitUntilGone(browser, "help");
});

test("opens an AgentFlow file with legacy forms and saves it normalized", async () => {
  const legacy = path.join(TMP, "legacy.json");
  const saved = path.join(TMP, "legacy-saved.json");
  copyFileSync(path.join(ROOT, "tests/fixtures/valid/agentflow_legacy.json"), legacy);
  await openFile(browser, legacy);
  await node(browser, "ask").waitForExist();
  assert.equal(await node(browser, "ask").getAttribute("data-kind"), "approval", "type input is an approval");
  assert.ok(await handle(browser, "check", "condition-0").isExisting(), "if.condition became a condition row");
  await waitForEdges(browser, 4, "connections became edges");
  await shot(browser, "07-legacy-file");

  await byTestId(browser, "file-save-as").click();
  const input = byTestId(browser, "path-input");
  await input.waitForDisplayed();
  await typeInto(browser, input, saved);
  await byTestId(browser, "path-confirm").click();
  await browser.waitUntil(async () => existsSync(saved), { timeout: 5_000 });
  const flow = JSON.parse(readFileSync(saved, "utf8"));
  assert.equal(flow.connections, undefined);
  assert.equal(flow.edges.length, 4);
  assert.equal(flow.nodes.find((n) => n.id === "ask").type, "approval");
  assert.deepEqual(flow.nodes.find((n) => n.id === "yes").position, { x: 600, y: -60 });
  assert.ok(flow.edges.some((e) => e.source === "check" && e.sourceHandle === "condition-0"));
});

test("a flow file dropped on the window opens; another kind of file is refused, saying why", async () => {
  const dropped = path.join(TMP, "dropped.json");
  copyFileSync(path.join(ROOT, "tests/fixtures/valid/agentflow_legacy.json"), dropped);
  const notes = path.join(TMP, "notes.txt");
  writeFileSync(notes, "not a flow");
  const shownFile = () => browser.execute(() => document.querySelector('[data-testid="title"]')?.textContent ?? "");
  // The flow shown was just saved, so nothing is asked before another one opens.
  await dropFiles([notes]);
  await byTestId(browser, "error-banner").waitForDisplayed({ timeout: 5_000 });
  assert.match(await byTestId(browser, "error-banner").getText(), /Drop a flow file \(\.json\) to open it/);
  assert.match(await shownFile(), /legacy-saved\.json/, "the flow shown stays");
  await byTestId(browser, "error-dismiss").click();
  await dropFiles([dropped]);
  await browser.waitUntil(async () => (await shownFile()).includes("dropped.json"), {
    timeout: 5_000,
    timeoutMsg: "the dropped flow file was not opened",
  });
  await node(browser, "ask").waitForExist();
  await waitForEdges(browser, 4, "the dropped flow's edges are drawn");
});

test("settings: a key saved in the app stays private, and test connection reaches the provider", async () => {
  await byTestId(browser, "tab-settings").click();
  await byTestId(browser, "test-connection-openai").click();
  const openai = byTestId(browser, "connection-result-openai");
  await browser.waitUntil(async () => /connected/i.test(await openai.getText()), {
    timeout: 10_000,
    timeoutMsg: "test connection for openai did not succeed",
  });
  assert.match(await openai.getText(), /scripted/);

  // Anthropic has no key yet: the check says which setting is missing.
  await byTestId(browser, "test-connection-anthropic").click();
  const anthropic = byTestId(browser, "connection-result-anthropic");
  await browser.waitUntil(async () => /ANTHROPIC_API_KEY/.test(await anthropic.getText()), {
    timeout: 10_000,
    timeoutMsg: "the missing key was not named",
  });

  const secret = "sk-ant-e2e-secret-4711";
  await typeInto(browser, byTestId(browser, "settings-key-anthropic"), secret);
  await typeInto(browser, byTestId(browser, "settings-address-anthropic"), process.env.WEFT_E2E_LLM_ROOT);
  await byTestId(browser, "settings-save-anthropic").click();
  await byTestId(browser, "test-connection-anthropic").click();
  await browser.waitUntil(async () => /connected/i.test(await anthropic.getText()), {
    timeout: 10_000,
    timeoutMsg: "test connection for anthropic did not succeed after saving its key",
  });
  await shot(browser, "08-settings");

  const file = path.join(TMP, "config", "settings.json");
  assert.equal(statSync(file).mode & 0o777, 0o600, "the settings file is readable by its owner only");
  assert.match(readFileSync(file, "utf8"), /ANTHROPIC_API_KEY/);
  assert.equal(await byTestId(browser, "settings-key-anthropic").getValue(), "", "the key is not shown again");
  for (const flowFile of [builtFile, approvalFile]) {
    assert.ok(!readFileSync(flowFile, "utf8").includes(secret), "no key in flow files");
  }
});

test("pauses at an approval node; approving continues on the approve branch", async () => {
  await openFile(browser, approvalFile);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "review", "paused");
  await waitForRunStatus(browser, "paused");
  await promptReady(browser, "approval-prompt");
  assert.equal(
    (await byTestId(browser, "approval-message").getText()).trim(),
    "Send this note? Note: Refund 40 EUR to Ada",
  );
  await shot(browser, "09-approval-prompt");

  await typeInto(browser, byTestId(browser, "approval-note"), "looks good");
  await byTestId(browser, "approve").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "review", "done");
  await waitForStatus(browser, "sent", "done");
  await waitForStatus(browser, "dropped", "skipped");
  assert.equal(await latestOutput(browser, "sent"), "Sent: Note: Refund 40 EUR to Ada");
  // Its input is what the approval passed on: the writer's note.
  assert.equal((await byTestId(browser, "node-input").getText()).trim(), "Note: Refund 40 EUR to Ada");
  await shot(browser, "10-approved");
});

test("rejecting on another run continues on the reject branch", async () => {
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "review", "paused");
  // The prompt is drawn once the run has paused (the node's status can arrive first).
  await waitForRunStatus(browser, "paused");
  await promptReady(browser, "approval-prompt");
  await typeInto(browser, byTestId(browser, "approval-note"), "wrong amount");
  await byTestId(browser, "reject").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "dropped", "done");
  await waitForStatus(browser, "sent", "skipped");
  assert.equal(await latestOutput(browser, "dropped"), "Dropped: wrong amount");
  await shot(browser, "11-rejected");
});

test("run this node re-runs one edited node with the earlier run's outputs", async () => {
  await selectNode(browser, "sent");
  await typeInto(browser, byTestId(browser, "field-template"), "Resent: {{ PREVIOUS_OUTPUT }}");
  const button = byTestId(browser, "run-this-node");
  await browser.waitUntil(() => button.isEnabled(), { timeout: 5_000, timeoutMsg: "Run this node stays disabled" });
  await button.click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "sent", "done");
  assert.equal(await latestOutput(browser, "sent"), "Resent: Note: Refund 40 EUR to Ada");
  // Only `sent` ran in this run; the others keep what the earlier run gave them.
  const started = [];
  for (const row of await allByTestId(browser, "log-row")) {
    if ((await row.getAttribute("data-type")) === "step_start") started.push(await row.getAttribute("data-node-id"));
  }
  assert.deepEqual(started, ["sent"]);
  assert.equal(await node(browser, "writer").getAttribute("data-status"), "done");
  await shot(browser, "12-run-this-node");
});

test("opens a past run from history and shows its trace", async () => {
  await byTestId(browser, "tab-history").click();
  await browser.waitUntil(async () => (await allByTestId(browser, "history-row")).length >= 3, {
    timeout: 5_000,
    timeoutMsg: "history does not list the three runs",
  });
  const rows = await allByTestId(browser, "history-row");
  // Newest first: the approval runs, then the first run of the built flow.
  const oldest = rows[rows.length - 1];
  assert.equal(await oldest.getAttribute("data-status"), "completed");
  await oldest.click();
  await node(browser, "agent-1").waitForExist({ timeout: 5_000 });
  await waitForStatus(browser, "agent-1", "done");
  await waitForStatus(browser, "output-1", "done");
  assert.equal((await byTestId(browser, "node-stream-agent-1").getText()).trim(), STREAMED);
  assert.ok((await allByTestId(browser, "log-row")).length > 5, "the log shows the run's events");
  await shot(browser, "13-history-run");
});

test("a run paused before the app restarted is shown paused and can be approved", async () => {
  await openFile(browser, approvalFile);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "review", "paused");
  await browser.deleteSession(); // closes the app with the run paused
  browser = await openApp();

  const banner = byTestId(browser, "paused-banner");
  await banner.waitForDisplayed({ timeout: 10_000 });
  await shot(browser, "14-paused-after-restart");
  await byTestId(browser, "paused-banner-open").click();
  await waitForStatus(browser, "review", "paused");
  await promptReady(browser, "approval-prompt");
  await byTestId(browser, "approve").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "sent", "done");
  await shot(browser, "15-resumed-after-restart");
});

test("quitting the app (SIGTERM) during a run stores the run as cancelled, not running", async () => {
  await openFile(browser, builtFile);
  await node(browser, "agent-1").waitForExist();
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "agent-1", "running");
  // Ask the app to quit the way a desktop session does (SIGTERM) while the agent streams.
  const pid = Number(execFileSync("pgrep", ["-n", "-f", `^${APP}`]).toString().trim());
  process.kill(pid, "SIGTERM");
  await waitForExit(pid);
  await browser.deleteSession().catch(() => {}); // the app is gone already
  browser = await openApp();

  await byTestId(browser, "tab-history").click();
  await browser.waitUntil(async () => (await allByTestId(browser, "history-row")).length > 0, {
    timeout: 5_000,
  });
  const newest = (await allByTestId(browser, "history-row"))[0];
  assert.equal(await newest.getAttribute("data-status"), "cancelled");
  await shot(browser, "16-closed-during-run");
});

test("cancel reads cancelled; opening another flow during a run leaves the new flow unpainted", async () => {
  await openFile(browser, builtFile);
  await node(browser, "agent-1").waitForExist();
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "agent-1", "running");
  await byTestId(browser, "cancel").click();
  await waitForRunStatus(browser, "cancelled");
  // The step cut off by Cancel reads cancelled, not failed; the log's end row says so too.
  await waitForStatus(browser, "agent-1", "cancelled");
  const ends = [];
  for (const row of await allByTestId(browser, "log-row")) {
    if ((await row.getAttribute("data-type")) === "run_end") ends.push(await row.getAttribute("data-status"));
  }
  assert.deepEqual(ends, ["cancelled"]);
  await shot(browser, "17-cancelled");

  // A run going while another flow is opened: its later events do not paint the new flow.
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "agent-1", "running");
  await openFile(browser, approvalFile);
  await node(browser, "review").waitForExist();
  assert.equal((await byTestId(browser, "run-status").getProperty("textContent")).trim(), "");
  await browser.waitUntil(() => byTestId(browser, "run").isEnabled(), {
    timeout: 5_000,
    timeoutMsg: "Run stays disabled after opening another flow",
  });
  // The old run streams for about two seconds more; wait it out, then look again.
  await browser.pause(2_500);
  assert.equal((await allByTestId(browser, "log-row")).length, 0, "no log rows of the old run");
  for (const id of ["start", "writer", "review"]) {
    assert.equal(await node(browser, id).getAttribute("data-status"), "idle", `${id} stays idle`);
  }
  assert.equal((await byTestId(browser, "run-status").getProperty("textContent")).trim(), "");
  // The old run went on in the engine and is in History.
  await byTestId(browser, "tab-history").click();
  await browser.waitUntil(
    async () => (await (await allByTestId(browser, "history-row"))[0].getAttribute("data-status")) === "completed",
    { timeout: 10_000, timeoutMsg: "the detached run did not complete in History" },
  );
  await shot(browser, "18-other-flow-opened-during-run");
});

test("replays a past run with its recorded answers, then compares the two runs", async () => {
  // The newest run is the built flow's run that went on while another flow was open.
  await openFile(browser, builtFile);
  await node(browser, "agent-1").waitForExist();
  await byTestId(browser, "tab-history").click();
  const recorded = (await allByTestId(browser, "history-row"))[0];
  const recordedId = await recorded.getAttribute("data-run-id");
  assert.equal(await recorded.getAttribute("data-status"), "completed");
  await recorded.click();
  await waitForStatus(browser, "agent-1", "done");
  await byTestId(browser, "history-replay").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "agent-1", "done");
  // The agent's answer came from the recording: the log says so, and it is the same text.
  const notes = [];
  for (const row of await allByTestId(browser, "log-row")) {
    if ((await row.getAttribute("data-type")) === "logic_check") notes.push(await row.getProperty("textContent"));
  }
  assert.ok(
    notes.some((text) => text.includes("replayed:")),
    `a replayed answer is logged: ${JSON.stringify(notes)}`,
  );
  assert.equal((await byTestId(browser, "node-stream-agent-1").getText()).trim(), STREAMED);
  await shot(browser, "19-replayed");

  // History: the replay is the newest run; check it and the recorded one, then compare.
  await byTestId(browser, "tab-history").click();
  await browser.waitUntil(
    async () => (await (await allByTestId(browser, "history-row"))[0].getAttribute("data-run-id")) !== recordedId,
    { timeout: 10_000, timeoutMsg: "the replay is not listed in History" },
  );
  const rows = await allByTestId(browser, "history-row");
  const checks = await allByTestId(browser, "history-check");
  const ids = [];
  for (const row of rows) ids.push(await row.getAttribute("data-run-id"));
  await checks[0].click();
  await checks[ids.indexOf(recordedId)].click();
  await byTestId(browser, "history-compare").click();
  await byTestId(browser, "compare").waitForDisplayed({ timeout: 5_000 });
  assert.equal(await byTestId(browser, "compare").getAttribute("data-equal"), "true");
  assert.match(await byTestId(browser, "compare-verdict").getText(), /^Same outputs at all \d+ nodes$/);
  assert.ok((await allByTestId(browser, "compare-row")).length >= 3, "every node is compared");
  await shot(browser, "20-compared");
});

test("a breakpoint after a node stops the run there; a replaced value goes on downstream", async () => {
  await byTestId(browser, "compare-close").click();
  await openFile(browser, builtFile);
  await node(browser, "agent-1").waitForExist();
  await selectNode(browser, "agent-1");
  await byTestId(browser, "breakpoint-when").selectByAttribute("value", "after");
  await byTestId(browser, "breakpoint-agent-1").waitForExist({ timeout: 2_000 });
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "agent-1", "paused");
  await promptReady(browser, "breakpoint-prompt");
  assert.match(await byTestId(browser, "breakpoint-message").getText(), /breakpoint after `agent-1` \(visit 1\): its output is Cold water/);
  await shot(browser, "21-breakpoint");
  // Not JSON: refused on the spot, the run stays stopped.
  await typeInto(browser, byTestId(browser, "breakpoint-value"), "Replaced by a person");
  await byTestId(browser, "breakpoint-continue").click();
  await byTestId(browser, "breakpoint-problem").waitForDisplayed();
  assert.equal((await byTestId(browser, "run-status").getProperty("textContent")).trim(), "paused");
  await typeInto(browser, byTestId(browser, "breakpoint-value"), '"Replaced by a person"');
  await byTestId(browser, "breakpoint-continue").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "output-1", "done");
  // The node it stopped after ran: once the run went on it reads done, not paused.
  assert.equal(await node(browser, "agent-1").getAttribute("data-status"), "done");
  assert.equal(await latestOutput(browser, "output-1"), "Replaced by a person");
  await shot(browser, "22-breakpoint-continued");
});

test("pins an output from a past run: the next run does not run the node, and the pin is kept beside the flow", async () => {
  // The breakpoint of the last test goes first.
  await selectNode(browser, "agent-1");
  await byTestId(browser, "breakpoint-when").selectByAttribute("value", "none");
  await byTestId(browser, "tab-history").click();
  const newest = (await allByTestId(browser, "history-row"))[0];
  await newest.click();
  await waitForStatus(browser, "output-1", "done");
  await selectNode(browser, "agent-1");
  await byTestId(browser, "pin-output").click();
  await byTestId(browser, "back-to-editing").click();
  await byTestId(browser, "pin-agent-1").waitForExist({ timeout: 5_000 });
  const pinsFile = builtFile.replace(/\.json$/, ".pins.json");
  await browser.waitUntil(() => existsSync(pinsFile), { timeout: 5_000, timeoutMsg: "no pins file" });
  assert.deepEqual(JSON.parse(readFileSync(pinsFile, "utf8")), {
    pins: { "agent-1": { output: "Replaced by a person" } },
  });

  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "output-1", "done");
  assert.equal(await latestOutput(browser, "output-1"), "Replaced by a person");
  const types = [];
  const notes = [];
  for (const row of await allByTestId(browser, "log-row")) {
    const type = await row.getAttribute("data-type");
    types.push(type);
    if (type === "logic_check") notes.push(await row.getProperty("textContent"));
  }
  assert.ok(!types.includes("llm_delta") && !types.includes("llm_response"), `no model call: ${types}`);
  assert.ok(notes.some((text) => text.includes("pinned")), `the log says it was pinned: ${notes}`);
  await shot(browser, "23-pinned");

  // Unpinned, the pins file goes.
  await selectNode(browser, "agent-1");
  await byTestId(browser, "unpin").click();
  await browser.waitUntil(() => !existsSync(pinsFile), { timeout: 5_000, timeoutMsg: "the pins file stays" });
});

test("an edit marks the node and what follows it stale; Run from there runs only those", async () => {
  await selectNode(browser, "agent-1");
  await typeInto(browser, byTestId(browser, "field-userPrompt"), "A short poem about a river: {{ PREVIOUS_OUTPUT }}");
  await byTestId(browser, "stale-agent-1").waitForExist({ timeout: 5_000 });
  await byTestId(browser, "stale-output-1").waitForExist();
  assert.equal(await byTestId(browser, "stale-start").isExisting(), false, "start is as it ran");
  const runFrom = byTestId(browser, "run-from-stale");
  assert.equal(await runFrom.getAttribute("data-node-id"), "agent-1");
  await shot(browser, "24-stale");
  await browser.waitUntil(() => runFrom.isEnabled(), { timeout: 5_000, timeoutMsg: "Run from here stays disabled" });
  await runFrom.click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "output-1", "done");
  const started = [];
  for (const row of await allByTestId(browser, "log-row")) {
    if ((await row.getAttribute("data-type")) === "step_start") started.push(await row.getAttribute("data-node-id"));
  }
  assert.deepEqual(started, ["agent-1", "output-1"]);
  assert.equal(await byTestId(browser, "stale-agent-1").isExisting(), false, "the run stands for the edit");
  assert.equal(await latestOutput(browser, "output-1"), STREAMED);
});

test("Pause during a run: the running step ends, the next waits, Continue goes on", async () => {
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "agent-1", "running");
  await byTestId(browser, "pause").click();
  await waitForRunStatus(browser, "paused");
  await waitForStatus(browser, "output-1", "paused");
  assert.equal(await node(browser, "agent-1").getAttribute("data-status"), "done", "the running step ended");
  assert.match(await byTestId(browser, "breakpoint-message").getText(), /before `output-1` \(visit 1\) \(paused by the person\)/);
  await shot(browser, "25-paused-by-the-person");
  await byTestId(browser, "breakpoint-continue").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "output-1", "done");
});

test("a node that ran twice in a loop shows each visit, and its cost follows the prices set in Settings", async () => {
  const loopFile = path.join(TMP, "loop.json");
  copyFileSync(path.join(ROOT, "tests/e2e/flows/loop.json"), loopFile);
  await openFile(browser, loopFile);
  await node(browser, "ask").waitForExist();
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "done", "done");

  // The agent ran twice: the picker lists both visits, the latest shown first.
  await selectNode(browser, "ask");
  const picker = byTestId(browser, "visit-picker");
  await picker.waitForDisplayed({ timeout: 5_000 });
  const options = await picker.$$("option");
  const labels = [];
  for (const option of options) labels.push((await option.getText()).trim());
  assert.deepEqual(labels, ["visit 1", "visit 2"]);
  assert.equal((await byTestId(browser, "visit-output").getText()).trim(), "Note: Pass 2");
  await picker.selectByAttribute("value", "0");
  await browser.waitUntil(async () => (await byTestId(browser, "visit-output").getText()).trim() === "Note: Pass 1", {
    timeout: 5_000,
    timeoutMsg: "the first visit's output is not shown",
  });
  assert.equal((await byTestId(browser, "visit-input").getText()).trim(), '{\n  "n": 1\n}');
  assert.match(await byTestId(browser, "visit-facts").getText(), /^completed · \d+(\.\d+)? m?s · 1 LLM call · tokens \d+\/\d+ · cost \$/);
  await shot(browser, "26-visits");

  // The node carries its cost; a price set in Settings (a dollar per input token) reprices it.
  const chip = byTestId(browser, "cost-ask");
  await chip.waitForExist({ timeout: 5_000 });
  const shipped = (await chip.getText()).trim();
  assert.match(shipped, /^\$0\.\d+$/);
  await byTestId(browser, "tab-settings").click();
  await typeInto(browser, byTestId(browser, "settings-prices"), '{"openai/gpt-4o-mini": {"input": 1000000, "output": 0}}');
  await byTestId(browser, "settings-save-prices").click();
  await browser.waitUntil(async () => /^\$\d+\.00$/.test((await chip.getText()).trim()), {
    timeout: 5_000,
    timeoutMsg: `the cost stays ${shipped} after the price changed`,
  });
  // A wrong table is refused, naming what is wrong; the price before stays.
  await typeInto(browser, byTestId(browser, "settings-prices"), '{"gpt-4o-mini": {"input": 1, "output": 1}}');
  await byTestId(browser, "settings-save-prices").click();
  await byTestId(browser, "settings-prices-error").waitForDisplayed({ timeout: 5_000 });
  assert.match(await byTestId(browser, "settings-prices-error").getText(), /name the provider too/);
  assert.match((await chip.getText()).trim(), /^\$\d+\.00$/);
  await typeInto(browser, byTestId(browser, "settings-prices"), "");
  await byTestId(browser, "settings-save-prices").click();
  await browser.waitUntil(async () => (await chip.getText()).trim() === shipped, {
    timeout: 5_000,
    timeoutMsg: "clearing the prices does not bring the shipped price back",
  });
});

test("the Tests panel runs a flow's cases, shows a failing assertion, opens its run, and a past run becomes a case", async () => {
  const testsFile = approvalFile.replace(/\.json$/, ".tests.json");
  copyFileSync(path.join(ROOT, "tests/e2e/flows/approval.tests.json"), testsFile);
  await openFile(browser, approvalFile);
  await node(browser, "writer").waitForExist();
  await byTestId(browser, "tab-tests").click();
  await browser.waitUntil(async () => (await allByTestId(browser, "test-case")).length === 2, {
    timeout: 5_000,
    timeoutMsg: "the two cases are not listed",
  });
  await byTestId(browser, "tests-run-all").click();
  const stateOf = async (name) => {
    for (const row of await allByTestId(browser, "test-case")) {
      if ((await row.getAttribute("data-case")) === name) return row.getAttribute("data-state");
    }
    return null;
  };
  await browser.waitUntil(
    async () =>
      (await stateOf("an approved note is sent")) === "passed" && (await stateOf("a rejected note is sent anyway")) === "failed",
    { timeout: 20_000, timeoutMsg: "the cases did not end passed and failed" },
  );
  assert.equal((await byTestId(browser, "tests-summary").getText()).trim(), "1 passed, 1 failed");
  assert.equal(
    (await byTestId(browser, "test-failures").getText()).trim(),
    'sent equals "Sent: Note: Refund 40 EUR to Ada": expected "Sent: Note: Refund 40 EUR to Ada", got `sent` did not run',
  );
  await shot(browser, "27-tests");

  // The failing case's run, on the canvas: it went the reject way.
  let failing;
  for (const row of await allByTestId(browser, "test-case")) {
    if ((await row.getAttribute("data-case")) === "a rejected note is sent anyway") failing = row;
  }
  await failing.$('[data-testid="test-open-run"]').click();
  await waitForStatus(browser, "dropped", "done");
  await waitForStatus(browser, "sent", "skipped");

  // That run becomes a new case, saved beside the flow with its recorded answers.
  await byTestId(browser, "tab-history").click();
  await byTestId(browser, "history-save-case").click();
  const draft = byTestId(browser, "test-draft-text");
  await draft.waitForDisplayed({ timeout: 5_000 });
  const spec = JSON.parse(await draft.getValue());
  assert.equal(spec.decide.review.decision, "reject");
  assert.deepEqual(spec.expect[0], { status: "completed" });
  spec.name = "rejected by a person";
  await typeInto(browser, draft, JSON.stringify(spec));
  await byTestId(browser, "test-draft-save").click();
  await byTestId(browser, "test-draft-saved").waitForDisplayed({ timeout: 5_000 });
  const saved = JSON.parse(readFileSync(testsFile, "utf8"));
  assert.deepEqual(
    saved.cases.map((testCase) => testCase.name),
    ["an approved note is sent", "a rejected note is sent anyway", "rejected by a person"],
  );
  assert.ok(existsSync(path.join(TMP, "approval.recordings/rejected-by-a-person.json")), "its answers are recorded");
  await shot(browser, "28-saved-as-test-case");

  // Back on the flow, the new case runs offline from those answers and passes.
  await byTestId(browser, "back-to-editing").click();
  await byTestId(browser, "tab-tests").click();
  await browser.waitUntil(async () => (await allByTestId(browser, "test-case")).length === 3, {
    timeout: 5_000,
    timeoutMsg: "the saved case is not listed",
  });
  let added;
  for (const row of await allByTestId(browser, "test-case")) {
    if ((await row.getAttribute("data-case")) === "rejected by a person") added = row;
  }
  await added.$('[data-testid="test-run-case"]').click();
  await browser.waitUntil(async () => (await stateOf("rejected by a person")) === "passed", {
    timeout: 20_000,
    timeoutMsg: "the saved case did not pass",
  });
  for (const row of await allByTestId(browser, "test-case")) {
    if ((await row.getAttribute("data-case")) === "rejected by a person") {
      assert.match(await row.$('[data-testid="test-facts"]').getText(), /offline/);
    }
  }
});

test("the inbox lists a run paused by weft and decides it with a form; the side panel asks the run shown", async () => {
  const formFile = path.join(TMP, "form.json");
  copyFileSync(path.join(ROOT, "tests/e2e/flows/form.json"), formFile);
  // Who decides, kept with each decision.
  await byTestId(browser, "tab-settings").click();
  await typeInto(browser, byTestId(browser, "settings-user-name"), "Ada E2E");
  await byTestId(browser, "settings-save-user-name").click();

  // A run paused by the `weft` command, in the same store.
  const weft = path.join(path.dirname(APP), "weft");
  let runId = "";
  try {
    execFileSync(weft, ["run", formFile, "--db", process.env.WEFT_DB], { stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    assert.equal(error.status, 3, `weft run pauses: ${error.stderr}`);
    runId = error.stdout.toString().trim();
  }
  assert.match(runId, /^[0-9a-f-]{36}$/);
  await byTestId(browser, "tab-inbox").click();
  let item;
  await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, {
    timeout: 10_000,
    timeoutMsg: "the run paused by weft is not in the inbox",
  });
  assert.equal((await item.$('[data-testid="inbox-approval-message"]').getText()).trim(), "Send this? Refund 40 EUR to Ada");
  await item.$('[data-testid="inbox-approval-field-tone"]').selectByAttribute("value", "warm");
  await typeInto(browser, item.$('[data-testid="inbox-approval-field-reply"]'), "Refund of 40 EUR for Ada, sent today");
  await shot(browser, "29-inbox");
  await item.$('[data-testid="inbox-approve"]').click();
  await browser.waitUntil(async () => (await inboxItem(browser, runId)) === undefined, {
    timeout: 10_000,
    timeoutMsg: "the decided run stays in the inbox",
  });
  const shown = () => JSON.parse(execFileSync(weft, ["show", runId, "--db", process.env.WEFT_DB, "--json"]).toString());
  await browser.waitUntil(() => shown().run.summary.status === "completed", {
    timeout: 10_000,
    timeoutMsg: "the run decided from the inbox did not complete",
  });
  assert.equal(shown().run.result, "warm: Refund of 40 EUR for Ada, sent today (by Ada E2E)");

  // The run shown on the canvas: its prompt is in the side panel too.
  await openFile(browser, formFile);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "paused");
  const card = byTestId(browser, "paused-card");
  await card.waitForDisplayed({ timeout: 5_000 });
  assert.equal((await byTestId(browser, "panel-approval-field-reply").getValue()).trim(), "Refund 40 EUR to Ada");
  await byTestId(browser, "panel-approval-field-tone").selectByAttribute("value", "formal");
  await shot(browser, "30-side-panel-approval");
  await byTestId(browser, "panel-approve").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "sent", "done");
  assert.equal(await latestOutput(browser, "sent"), "formal: Refund 40 EUR to Ada (by Ada E2E)");
  await selectNode(browser, "review");
  assert.match(await byTestId(browser, "node-decision").getText(), /^Decision: approve by Ada E2E at /);
});

test("two of finance decide: People in Settings, the starter refused in the inbox, one approval from the app and one from weft", async () => {
  const file = path.join(TMP, "two-of-finance.json");
  const flowNode = (id, type, data) => ({ id, type, position: { x: 0, y: 0 }, data });
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      name: "Payment",
      nodes: [
        flowNode("start", "start", { initialInput: "40 EUR" }),
        flowNode("pay", "approval", {
          message: "Pay {{ PREVIOUS_OUTPUT }}?",
          approvers: ["group:finance"],
          required: 2,
          allowSelf: false,
        }),
        flowNode("paid", "template", { template: "paid {{ PREVIOUS_OUTPUT }}, {{ approval.by }} last" }),
      ],
      edges: [
        { id: "a", source: "start", target: "pay" },
        { id: "b", source: "pay", sourceHandle: "approve", target: "paid" },
      ],
    }),
  );
  const people = "ada - finance\ngrace - finance\nbob - finance";
  const peopleFile = path.join(TMP, "people.txt");
  writeFileSync(peopleFile, `${people}\n`);
  const setUser = async (name) => {
    await byTestId(browser, "tab-settings").click();
    await typeInto(browser, byTestId(browser, "settings-user-name"), name);
    await byTestId(browser, "settings-save-user-name").click();
  };
  await byTestId(browser, "tab-settings").click();
  // Line by line: the driver drops a newline inside a typed text.
  const lines = people.split("\n");
  await typeInto(browser, byTestId(browser, "settings-people"), lines[0]);
  for (const line of lines.slice(1)) {
    await browser.keys(["Enter"]);
    await byTestId(browser, "settings-people").addValue(line);
  }
  await byTestId(browser, "settings-save-people").click();
  assert.equal(await byTestId(browser, "settings-people").getValue(), people);
  await setUser("bob");

  // bob starts it with weft; the inbox says who may approve: finance but bob.
  const weft = path.join(path.dirname(APP), "weft");
  const env = { ...process.env, WEFT_PEOPLE_FILE: peopleFile, WEFT_USER: "bob" };
  let runId = "";
  try {
    execFileSync(weft, ["run", file, "--db", process.env.WEFT_DB], { env, stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    assert.equal(error.status, 3, `weft run pauses: ${error.stderr}`);
    runId = error.stdout.toString().trim();
  }
  assert.match(runId, /^[0-9a-f-]{36}$/);
  const waitForItem = async () => {
    await byTestId(browser, "tab-inbox").click();
    await byTestId(browser, "inbox-refresh").click();
    let item;
    await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, {
      timeout: 10_000,
      timeoutMsg: "the run paused by weft is not in the inbox",
    });
    return item;
  };
  let item = await waitForItem();
  assert.equal(
    (await item.$('[data-testid="inbox-progress"]').getText()).trim(),
    "0 of 2 (nobody has approved yet); still needed: 2 more, from ada, grace (not whoever started the run)",
  );

  // bob, the app's user, started the run: his buttons are disabled, saying why.
  const why = /bob started run .*, and `pay` does not let whoever started a run decide it \(allowSelf: false\)/;
  assert.match(await item.$('[data-testid="inbox-refusal"]').getText(), why);
  assert.equal(await item.$('[data-testid="inbox-approve"]').isEnabled(), false);
  assert.equal(await item.$('[data-testid="inbox-reject"]').isEnabled(), false);
  assert.match(await item.$('[data-testid="inbox-approve"]').getAttribute("title"), why);

  // grace approves in the app: counted, the run still waits for one more.
  await setUser("grace");
  item = await waitForItem();
  await item.$('[data-testid="inbox-approve"]').click();
  await browser.waitUntil(
    async () => ((await (await inboxItem(browser, runId))?.$('[data-testid="inbox-progress"]').getText()) ?? "").startsWith("1 of 2 (approved by grace)"),
    { timeout: 10_000, timeoutMsg: "grace's approval is not counted in the inbox" },
  );
  assert.match(await byTestId(browser, "notice-banner").getText(), /Your approval is kept: 1 of 2 \(approved by grace\); still needed: 1 more, from ada/);
  await shot(browser, "31-inbox-quorum");
  await byTestId(browser, "error-dismiss").click();

  // ada's, from the command line, makes two: the run completes and leaves the inbox.
  const resumed = execFileSync(weft, ["resume", runId, "--decision", "approve", "--by", "ada", "--db", process.env.WEFT_DB], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  assert.equal(resumed.toString(), "paid 40 EUR, ada last\n");
  await byTestId(browser, "inbox-refresh").click();
  await browser.waitUntil(async () => (await inboxItem(browser, runId)) === undefined, {
    timeout: 10_000,
    timeoutMsg: "the decided run stays in the inbox",
  });
  const audit = JSON.parse(execFileSync(weft, ["audit", "--run", runId, "--json", "--db", process.env.WEFT_DB], { env }).toString());
  assert.deepEqual(
    audit.map((decision) => [decision.by, decision.channel, decision.decision]),
    [
      ["grace", "app", "approve"],
      ["ada", "cli", "approve"],
    ],
  );
  await setUser("Ada E2E");
});

test("an approval nobody decides in time goes on along `timeout` while the app is open, and leaves the inbox", async () => {
  const file = path.join(TMP, "deadline.json");
  const flowNode = (id, type, data) => ({ id, type, position: { x: 0, y: 0 }, data });
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      name: "Deadline",
      nodes: [
        flowNode("start", "start", {}),
        flowNode("review", "approval", { message: "Decide within four seconds", timeoutSeconds: 4 }),
        flowNode("yes", "template", { template: "approved" }),
        flowNode("late", "template", { template: "{{ approval.decision }}: {{ approval.note }}" }),
      ],
      edges: [
        { id: "e1", source: "start", target: "review" },
        { id: "e2", source: "review", target: "yes", sourceHandle: "approve" },
        { id: "e3", source: "review", target: "late", sourceHandle: "timeout" },
      ],
    }),
  );
  // Paused by the `weft` command, which then ends: only the app is left to see the deadline.
  const weft = path.join(path.dirname(APP), "weft");
  let runId = "";
  try {
    execFileSync(weft, ["run", file, "--db", process.env.WEFT_DB], { stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    assert.equal(error.status, 3, `weft run pauses: ${error.stderr}`);
    runId = error.stdout.toString().trim();
  }
  assert.match(runId, /^[0-9a-f-]{36}$/);
  await byTestId(browser, "tab-inbox").click();
  // Read at once (the inbox's own reading every 3 s could fall after the deadline).
  await byTestId(browser, "inbox-refresh").click();
  await browser.waitUntil(async () => (await inboxItem(browser, runId)) !== undefined, {
    timeout: 3_000,
    timeoutMsg: "the run paused by weft is not in the inbox",
  });
  // The app's keeper settles the deadline: the run goes on along `timeout` by itself.
  const shown = () => JSON.parse(execFileSync(weft, ["show", runId, "--db", process.env.WEFT_DB, "--json"]).toString());
  await browser.waitUntil(() => shown().run.summary.status === "completed", {
    timeout: 10_000,
    timeoutMsg: "the approval past its deadline did not go on while the app was open",
  });
  assert.equal(shown().run.result, "timeout: nobody decided within 4 s");
  await browser.waitUntil(async () => (await inboxItem(browser, runId)) === undefined, {
    timeout: 10_000,
    timeoutMsg: "the run that timed out stays in the inbox",
  });
});

/** Where each node of the canvas is, in the flow's coordinates, and its drawn size. */
function nodeBoxes(browser) {
  return browser.execute(() =>
    Object.fromEntries(
      [...document.querySelectorAll(".react-flow__node")].map((element) => {
        const at = /translate\(\s*(-?[\d.]+)px,\s*(-?[\d.]+)px\)/.exec(element.style.transform);
        return [element.dataset.id, { x: Number(at[1]), y: Number(at[2]), width: element.offsetWidth, height: element.offsetHeight }];
      }),
    ),
  );
}

test("Tidy up lays a messy flow out in layers, left to right or top down, and Ctrl+Z puts it back", async () => {
  const messyFile = path.join(TMP, "messy.json");
  copyFileSync(path.join(ROOT, "tests/e2e/flows/messy.json"), messyFile);
  const flow = JSON.parse(readFileSync(messyFile, "utf8"));
  const execution = flow.edges.filter((edge) => edge.sourceHandle !== "subagent");
  await openFile(browser, messyFile);
  await waitForEdges(browser, flow.edges.length, "the messy flow");
  await browser.waitUntil(async () => Object.keys(await nodeBoxes(browser)).length === flow.nodes.length);
  const before = await nodeBoxes(browser);
  await shot(browser, "40-messy");

  for (const direction of ["right", "down"]) {
    await byTestId(browser, "tidy-direction").selectByAttribute("value", direction);
    await byTestId(browser, "tidy-up").click();
    let tidied = before;
    await browser.waitUntil(async () => JSON.stringify((tidied = await nodeBoxes(browser))) !== JSON.stringify(before), {
      timeout: 5_000,
      timeoutMsg: `Tidy up (${direction}) moved no node`,
    });
    assert.equal(await byTestId(browser, "title").getAttribute("data-dirty"), "true", "a tidied flow is unsaved");
    const ids = Object.keys(tidied);
    for (const [i, a] of ids.entries()) {
      for (const b of ids.slice(i + 1)) {
        const [p, q] = [tidied[a], tidied[b]];
        const apart = p.x + p.width <= q.x || q.x + q.width <= p.x || p.y + p.height <= q.y || q.y + q.height <= p.y;
        assert.ok(apart, `${direction}: ${a} ${JSON.stringify(p)} overlaps ${b} ${JSON.stringify(q)}`);
      }
    }
    for (const edge of execution) {
      const [from, to] = [tidied[edge.source], tidied[edge.target]];
      const onwards = direction === "right" ? from.x + from.width < to.x : from.y + from.height < to.y;
      assert.ok(onwards, `${direction}: the edge ${edge.id} goes back (${JSON.stringify(from)} → ${JSON.stringify(to)})`);
    }
    await shot(browser, `41-tidied-${direction}`);

    // One Ctrl+Z puts every node back where it was, exactly. (Focus leaves the toolbar first, as
    // with a click on the canvas: shortcuts do not fire in a select.)
    await browser.execute(() => document.activeElement?.blur());
    await browser.keys(["Control", "z"]);
    // Where each node is, not its size: a node's text (so its height) follows the zoom, and
    // the view was fitted to the tidied flow.
    const placed = (boxes) => JSON.stringify(Object.entries(boxes).map(([id, { x, y }]) => [id, x, y]));
    await browser.waitUntil(async () => placed(await nodeBoxes(browser)) === placed(before), {
      timeout: 5_000,
      timeoutMsg: `Ctrl+Z did not put the nodes back after Tidy up (${direction})`,
    });
    assert.equal(await byTestId(browser, "title").getAttribute("data-dirty"), "false", "undone, the flow is as saved");
  }
  await byTestId(browser, "tidy-direction").selectByAttribute("value", "right");
});

test("room to work: panels resize and collapse (remembered), the palette searches, a dropped edge adds a wired node, flows fit readably", async () => {
  // Eight nodes in a row fit at ~0.4: the flow is shown at a readable zoom instead, panned from
  // its start.
  const wideFile = path.join(TMP, "wide.json");
  const steps = Array.from({ length: 7 }, (_, i) => `step${i + 1}`);
  writeFileSync(
    wideFile,
    JSON.stringify({
      version: 1,
      name: "Wide",
      nodes: [
        { id: "start", type: "start", position: { x: 0, y: 0 }, data: {} },
        ...steps.map((id, i) => ({ id, type: "template", position: { x: 240 * (i + 1), y: 0 }, data: { template: "{{ PREVIOUS_OUTPUT }}" } })),
      ],
      edges: steps.map((id, i) => ({ id: `e${i}`, source: i === 0 ? "start" : steps[i - 1], target: id })),
    }),
  );
  await openFile(browser, wideFile);
  await node(browser, "step7").waitForExist();
  await browser.waitUntil(async () => ((await canvasZoom(browser)) ?? 0) >= 0.75, {
    timeout: 5_000,
    timeoutMsg: "the flow was shrunk past a readable zoom",
  });
  assert.ok(await node(browser, "start").isDisplayed({ withinViewport: true }), "the flow's start is in view");
  await shot(browser, "31-readable-fit");

  // The palette filters as you type; Enter adds the first match (on a new flow, room to drop).
  await byTestId(browser, "file-new").click();
  const discard = byTestId(browser, "discard-confirm");
  if (await discard.isExisting()) await discard.click();
  await typeInto(browser, byTestId(browser, "palette-search"), "gate");
  assert.equal(await byTestId(browser, "palette-agent").isExisting(), false);
  await browser.keys(["Enter"]);
  await node(browser, "gate-1").waitForExist({ timeout: 5_000 });

  // A connection dropped on empty canvas offers the kinds; the one picked is added and wired.
  const from = handle(browser, "gate-1", "pass");
  const at = await from.getLocation();
  await drag(browser, from, { x: Math.round(at.x - 260), y: Math.round(at.y + 200) });
  const menu = byTestId(browser, "quick-add");
  await menu.waitForDisplayed({ timeout: 5_000 });
  await byTestId(browser, "quick-add-template").click();
  await node(browser, "template-1").waitForExist({ timeout: 5_000 });
  // React Flow draws an edge once both its nodes are measured, a moment after the node shows.
  const edgeIds = () =>
    browser.execute(() =>
      [...document.querySelectorAll(".react-flow__edge")].map((edge) => edge.getAttribute("data-testid")),
    );
  const isWired = (ids) => ids.some((id) => id?.includes("gate-1") && id.includes("template-1"));
  await browser.waitUntil(async () => isWired(await edgeIds()), { timeout: 5_000 }).catch(() => {});
  const wired = await edgeIds();
  assert.ok(isWired(wired), `the new node is wired from gate-1's pass: ${wired}`);
  await shot(browser, "32-quick-add");

  // The minimap can be hidden, and comes back (React Flow names it rf__minimap).
  await byTestId(browser, "rf__minimap").waitForExist({ timeout: 5_000 });
  await byTestId(browser, "minimap-toggle").click();
  await waitUntilGone(browser, "rf__minimap");
  await byTestId(browser, "minimap-toggle").click();
  await byTestId(browser, "rf__minimap").waitForExist({ timeout: 5_000 });

  // Panels: the side panel widens by its handle; palette and side panel collapse and reopen.
  const side = byTestId(browser, "side-panel");
  const before = (await side.getSize()).width;
  const splitter = byTestId(browser, "side-splitter");
  const where = await splitter.getLocation();
  await drag(browser, splitter, { x: Math.round(where.x - 120), y: Math.round(where.y + 100) });
  const after = (await side.getSize()).width;
  assert.ok(after >= before + 100, `the side panel widened: ${before} → ${after}`);
  await byTestId(browser, "palette-collapse").click();
  await waitUntilGone(browser, "palette");
  const canvasWidth = (await byTestId(browser, "canvas").getSize()).width;
  await shot(browser, "33-more-room");
  // The log collapses to its toolbar.
  await byTestId(browser, "log-toggle").click();
  assert.equal(await byTestId(browser, "log").getAttribute("data-collapsed"), "true");
  assert.ok((await byTestId(browser, "canvas").getSize()).height > 500, "the canvas takes the log's room");
  assert.ok(canvasWidth > 700, `the canvas takes the palette's room: ${canvasWidth}`);

  // Remembered: a new start of the app opens as it was left (the log collapsed until a run).
  await browser.deleteSession();
  browser = await openApp("canvas");
  assert.equal(await byTestId(browser, "palette").isExisting(), false, "the palette stays collapsed");
  assert.equal(await byTestId(browser, "log").getAttribute("data-collapsed"), "true");
  const reopened = (await byTestId(browser, "side-panel").getSize()).width;
  assert.ok(Math.abs(reopened - after) <= 2, `the side panel kept its width: ${reopened} vs ${after}`);
  // Back to how the other tests expect it.
  await byTestId(browser, "palette-expand").click();
  await byTestId(browser, "palette-agent").waitForDisplayed();
  const handleNow = byTestId(browser, "side-splitter");
  const now = await handleNow.getLocation();
  await drag(browser, handleNow, { x: Math.round(now.x + (after - before)), y: Math.round(now.y + 100) });
});

test("a new agent with no model says so before Run; a default model in Settings makes it runnable; the dark theme", async () => {
  await byTestId(browser, "file-new").click();
  const discard = byTestId(browser, "discard-confirm");
  if (await discard.isExisting()) await discard.click();
  await byTestId(browser, "palette-agent").click();
  await node(browser, "agent-1").waitForExist();
  await connect(browser, "start", "output", "agent-1");
  // Once the edge is validated, what blocks Run is the missing model, and it says where to set one.
  const reason = byTestId(browser, "run-blocked-reason");
  const reasonText = async () => ((await reason.isExisting()) ? await reason.getProperty("textContent") : "");
  await browser.waitUntil(async () => /no model is set/.test(await reasonText()), {
    timeout: 5_000,
    timeoutMsg: "Run is not refused for an agent with no model",
  });
  assert.equal(await byTestId(browser, "run").isEnabled(), false);
  assert.match(await reasonText(), /no model is set.*Model field/);
  await byTestId(browser, "tab-settings").click();
  await typeInto(browser, byTestId(browser, "settings-default-model"), "gpt-4o-mini");
  await byTestId(browser, "settings-save-default-model").click();
  await browser.waitUntil(() => byTestId(browser, "run").isEnabled(), {
    timeout: 5_000,
    timeoutMsg: "a default model did not make the flow runnable",
  });
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "completed");
  // The run's end is coloured by its status; an event's JSON reads indented when opened.
  const ends = await allByTestId(browser, "log-row");
  const last = ends[ends.length - 1];
  assert.equal(await last.getAttribute("data-status"), "completed");
  await last.click();
  const full = byTestId(browser, "log-content-full");
  await full.waitForDisplayed({ timeout: 5_000 });
  // textContent, not getText: WebKit reports no rendered text for a row in the log's scroller.
  assert.match(await full.getProperty("textContent"), /\{\n {2}"error": null/);
  // Clear the default model again: other tests expect agents to name theirs.
  await typeInto(browser, byTestId(browser, "settings-default-model"), "");
  await byTestId(browser, "settings-save-default-model").click();

  await byTestId(browser, "settings-theme").selectByAttribute("value", "dark");
  await browser.waitUntil(async () => (await browser.$(".app").getAttribute("data-theme")) === "dark", {
    timeout: 5_000,
    timeoutMsg: "the dark theme did not apply",
  });
  await shot(browser, "34-dark-theme");
  await byTestId(browser, "settings-theme").selectByAttribute("value", "light");
});

test("a flow's schedule shows when it comes next on the start node; Run now runs it with the schedule's input", async () => {
  const scheduledFile = path.join(TMP, "scheduled.json");
  writeFileSync(
    scheduledFile,
    JSON.stringify({
      version: 1,
      name: "Morning digest",
      settings: { schedules: [{ cron: "30 7 * * *", timezone: "Asia/Tokyo", input: "from the schedule" }] },
      nodes: [
        { id: "start", type: "start", position: { x: 0, y: 0 }, data: { initialInput: "by hand" } },
        { id: "say", type: "template", position: { x: 320, y: 0 }, data: { template: "digest: {{ PREVIOUS_OUTPUT }}" } },
      ],
      edges: [{ id: "e1", source: "start", target: "say" }],
    }),
  );
  await openFile(browser, scheduledFile);
  const next = byTestId(browser, "schedule-next-0");
  await next.waitForDisplayed({ timeout: 5_000 });
  // The time is the zone's wall clock, computed by the engine's cron crate.
  assert.match(await next.getText(), /^Next (Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} [A-Z][a-z]{2} 07:30 Asia\/Tokyo$/);
  await shot(browser, "35-schedule-on-start");

  await byTestId(browser, "run-now-0").click();
  await waitForRunStatus(browser, "completed");
  assert.equal(await latestOutput(browser, "say"), "digest: from the schedule");
});

test("History → Versions: a run and a save each keep a version; Compare marks what changed since one, and Restore brings it back", async () => {
  const versionedFile = path.join(TMP, "versioned.json");
  writeFileSync(
    versionedFile,
    JSON.stringify({
      version: 1,
      name: "Versioned",
      nodes: [
        { id: "start", type: "start", position: { x: 0, y: 0 }, data: { initialInput: "hi" } },
        { id: "say", type: "template", position: { x: 320, y: 0 }, data: { template: "first: {{ PREVIOUS_OUTPUT }}" } },
        { id: "old", type: "template", position: { x: 320, y: 200 }, data: { label: "Old step", template: "old" } },
      ],
      edges: [
        { id: "e1", source: "start", target: "say" },
        { id: "e2", source: "start", target: "old" },
      ],
    }),
  );
  await openFile(browser, versionedFile);
  // A run keeps the version it ran.
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "completed");

  // Edited and saved: a second version.
  await node(browser, "old").click();
  await browser.keys(["Delete"]);
  await waitUntilGone(browser, "node-old");
  await selectNode(browser, "say");
  await typeInto(browser, byTestId(browser, "field-template"), "second: {{ PREVIOUS_OUTPUT }}");
  await browser.keys(["Control", "s"]);
  await browser.waitUntil(async () => (await byTestId(browser, "title").getAttribute("data-dirty")) === "false", {
    timeout: 5_000,
    timeoutMsg: "the flow was never saved",
  });

  await byTestId(browser, "tab-history").click();
  await byTestId(browser, "history-versions").click();
  await browser.waitUntil(async () => (await allByTestId(browser, "version-row")).length === 2, {
    timeout: 5_000,
    timeoutMsg: "the run's and the save's versions were never listed",
  });
  const rows = await allByTestId(browser, "version-row");
  assert.equal(await rows[0].getAttribute("data-current"), "true", "the save is what the file holds");
  assert.match(await rows[0].getText(), /saved/);
  assert.match(await rows[1].getText(), /1 run/);

  await rows[1].$('[data-testid="version-compare"]').click();
  const counts = byTestId(browser, "flow-compare-counts");
  await counts.waitForDisplayed({ timeout: 5_000 });
  assert.equal(await counts.getText(), "1 removed · 1 changed · 1 edge removed");
  await byTestId(browser, "ghost-old").waitForDisplayed({ timeout: 5_000 });
  assert.equal(await byTestId(browser, "diff-say").getProperty("textContent"), "changed");
  await selectNode(browser, "say");
  const changed = byTestId(browser, "compared-field");
  await changed.waitForDisplayed({ timeout: 5_000 });
  assert.equal(await changed.getAttribute("data-field"), "template");
  assert.match(await changed.getText(), /first: \{\{ PREVIOUS_OUTPUT \}\} → second: \{\{ PREVIOUS_OUTPUT \}\}/);
  await shot(browser, "36-compare-with-version");

  // Restore asks, then puts the old version on the canvas; saved, the file holds it again.
  await byTestId(browser, "flow-compare-restore").click();
  await byTestId(browser, "restore-confirm").click();
  await node(browser, "old").waitForExist({ timeout: 5_000 });
  await waitUntilGone(browser, "flow-compare-banner");
  await browser.keys(["Control", "s"]);
  await browser.waitUntil(async () => (await byTestId(browser, "title").getAttribute("data-dirty")) === "false", {
    timeout: 5_000,
    timeoutMsg: "the restored flow was never saved",
  });
  const saved = JSON.parse(readFileSync(versionedFile, "utf8"));
  assert.deepEqual(
    saved.nodes.map((n) => n.id),
    ["start", "say", "old"],
  );
  assert.equal(saved.nodes[1].data.template, "first: {{ PREVIOUS_OUTPUT }}");
});

test("Settings → Servers: a team's weft serve connected; its approval, runs and flows in the app; a stop survived; a wrong token named", async () => {
  // A real `weft serve` on loopback, with a tokens file.
  const dir = path.join(TMP, "team-server");
  mkdirSync(path.join(dir, "flows"), { recursive: true });
  writeFileSync(path.join(dir, "tokens.txt"), "ada:team-token-0123456789abcdef\n");
  const at = { x: 0, y: 0 };
  writeFileSync(
    path.join(dir, "flows", "pay.json"),
    JSON.stringify({
      version: 1,
      name: "Pay",
      nodes: [
        { id: "start", type: "start", position: at, data: { initialInput: "40 EUR" } },
        { id: "review", type: "approval", position: at, data: { message: "Pay {{PREVIOUS_OUTPUT}}?" } },
        { id: "paid", type: "template", position: at, data: { template: "paid {{PREVIOUS_OUTPUT}} ({{ approval.note }})" } },
        { id: "held", type: "template", position: at, data: { template: "held" } },
      ],
      edges: [
        { id: "e1", source: "start", target: "review" },
        { id: "e2", source: "review", target: "paid", sourceHandle: "approve" },
        { id: "e3", source: "review", target: "held", sourceHandle: "reject" },
      ],
    }),
  );
  writeFileSync(
    path.join(dir, "flows", "polish.json"),
    JSON.stringify({
      version: 1,
      name: "Polish",
      nodes: [
        { id: "start", type: "start", position: { x: 0, y: 0 }, data: { initialInput: "the notes" } },
        { id: "draft", type: "template", position: { x: 320, y: 0 }, data: { template: "Draft of {{ PREVIOUS_OUTPUT }}" } },
        { id: "polish", type: "template", position: { x: 640, y: 0 }, data: { template: "Polished {{ PREVIOUS_OUTPUT }}" } },
      ],
      edges: [
        { id: "e1", source: "start", target: "draft" },
        { id: "e2", source: "draft", target: "polish" },
      ],
    }),
  );
  const weft = path.join(path.dirname(APP), "weft");
  const serve = (addr) =>
    spawn(weft, ["serve", "--flows", "flows", "--tokens", "tokens.txt", "--addr", addr, "--db", path.join(dir, "runs.db")], {
      cwd: dir,
      stdio: ["ignore", "pipe", "ignore"],
    });
  let server = serve("127.0.0.1:0");
  try {
    const url = await new Promise((resolve, reject) => {
      let text = "";
      server.stdout.on("data", (chunk) => {
        text += chunk;
        if (text.includes("\n")) resolve(text.split("\n")[0].trim());
      });
      server.on("exit", (code) => reject(new Error(`weft serve stopped: ${code}`)));
    });
    await byTestId(browser, "tab-settings").click();
    await typeInto(browser, byTestId(browser, "settings-server-name"), "team");
    await typeInto(browser, byTestId(browser, "settings-server-url"), url);
    await typeInto(browser, byTestId(browser, "settings-server-token"), "team-token-0123456789abcdef");
    await byTestId(browser, "settings-save-server").click();
    const row = byTestId(browser, "settings-server");
    await row.waitForExist({ timeout: 5_000 });
    assert.match(await row.getText(), /team[\s\S]*token set/);
    await row.$('[data-testid="settings-check-server"]').click();
    const found = row.$('[data-testid="settings-server-check"]');
    await found.waitForExist({ timeout: 15_000 });
    assert.equal(await found.getAttribute("data-ok"), "true", await found.getText());
    assert.match(await found.getText(), /connected to http:\/\/127\.0\.0\.1:\d+: the token is taken/);
    await shot(browser, "40-settings-servers");

    // A run of the server, started with curl's request, waits in the app's inbox marked with
    // the server; approved there, it completes on the server, decided under the token's name.
    const headers = { authorization: "Bearer team-token-0123456789abcdef", "content-type": "application/json" };
    const started = await (await fetch(`${url}/v1/runs`, { method: "POST", headers, body: JSON.stringify({ flow: "pay" }) })).json();
    const serverRun = async () => (await (await fetch(`${url}/v1/runs/${started.runId}`, { headers })).json()).run;
    await browser.waitUntil(async () => (await serverRun()).summary.status === "paused", { timeout: 10_000, timeoutMsg: "the server run never paused" });
    await byTestId(browser, "tab-inbox").click();
    await byTestId(browser, "inbox-refresh").click();
    let item;
    await browser.waitUntil(async () => (item = await inboxItem(browser, started.runId)) !== undefined, {
      timeout: 10_000,
      timeoutMsg: "the server's run is not in the inbox",
    });
    assert.equal(await item.getAttribute("data-server"), "team");
    assert.equal(await item.$('[data-testid="inbox-server"]').getText(), "team");
    await shot(browser, "41-inbox-server-run");
    await typeInto(browser, item.$('[data-testid="inbox-approval-note"]'), "from the desk");
    await item.$('[data-testid="inbox-approve"]').click();
    await browser.waitUntil(async () => (await serverRun()).summary.status === "completed", {
      timeout: 10_000,
      timeoutMsg: "the server run was not decided",
    });
    const done = await serverRun();
    assert.equal(done.result, "paid 40 EUR (from the desk)");
    await browser.waitUntil(async () => (await inboxItem(browser, started.runId)) === undefined, {
      timeout: 10_000,
      timeoutMsg: "the decided server run stays in the inbox",
    });

    // History lists the server's run marked with the server; opened, its trace is on the canvas.
    await byTestId(browser, "tab-history").click();
    await byTestId(browser, "history-refresh").click();
    const serverRow = async () => {
      for (const row of await allByTestId(browser, "history-row")) {
        if ((await row.getAttribute("data-run-id")) === started.runId) return row;
      }
      return undefined;
    };
    await browser.waitUntil(async () => (await serverRow()) !== undefined, {
      timeout: 10_000,
      timeoutMsg: "the server's run is not in History",
    });
    const listed = await serverRow();
    assert.equal(await listed.getAttribute("data-server"), "team");
    assert.equal(await listed.getAttribute("data-status"), "completed");
    await listed.click();
    await waitForRunStatus(browser, "completed");
    await waitForStatus(browser, "paid", "done");
    assert.equal(await byTestId(browser, "viewing-server").getText(), "team");
    await shot(browser, "42-history-server-run");
    await byTestId(browser, "back-to-editing").click();

    // A flow of the server, opened from History → Server flows, runs there with a breakpoint
    // set here; stopped before `polish`, it goes on with another value and completes there.
    await byTestId(browser, "history-servers").click();
    let polish;
    await browser.waitUntil(
      async () => {
        for (const listed of await allByTestId(browser, "server-flow")) {
          if ((await listed.getAttribute("data-name")) === "polish") polish = listed;
        }
        return polish !== undefined;
      },
      { timeout: 10_000, timeoutMsg: "the server's flows are not listed" },
    );
    await polish.click();
    await byTestId(browser, "title-server").waitForExist({ timeout: 5_000 });
    assert.equal(await byTestId(browser, "title-server").getText(), "team");
    await node(browser, "polish").waitForExist();
    await selectNode(browser, "polish");
    await byTestId(browser, "breakpoint-when").selectByAttribute("value", "before");
    await byTestId(browser, "breakpoint-polish").waitForExist({ timeout: 2_000 });
    await byTestId(browser, "run").click();
    await waitForStatus(browser, "polish", "paused");
    assert.equal(await byTestId(browser, "viewing-server").getText(), "team");
    assert.match(await byTestId(browser, "breakpoint-message").getText(), /before `polish` \(visit 1\): its input is Draft of the notes/);
    await shot(browser, "43-server-flow-breakpoint");
    await typeInto(browser, byTestId(browser, "breakpoint-value"), '"a better draft"');
    await byTestId(browser, "breakpoint-continue").click();
    await waitForRunStatus(browser, "completed");
    await waitForStatus(browser, "polish", "done");
    const ranThere = await (await fetch(`${url}/v1/runs?limit=1`, { headers })).json();
    assert.equal(ranThere[0].flowName, "Polish");
    assert.equal(ranThere[0].status, "completed");
    const polished = await (await fetch(`${url}/v1/runs/${ranThere[0].id}`, { headers })).json();
    assert.equal(polished.run.result, "Polished a better draft");
    assert.equal(polished.run.summary.trigger.by, "ada");
    await byTestId(browser, "back-to-editing").click();
    await byTestId(browser, "file-new").click();

    // The server stops with a run waiting: the inbox says so; started again, the run is back.
    const waiting = await (await fetch(`${url}/v1/runs`, { method: "POST", headers, body: JSON.stringify({ flow: "pay" }) })).json();
    await browser.waitUntil(async () => (await (await fetch(`${url}/v1/runs/${waiting.runId}`, { headers })).json()).run.summary.status === "paused", {
      timeout: 10_000,
      timeoutMsg: "the second server run never paused",
    });
    server.kill();
    await new Promise((resolve) => server.once("exit", resolve));
    await byTestId(browser, "tab-inbox").click();
    await byTestId(browser, "inbox-refresh").click();
    await browser.waitUntil(async () => /server `team`: cannot reach/.test(await byTestId(browser, "inbox").getText()), {
      timeout: 15_000,
      timeoutMsg: "the inbox does not say the server is gone",
    });
    assert.equal(await inboxItem(browser, waiting.runId), undefined);
    server = serve(new URL(url).host);
    await browser.waitUntil(async () => (await fetch(`${url}/openapi.json`).catch(() => ({ ok: false }))).ok, {
      timeout: 15_000,
      timeoutMsg: "the server did not start again",
    });
    await byTestId(browser, "inbox-refresh").click();
    await browser.waitUntil(async () => (await inboxItem(browser, waiting.runId)) !== undefined, {
      timeout: 15_000,
      timeoutMsg: "the waiting run is not back in the inbox",
    });
    assert.equal((await allByTestId(browser, "inbox-server-problem")).length, 0);
    await byTestId(browser, "tab-settings").click();

    // Saved again with another token: the check names the refusal.
    await typeInto(browser, byTestId(browser, "settings-server-name"), "team");
    await typeInto(browser, byTestId(browser, "settings-server-url"), url);
    await typeInto(browser, byTestId(browser, "settings-server-token"), "not-the-token-0123456789");
    await byTestId(browser, "settings-save-server").click();
    await browser.waitUntil(async () => (await byTestId(browser, "settings-server-token").getValue()) === "", {
      timeout: 5_000,
      timeoutMsg: "the server was not saved again",
    });
    await byTestId(browser, "settings-server").$('[data-testid="settings-check-server"]').click();
    await browser.waitUntil(
      async () => /refuses the token \(401\)/.test(await byTestId(browser, "settings-server").getText()),
      { timeout: 15_000, timeoutMsg: "the wrong token was not named" },
    );
    // Removed: other tests see no servers.
    await byTestId(browser, "settings-server").$(".icon-button").click();
    await waitUntilGone(browser, "settings-server");
  } finally {
    server.kill();
  }
});
