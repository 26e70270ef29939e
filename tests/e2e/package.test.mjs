// The installed package's app (/usr/bin/weft-app, from the .deb): it starts, opens a flow and
// runs it to the end. Run by tests/package/test.sh.

import assert from "node:assert/strict";
import { copyFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import { APP, ROOT, TMP, byTestId, node, openApp, openFile, shot, waitForRunStatus, waitForStatus } from "./harness.mjs";

let browser;

before(async () => {
  assert.equal(APP, "/usr/bin/weft-app", "this test drives the installed app");
  browser = await openApp();
});

after(async () => {
  await browser?.deleteSession();
});

test("the installed app opens a flow and runs it", async () => {
  const flow = path.join(TMP, "offline.json");
  copyFileSync(path.join(ROOT, "flows/offline.json"), flow);
  await openFile(browser, flow);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "review", "paused");
  // Answered in the side panel, which stays put: the node's own prompt is shown from the run's
  // events before the run's call returns (its buttons disabled until then), while the canvas
  // may still be moving to the paused node, so a click on it could land on another node.
  await waitForRunStatus(browser, "paused");
  await byTestId(browser, "paused-card").waitForDisplayed({ timeout: 5_000 });
  await byTestId(browser, "panel-approve").waitForEnabled();
  await byTestId(browser, "panel-approve").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "result", "done");
  await shot(browser, "35-installed-package");
});
