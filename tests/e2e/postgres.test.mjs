// The desktop app with its run store on PostgreSQL (WEFT_DB=postgres://…; run.sh starts a
// throwaway server when WEFT_E2E_POSTGRES=1): a run paused by the `weft` command reaches the
// app's inbox and is decided there; a run started on the canvas pauses, is approved in the side
// panel and completes; `weft` reads both back from the same database.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import {
  APP,
  ROOT,
  TMP,
  byTestId,
  inboxItem,
  node,
  openApp,
  openFile,
  shot,
  typeInto,
  waitForRunStatus,
  waitForStatus,
} from "./harness.mjs";

const weft = path.join(path.dirname(APP), "weft");
const db = process.env.WEFT_DB;
let browser;

before(async () => {
  assert.match(db, /^postgres:\/\//, "run.sh set WEFT_DB to the PostgreSQL server");
  browser = await openApp();
});

after(async () => {
  await browser?.deleteSession();
});

test("on PostgreSQL: a run paused by weft is decided in the inbox, and a run of the canvas is approved in the side panel", async () => {
  const formFile = path.join(TMP, "form.json");
  copyFileSync(path.join(ROOT, "tests/e2e/flows/form.json"), formFile);
  await byTestId(browser, "tab-settings").click();
  await typeInto(browser, byTestId(browser, "settings-user-name"), "Ada PG");
  await byTestId(browser, "settings-save-user-name").click();

  // Paused by the `weft` command in the shared database.
  let runId = "";
  try {
    execFileSync(weft, ["run", formFile, "--db", db], { stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    assert.equal(error.status, 3, `weft run pauses: ${error.stderr}`);
    runId = error.stdout.toString().trim();
  }
  assert.match(runId, /^[0-9a-f-]{36}$/);
  await byTestId(browser, "tab-inbox").click();
  let item;
  await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, {
    timeout: 10_000,
    timeoutMsg: "the run paused by weft is not in the app's inbox",
  });
  await item.$('[data-testid="inbox-approval-field-tone"]').selectByAttribute("value", "warm");
  await item.$('[data-testid="inbox-approve"]').click();
  await browser.waitUntil(async () => (await inboxItem(browser, runId)) === undefined, {
    timeout: 10_000,
    timeoutMsg: "the decided run stays in the inbox",
  });
  const shown = (id) => JSON.parse(execFileSync(weft, ["show", id, "--db", db, "--json"]).toString());
  await browser.waitUntil(() => shown(runId).run.summary.status === "completed", {
    timeout: 10_000,
    timeoutMsg: "the run decided from the inbox did not complete",
  });
  assert.equal(shown(runId).run.result, "warm: Refund 40 EUR to Ada (by Ada PG)");

  // Started on the canvas, approved in the side panel.
  await openFile(browser, formFile);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "paused");
  await byTestId(browser, "paused-card").waitForDisplayed({ timeout: 5_000 });
  await byTestId(browser, "panel-approval-field-tone").selectByAttribute("value", "formal");
  await shot(browser, "36-postgres-side-panel");
  await byTestId(browser, "panel-approve").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "sent", "done");

  // Both runs are in PostgreSQL, as `weft` lists them.
  const runs = JSON.parse(execFileSync(weft, ["runs", "--db", db, "--json"]).toString());
  assert.equal(runs.length, 2, JSON.stringify(runs));
  assert.deepEqual(
    runs.map((run) => run.status),
    ["completed", "completed"],
  );
  const canvasRun = runs.find((run) => run.id !== runId);
  assert.equal(shown(canvasRun.id).run.result, "formal: Refund 40 EUR to Ada (by Ada PG)");
});
