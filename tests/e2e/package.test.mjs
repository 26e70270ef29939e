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
  // The node shows its prompt from the run's events, before the run's own call returns; until
  // then its buttons are disabled (the run is busy), and a click on them is lost.
  await waitForRunStatus(browser, "paused");
  await byTestId(browser, "approve").waitForEnabled();
  await byTestId(browser, "approve").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "result", "done");
  await shot(browser, "35-installed-package");
});
