// End-to-end tests of how the real Weft app reads: contrast under the mouse and in the dark
// theme, text sizes, what a pinned node shows, banners that leave the canvas where it is, the
// minimap giving way, and the approval form's edges (a rejection with a required field empty,
// a decider nobody named). Each test opens its own flow, so any one runs alone
// (WEFT_E2E_FILE=look.test.mjs WEFT_E2E_NAME=minimap bash tests/e2e/run.sh).
// Screenshots are named look-*.png.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import {
  APP,
  ROOT,
  TMP,
  accessibilityProblems,
  byTestId,
  canvasZoom,
  contrastOf,
  drag,
  inboxItem,
  looks,
  node,
  openApp,
  openFile,
  promptReady,
  readTestId,
  setTheme,
  shot,
  standsStill,
  typeInto,
  waitForRunStatus,
  waitForStatus,
  waitUntilGone,
} from "./harness.mjs";

/** WCAG's least contrast for text (AA, normal size). */
const READABLE = 4.5;
/** The least zoom a flow is fitted at, its text still readable (READABLE_FIT_ZOOM in ui/src/viewport.ts). */
const READABLE_ZOOM = 0.75;
const weft = path.join(path.dirname(APP), "weft");
const formFile = path.join(TMP, "look-form.json");
const approvalFile = path.join(TMP, "look-approval.json");

let browser;

before(async () => {
  copyFileSync(path.join(ROOT, "tests/e2e/flows/form.json"), formFile);
  copyFileSync(path.join(ROOT, "tests/e2e/flows/approval.json"), approvalFile);
  browser = await openApp();
});

after(async () => {
  await browser?.deleteSession();
});

async function selectNode(nodeId) {
  await standsStill(browser, `node-${nodeId}`);
  await node(browser, nodeId).click();
  await byTestId(browser, "tab-inspector").click();
}

/** Runs `flowFile` with the `weft` command until it pauses; its run id. */
function pausedByWeft(flowFile) {
  try {
    execFileSync(weft, ["run", flowFile, "--db", process.env.WEFT_DB], { stdio: ["ignore", "pipe", "pipe"] });
  } catch (error) {
    assert.equal(error.status, 3, `weft run pauses: ${error.stderr}`);
    return error.stdout.toString().trim();
  }
  throw new Error("weft run did not pause");
}

function shownByWeft(runId) {
  return JSON.parse(execFileSync(weft, ["show", runId, "--db", process.env.WEFT_DB, "--json"]).toString()).run;
}

/** Moves the mouse onto the element with data-testid `id` once it stands still (the view may
 *  still be gliding to a prompt), and waits until it is hovered. */
async function hover(id) {
  await standsStill(browser, id);
  await byTestId(browser, id).moveTo();
  await browser.waitUntil(
    () => browser.execute((testId) => document.querySelector(`[data-testid="${testId}"]`)?.matches(":hover") ?? false, id),
    { timeout: 3_000, timeoutMsg: `${id} is not under the mouse` },
  );
}

/** Whether the whole placeholder of the input or textarea `id` shows: a copy of it holding the
 *  placeholder as its text does not scroll. */
function placeholderFits(id) {
  return browser.execute((testId) => {
    const field = document.querySelector(`[data-testid="${testId}"]`);
    const copy = field.cloneNode(false);
    copy.removeAttribute("data-testid");
    field.after(copy);
    copy.value = field.placeholder;
    const fits = copy.scrollWidth <= copy.clientWidth + 1 && copy.scrollHeight <= copy.clientHeight + 1;
    const seen = { placeholder: field.placeholder, scrollWidth: copy.scrollWidth, clientWidth: copy.clientWidth, scrollHeight: copy.scrollHeight, clientHeight: copy.clientHeight };
    copy.remove();
    return { fits, ...seen };
  }, id);
}

/** Writes a two-node flow to FILE (in the scratch folder), opens it and runs it for Ada, then
 *  Bob: the two run ids. */
async function greetTwice(file) {
  const flowFile = path.join(TMP, file);
  const at = (x) => ({ x, y: 0 });
  writeFileSync(
    flowFile,
    JSON.stringify({
      version: 1,
      name: "Greeting",
      nodes: [
        { id: "start", type: "start", position: at(0), data: {} },
        { id: "greet", type: "template", position: at(260), data: { template: "Hello {{ PREVIOUS_OUTPUT }}, your refund of 40 EUR is on its way" } },
      ],
      edges: [{ id: "e1", source: "start", target: "greet" }],
    }),
  );
  await openFile(browser, flowFile);
  await node(browser, "greet").waitForExist();
  const runIds = [];
  for (const name of ["Ada", "Bob"]) {
    await typeInto(browser, byTestId(browser, "run-input"), name);
    await byTestId(browser, "run").click();
    await waitForRunStatus(browser, "completed");
    await waitForStatus(browser, "greet", "done");
    runIds.push(await readTestId(browser, "log", "data-run-id"));
  }
  return runIds;
}

test("Reject needs no required answer: a run rejected from the inbox with its required field empty goes the reject way", async () => {
  const runId = pausedByWeft(formFile);
  // `tone` is required, and left empty.
  await byTestId(browser, "tab-inbox").click();
  let item;
  await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, {
    timeout: 10_000,
    timeoutMsg: "the run paused by weft is not in the inbox",
  });
  await typeInto(browser, item.$('[data-testid="inbox-approval-note"]'), "not now");
  await item.$('[data-testid="inbox-reject"]').click();
  await browser.waitUntil(async () => (await inboxItem(browser, runId)) === undefined, {
    timeout: 10_000,
    timeoutMsg: "the rejected run stays in the inbox (was the empty required field refused?)",
  });
  await browser.waitUntil(() => shownByWeft(runId).summary.status === "completed", {
    timeout: 10_000,
    timeoutMsg: "the rejected run did not complete",
  });
  assert.equal(shownByWeft(runId).result, "Dropped: not now");
});

test("an approval decided with no name set names its decider unknown, never None", async () => {
  await byTestId(browser, "tab-settings").click();
  await typeInto(browser, byTestId(browser, "settings-user-name"), "");
  await byTestId(browser, "settings-save-user-name").click();
  const runId = pausedByWeft(formFile);
  await byTestId(browser, "tab-inbox").click();
  let item;
  await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, {
    timeout: 10_000,
    timeoutMsg: "the run paused by weft is not in the inbox",
  });
  await item.$('[data-testid="inbox-approval-field-tone"]').selectByAttribute("value", "warm");
  await item.$('[data-testid="inbox-approve"]').click();
  await browser.waitUntil(() => shownByWeft(runId).summary.status === "completed", {
    timeout: 10_000,
    timeoutMsg: "the approved run did not complete",
  });
  assert.equal(shownByWeft(runId).result, "warm: Refund 40 EUR to Ada (by unknown)");
});

test("Approve, Reject and their twins in the side panel stay readable under the mouse, in both themes", async () => {
  await openFile(browser, approvalFile);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "run").click();
  await waitForStatus(browser, "review", "paused");
  await promptReady(browser, "approval-prompt");
  await byTestId(browser, "paused-card").waitForDisplayed({ timeout: 5_000 });
  for (const theme of ["light", "dark"]) {
    await setTheme(browser, theme);
    for (const id of ["approve", "reject", "panel-approve", "panel-reject"]) {
      await hover(id);
      const seen = await looks(browser, `[data-testid="${id}"]`);
      console.log(`# ${theme} ${id} under the mouse: ${seen.color} on ${seen.background}, ${seen.contrast}:1`);
      assert.ok(
        seen.contrast >= READABLE,
        `${id} under the mouse in the ${theme} theme: ${seen.color} on ${seen.background} is ${seen.contrast}:1`,
      );
    }
    await hover("approve");
    await shot(browser, `look-01-approve-under-the-mouse-${theme}`);
  }
  await setTheme(browser, "light");
  await byTestId(browser, "approve").click();
  await waitForRunStatus(browser, "completed");
});

test("the dark theme: the kind's description and the run chips read clearly", async () => {
  await setTheme(browser, "dark");
  await selectNode("review");
  const help = await looks(browser, '[data-testid="kind-help"]');
  console.log(`# dark kind-help: ${help.color} on ${help.background}, ${help.contrast}:1`);
  assert.ok(help.contrast >= READABLE, `the kind's description: ${help.color} on ${help.background} is ${help.contrast}:1`);
  await shot(browser, "look-02-dark-inspector");

  await byTestId(browser, "tab-history").click();
  await byTestId(browser, "history-row").waitForExist({ timeout: 5_000 });
  const chips = await browser.execute(() => document.querySelectorAll(".run-status-chip").length);
  assert.ok(chips > 0, "History shows the runs' status chips");
  for (let i = 0; i < chips; i++) {
    const chip = await looks(browser, ".run-status-chip", i);
    assert.ok(chip.contrast >= READABLE, `a run's status chip: ${chip.color} on ${chip.background} is ${chip.contrast}:1`);
  }
  await shot(browser, "look-02-dark-history");
  await setTheme(browser, "light");
});

test("a pinned agent shows its pinned output on its body, under a badge that stands out", async () => {
  const file = path.join(TMP, "look-pinned.json");
  const at = (x) => ({ x, y: 0 });
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      name: "Pinned",
      nodes: [
        { id: "start", type: "start", position: at(0), data: {} },
        { id: "poet", type: "agent", position: at(260), data: { label: "Poet", model: "gpt-4o-mini", userPrompt: "A poem" } },
        { id: "out", type: "output", position: at(560), data: {} },
      ],
      edges: [
        { id: "e1", source: "start", target: "poet" },
        { id: "e2", source: "poet", target: "out" },
      ],
    }),
  );
  writeFileSync(file.replace(/\.json$/, ".pins.json"), JSON.stringify({ pins: { poet: { output: "A pinned poem" } } }));
  await openFile(browser, file);
  await byTestId(browser, "pin-poet").waitForExist({ timeout: 5_000 });
  await byTestId(browser, "run").click();
  await waitForRunStatus(browser, "completed");
  await waitForStatus(browser, "poet", "done");
  assert.equal(await readTestId(browser, "node-stream-poet", "data-empty"), "false", "the body is not empty");
  assert.equal(await readTestId(browser, "node-stream-poet"), "A pinned poem");

  // The badge: readable, and its fill stands out from the node (3:1, as WCAG asks of a
  // control's parts).
  const badge = await looks(browser, '[data-testid="pin-poet"]');
  const body = await looks(browser, '[data-testid="node-poet"]');
  const fill = contrastOf(badge.background, body.background);
  console.log(`# pinned badge: ${badge.color} on ${badge.background} (${badge.contrast}:1), fill ${fill}:1 against the node, ${badge.fontSize} px`);
  assert.ok(badge.contrast >= READABLE, `the badge's text: ${badge.contrast}:1`);
  assert.ok(fill >= 3, `the badge's fill against the node: ${badge.background} on ${body.background} is ${fill}:1`);
  assert.ok(badge.fontSize >= 11, `the badge's text is ${badge.fontSize} px`);
  await shot(browser, "look-03-pinned-agent");
});

test("two banners at once leave the canvas where it is", async () => {
  await byTestId(browser, "file-new").click();
  const discard = byTestId(browser, "discard-confirm");
  if (await discard.isExisting()) await discard.click();
  assert.equal(await byTestId(browser, "error-banner").isExisting(), false, "no error shows yet");
  assert.equal(await byTestId(browser, "paused-banner").isExisting(), false, "no run waits yet");
  const canvasBox = () => browser.execute(() => document.querySelector('[data-testid="canvas"]').getBoundingClientRect().toJSON());
  const before = await canvasBox();

  // A run paused by `weft`: History reads it, and the banner asks for it.
  const runId = pausedByWeft(formFile);
  await byTestId(browser, "tab-history").click();
  await byTestId(browser, "paused-banner").waitForDisplayed({ timeout: 10_000 });
  // A file that is not there: an error banner too.
  await byTestId(browser, "file-open").click();
  const input = byTestId(browser, "path-input");
  await input.waitForDisplayed();
  await typeInto(browser, input, path.join(TMP, "no-such-flow.json"));
  await byTestId(browser, "path-confirm").click();
  await byTestId(browser, "error-banner").waitForDisplayed({ timeout: 5_000 });
  await byTestId(browser, "path-cancel").click();
  await waitUntilGone(browser, "path-dialog");

  const after = await canvasBox();
  console.log(`# canvas top ${before.top} → ${after.top}, height ${before.height} → ${after.height}`);
  assert.equal(after.top, before.top, "the canvas did not move down");
  assert.equal(after.height, before.height, "the canvas kept its height");
  for (const id of ["error-banner", "paused-banner"]) {
    const box = await browser.execute((testId) => document.querySelector(`[data-testid="${testId}"]`).getBoundingClientRect().toJSON(), id);
    assert.ok(box.height <= 40, `${id} is one compact row (${box.height} px)`);
    assert.ok(box.top >= after.top && box.left >= after.left && box.right <= after.right, `${id} floats over the canvas`);
  }
  await shot(browser, "look-04-two-banners");

  // The run goes on (rejected, from the inbox), the error goes.
  await byTestId(browser, "tab-inbox").click();
  let item;
  await browser.waitUntil(async () => (item = await inboxItem(browser, runId)) !== undefined, { timeout: 10_000 });
  await item.$('[data-testid="inbox-reject"]').click();
  await byTestId(browser, "error-dismiss").click();
  await waitUntilGone(browser, "error-banner");
});

test("node text and prompts read at the zoom they are shown at; placeholders show whole", async () => {
  await openFile(browser, formFile);
  await node(browser, "review").waitForExist();
  const fitted = await canvasZoom(browser);
  const summaries = await browser.execute(() =>
    [...document.querySelectorAll(".node-summary")].map((element) => parseFloat(getComputedStyle(element).fontSize)),
  );
  console.log(`# fitted zoom ${fitted}, summaries ${summaries} px`);
  assert.ok(summaries.length > 0, "the nodes show summaries");
  for (const size of summaries) assert.ok(size >= 13, `a node's summary is ${size} px`);

  // Palette search: its whole placeholder shows.
  const search = await placeholderFits("palette-search");
  assert.ok(search.fits, `the palette's search placeholder is cut: ${JSON.stringify(search)}`);

  // A breakpoint after the start: the value box shows its whole placeholder; Continue reads
  // under the mouse.
  await selectNode("start");
  await byTestId(browser, "breakpoint-when").selectByAttribute("value", "after");
  await byTestId(browser, "run").click();
  await promptReady(browser, "breakpoint-prompt", 10_000);
  const value = await placeholderFits("breakpoint-value");
  assert.ok(value.fits, `the breakpoint's value box cuts its placeholder: ${JSON.stringify(value)}`);
  await hover("breakpoint-continue");
  const button = await looks(browser, '[data-testid="breakpoint-continue"]');
  assert.ok(button.contrast >= READABLE, `Continue under the mouse: ${button.color} on ${button.background} is ${button.contrast}:1`);
  await shot(browser, "look-05-breakpoint");
  await byTestId(browser, "breakpoint-continue").click();

  // The approval's prompt on the node, at the zoom it is shown at.
  await waitForStatus(browser, "review", "paused");
  await promptReady(browser, "approval-prompt");
  await browser.pause(400); // the view glides to the prompt
  const zoom = await canvasZoom(browser);
  // The message a person decides on reads larger than the form around it.
  const least = { '[data-testid="approval-message"]': 13, '[data-testid="approval-prompt"] .field-label': 12, '[data-testid="approval-note"]': 12 };
  for (const [selector, size] of Object.entries(least)) {
    const text = await looks(browser, selector);
    const shown = Math.round(text.fontSize * zoom * 10) / 10;
    console.log(`# ${selector}: ${text.fontSize} px at zoom ${zoom} = ${shown} px`);
    assert.ok(shown >= size, `${selector} shows at ${shown} px`);
  }
  await shot(browser, "look-05-approval-text");
  await byTestId(browser, "panel-reject").click();
  await waitForRunStatus(browser, "completed");
  await selectNode("start");
  await byTestId(browser, "breakpoint-when").selectByAttribute("value", "none");
});

/** The zoom, and the nodes drawn, with those not wholly inside the canvas. */
function whatTheCanvasShows() {
  return browser.execute(() => {
    const pane = document.querySelector('[data-testid="canvas"]').getBoundingClientRect();
    const scale = /scale\(([0-9.]+)\)/.exec(document.querySelector(".react-flow__viewport")?.style.transform ?? "");
    const nodes = [...document.querySelectorAll(".react-flow__node")];
    const outside = nodes
      .filter((element) => {
        const box = element.getBoundingClientRect();
        return box.width === 0 || box.left < pane.left || box.right > pane.right || box.top < pane.top || box.bottom > pane.bottom;
      })
      .map((element) => element.dataset.id);
    return { zoom: scale ? Number(scale[1]) : null, drawn: nodes.length, outside, pane: { width: pane.width, height: pane.height } };
  });
}

test("every example flow shows whole at a readable zoom in a 1280×800 window with both side panels open", async () => {
  const size = await browser.execute(() => ({ width: window.innerWidth, height: window.innerHeight }));
  assert.deepEqual(size, { width: 1280, height: 800 }, "the window is 1280×800");
  // As a newcomer sees the window: the palette and the side panel open, the log not yet.
  if (await byTestId(browser, "palette-expand").isExisting()) await byTestId(browser, "palette-expand").click();
  if (await byTestId(browser, "side-expand").isExisting()) await byTestId(browser, "side-expand").click();
  if ((await byTestId(browser, "log").getAttribute("data-collapsed")) === "false") await byTestId(browser, "log-toggle").click();
  // flows/triage.json first: the example the README opens, whose point is its approval step.
  const examples = readdirSync(path.join(ROOT, "flows"))
    .filter((name) => name.endsWith(".json") && !name.endsWith(".tests.json"))
    .sort((a, b) => (b === "triage.json") - (a === "triage.json") || a.localeCompare(b));
  const failures = [];
  for (const name of examples) {
    const file = path.join(TMP, `example-${name}`);
    copyFileSync(path.join(ROOT, "flows", name), file);
    const count = JSON.parse(readFileSync(file, "utf8")).nodes.length;
    await openFile(browser, file);
    let shown;
    const fits = await browser
      .waitUntil(
        async () => {
          shown = await whatTheCanvasShows();
          return shown.drawn === count && shown.zoom >= READABLE_ZOOM && shown.outside.length === 0;
        },
        { timeout: 5_000 },
      )
      .then(() => true, () => false);
    if (name === "triage.json") await shot(browser, fits ? "look-06-triage-fits" : "failed-look-06-triage");
    if (!fits) failures.push(`${name}: at zoom ${shown.zoom} in a ${shown.pane.width}×${shown.pane.height} canvas, ${shown.outside.join(", ")} not wholly in view`);
    // A node's text reads at the zoom the flow is fitted at: 11 px or more on screen. (Read
    // with the zoom at one moment; the text follows a new zoom a frame later.)
    let small = [];
    await browser
      .waitUntil(
        async () => {
          const text = await browser.execute(() => {
            const scale = /scale\(([0-9.]+)\)/.exec(document.querySelector(".react-flow__viewport")?.style.transform ?? "");
            const sizes = {};
            for (const selector of [".node-label", ".node-kind", ".node-summary"]) {
              for (const element of document.querySelectorAll(`.react-flow__node ${selector}`)) {
                sizes[selector] = Math.min(sizes[selector] ?? Infinity, parseFloat(getComputedStyle(element).fontSize));
              }
            }
            return { zoom: scale ? Number(scale[1]) : 1, sizes };
          });
          small = Object.entries(text.sizes)
            .map(([selector, size]) => [selector, size, Math.round(size * text.zoom * 10) / 10, text.zoom])
            .filter(([, , onScreen]) => onScreen < 11);
          return small.length === 0;
        },
        { timeout: 3_000 },
      )
      .catch(() => {});
    for (const [selector, size, onScreen, zoom] of small) failures.push(`${name}: ${selector} shows at ${onScreen} px (${size} px at zoom ${zoom})`);
  }
  assert.deepEqual(failures, [], "flows that do not fit");
});

test("a flow too big to show whole is drawn at the zoom it is fitted at, not laid out twice", async () => {
  // 400 nodes in rows of 40, 220 px apart: far wider than the canvas at the readable zoom.
  const nodes = [{ id: "start", type: "start", position: { x: 0, y: 0 }, data: {} }];
  for (let i = 1; i < 400; i++) {
    nodes.push({ id: `t${i}`, type: "template", position: { x: (i % 40) * 220, y: Math.floor(i / 40) * 140 }, data: { template: "{{ PREVIOUS_OUTPUT }}" } });
  }
  const file = path.join(TMP, "big-grid.json");
  writeFileSync(file, JSON.stringify({ version: 1, name: "Big grid", nodes, edges: [] }));
  // From a new flow (at natural size), so that the text is sized for another zoom before.
  await byTestId(browser, "file-new").click();
  if (await byTestId(browser, "discard-confirm").isExisting()) await byTestId(browser, "discard-confirm").click();
  // The text size (the zoom step, styles.css) at the moment the flow's nodes enter the page.
  await browser.execute(() => {
    window.weftFirstStep = null;
    const observer = new MutationObserver(() => {
      if (document.querySelector('[data-testid="node-t399"]')) {
        window.weftFirstStep = document.querySelector('[data-testid="canvas"]')?.style.getPropertyValue("--canvas-zoom") ?? "";
        observer.disconnect();
      }
    });
    observer.observe(document.body, { childList: true, subtree: true });
  });
  await openFile(browser, file);
  await node(browser, "t399").waitForExist({ timeout: 10_000 });
  await browser.waitUntil(async () => (await canvasZoom(browser)) === READABLE_ZOOM, {
    timeout: 5_000,
    timeoutMsg: "the big flow is not fitted at the readable zoom",
  });
  const firstStep = await browser.execute(() => window.weftFirstStep);
  assert.equal(firstStep, String(READABLE_ZOOM), "the nodes were first laid out for another zoom than the fitted one");
});

test("the minimap gives way when the log is raised, and comes back with the room", async () => {
  await openFile(browser, formFile);
  await node(browser, "review").waitForExist();
  await byTestId(browser, "rf__minimap").waitForExist({ timeout: 5_000 });
  if ((await byTestId(browser, "log").getAttribute("data-collapsed")) === "true") await byTestId(browser, "log-toggle").click();
  const splitter = byTestId(browser, "log-splitter");
  await splitter.waitForDisplayed();
  const where = await splitter.getLocation();
  await drag(browser, splitter, { x: Math.round(where.x + 200), y: Math.round(where.y - 260) });
  const canvas = await byTestId(browser, "canvas").getSize();
  console.log(`# canvas ${canvas.width}×${canvas.height} with the log raised`);
  await waitUntilGone(browser, "rf__minimap");
  assert.equal(await readTestId(browser, "canvas", "data-minimap"), "no-room");
  await shot(browser, "look-06-minimap-gives-way");

  const raised = await splitter.getLocation();
  await drag(browser, splitter, { x: Math.round(raised.x + 200), y: Math.round(raised.y + 260) });
  await byTestId(browser, "rf__minimap").waitForExist({ timeout: 5_000 });
  await byTestId(browser, "log-toggle").click();
});

test("Compare takes the canvas's room, and the earlier run is A whichever was checked first", async () => {
  const [earlier, later] = await greetTwice("look-compare.json");

  // Checked top-down in History (newest first): the later run first.
  await byTestId(browser, "tab-history").click();
  await browser.waitUntil(async () => (await readTestId(browser, "history-row", "data-run-id")) === later, {
    timeout: 5_000,
    timeoutMsg: "the later run is not at the top of History",
  });
  const checks = await browser.$$('[data-testid="history-check"]');
  await checks[0].click();
  await checks[1].click();
  await byTestId(browser, "history-compare").click();
  await byTestId(browser, "compare").waitForDisplayed({ timeout: 5_000 });
  assert.equal(await readTestId(browser, "compare-a", "data-run-id"), earlier, "A is the earlier run");
  assert.equal(await readTestId(browser, "compare-b", "data-run-id"), later);
  assert.match(await readTestId(browser, "compare-a"), /no LLM calls/);

  const box = (selector) => browser.execute((query) => document.querySelector(query).getBoundingClientRect().toJSON(), selector);
  const compare = await box('[data-testid="compare"]');
  const canvas = await box('[data-testid="canvas"]');
  console.log(`# compare ${compare.width}×${compare.height} at ${compare.left}, the canvas ${canvas.width}×${canvas.height} at ${canvas.left}`);
  assert.ok(compare.width >= canvas.width - 1 && compare.left <= canvas.left + 1, "Compare takes the canvas's width");
  // The header, each side's line and each changed line of output read on one line (under
  // two lines' height), not wrapped word by word.
  for (const selector of [".compare-head strong", '[data-testid="compare-a"]', '[data-testid="compare-b"]', ".diff-removed", ".diff-added"]) {
    const { height, fontSize } = await browser.execute((query) => {
      const element = document.querySelector(query);
      return { height: element.getBoundingClientRect().height, fontSize: parseFloat(getComputedStyle(element).fontSize) };
    }, selector);
    console.log(`# ${selector}: ${height} px tall at ${fontSize} px`);
    assert.ok(height < 2 * fontSize * 1.2, `${selector} wraps: ${height} px tall at ${fontSize} px`);
  }
  await shot(browser, "look-07-compare");
  await byTestId(browser, "compare-close").click();
  await waitUntilGone(browser, "compare");
});

test("axe-core finds no serious or critical problem on the main screens, in both themes", async () => {
  const testsFile = approvalFile.replace(/\.json$/, ".tests.json");
  copyFileSync(path.join(ROOT, "tests/e2e/flows/approval.tests.json"), testsFile);
  const found = [];
  const check = async (screen) => {
    const theme = await browser.$(".app").getAttribute("data-theme");
    for (const problem of await accessibilityProblems(browser)) found.push(`${theme} ${screen}: ${problem}`);
  };
  for (const theme of ["light", "dark"]) {
    await setTheme(browser, theme);
    await check("Settings");
    // The canvas with a flow, a node in the inspector, the problems.
    await openFile(browser, formFile);
    await node(browser, "review").waitForExist();
    await selectNode("review");
    await check("canvas and inspector");
    await byTestId(browser, "tab-problems").click();
    await check("Problems");
    // A run waiting at an approval: the prompt on the node and in the side panel, the inbox.
    await byTestId(browser, "run").click();
    await waitForStatus(browser, "review", "paused");
    await promptReady(browser, "approval-prompt");
    await byTestId(browser, "tab-inbox").click();
    await byTestId(browser, "inbox-item").waitForDisplayed({ timeout: 10_000 });
    await check("approval and Inbox");
    await byTestId(browser, "panel-reject").click();
    await waitForRunStatus(browser, "completed");
    // History, a past run shown, Compare.
    await greetTwice(`look-axe-${theme}.json`);
    await byTestId(browser, "tab-history").click();
    await byTestId(browser, "history-row").waitForDisplayed();
    await check("History");
    const checks = await browser.$$('[data-testid="history-check"]');
    await checks[0].click();
    await checks[1].click();
    await byTestId(browser, "history-compare").click();
    await byTestId(browser, "compare").waitForDisplayed({ timeout: 5_000 });
    await check("Compare");
    await byTestId(browser, "compare-close").click();
    await byTestId(browser, "history-row").click();
    await byTestId(browser, "viewing-banner").waitForDisplayed({ timeout: 5_000 });
    await check("a past run");
    await byTestId(browser, "back-to-editing").click();
    // The Tests tab with a passing and a failing case.
    await openFile(browser, approvalFile);
    await node(browser, "writer").waitForExist();
    await byTestId(browser, "tab-tests").click();
    await byTestId(browser, "tests-run-all").click();
    await byTestId(browser, "tests-summary").waitForDisplayed({ timeout: 20_000 });
    await check("Tests");
    await shot(browser, `look-08-checked-${theme}`);
  }
  await setTheme(browser, "light");
  assert.deepEqual(found, [], `axe-core found:\n${found.join("\n")}`);
});

test("the keyboard reaches every control, and each shows where the keyboard is", async () => {
  await openFile(browser, formFile);
  await node(browser, "review").waitForExist();
  await selectNode("review");
  await browser.execute(() => document.activeElement?.blur());
  /** The element with the keyboard's focus: a name for it, and whether its focus shows: an
   *  outline of 2 px or more at 3:1 against what is behind it (WCAG's least for a control's
   *  parts); on an edge, its line in the accent colour. */
  const focused = () =>
    browser.execute(() => {
      const element = document.activeElement;
      if (!element || element === document.body) return null;
      const parse = (text) => {
        const parts = /rgba?\(([^)]*)\)/.exec(text)?.[1].split(/[\s,/]+/).filter(Boolean).map(Number) ?? [0, 0, 0, 0];
        return { rgb: parts.slice(0, 3), alpha: parts.length > 3 ? parts[3] : 1 };
      };
      const over = (top, bottom) => top.rgb.map((value, i) => value * top.alpha + bottom[i] * (1 - top.alpha));
      const behind = (start) => {
        const layers = [];
        for (let at = start; at; at = at.parentElement) {
          const layer = parse(getComputedStyle(at).backgroundColor);
          if (layer.alpha > 0) layers.push(layer);
          if (layer.alpha >= 1) break;
        }
        return layers.reverse().reduce((below, layer) => over(layer, below), [255, 255, 255]);
      };
      const luminance = (rgb) => {
        const [r, g, b] = rgb.map((value) => {
          const v = value / 255;
          return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const contrast = (a, b) => {
        const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
        return (light + 0.05) / (dark + 0.05);
      };
      const named = element.classList.contains("react-flow__node") ? element.firstElementChild : element;
      const name =
        named.getAttribute("data-testid") ??
        element.getAttribute("aria-label") ??
        element.getAttribute("title") ??
        `${element.tagName.toLowerCase()} “${element.textContent.trim().slice(0, 30)}”`;
      if (element.classList.contains("react-flow__edge")) {
        const accent = getComputedStyle(document.querySelector(".app")).getPropertyValue("--accent").trim();
        const rgb = `rgb(${[1, 3, 5].map((i) => parseInt(accent.slice(i, i + 2), 16)).join(", ")})`;
        const line = getComputedStyle(element.querySelector(".react-flow__edge-path"));
        return { name: `edge ${name}`, shown: line.stroke === rgb, how: `stroke ${line.stroke}` };
      }
      const drawn = element.classList.contains("react-flow__node") ? element.firstElementChild : element;
      const style = getComputedStyle(drawn);
      const ground = behind(drawn.parentElement ?? drawn);
      const ratio = contrast(over(parse(style.outlineColor), ground), ground);
      const shown = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2 && ratio >= 3;
      return { name, shown, how: `${style.outlineStyle} ${style.outlineWidth} ${style.outlineColor}, ${ratio.toFixed(2)}:1` };
    });
  const reached = [];
  const unseen = [];
  for (let presses = 0; presses < 250; presses++) {
    await browser.keys(["Tab"]);
    const now = await focused();
    if (!now) continue;
    if (reached.includes(now.name) && now.name === reached[0]) break; // round again
    reached.push(now.name);
    if (!now.shown) unseen.push(`${now.name} (${now.how})`);
  }
  console.log(`# ${reached.length} stops: ${reached.join(", ")}`);
  for (const control of ["file-new", "file-open", "file-save", "run-input", "run", "palette-search", "palette-agent", "node-review", "fit-readable", "minimap-toggle", "tab-inspector", "tab-settings", "field-label", "log-toggle"]) {
    assert.ok(reached.includes(control), `Tab never reaches ${control}`);
  }
  assert.deepEqual(unseen, [], "controls whose focus does not show");

  // Usable by keyboard: a tab opens with Enter.
  for (let presses = 0; presses < 250 && (await focused())?.name !== "tab-settings"; presses++) await browser.keys(["Tab"]);
  await browser.keys(["Enter"]);
  await byTestId(browser, "settings-theme").waitForDisplayed({ timeout: 5_000 });
  await shot(browser, "look-09-keyboard-focus");
});
