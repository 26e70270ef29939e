// Helpers for driving the real Weft app through WebDriver (tauri-driver + WebKitWebDriver).
// run.sh starts the display, the scripted LLM server and tauri-driver, and exports where
// the app keeps its files; these helpers open sessions and act like a person would.

import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { remote } from "webdriverio";

const here = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(here, "../..");
export const APP = process.env.WEFT_APP_BINARY;
/** A scratch folder for this test run (flow files, the run store, settings). */
export const TMP = process.env.WEFT_E2E_TMP;
/** Where screenshots go: outside the repository (run.sh names a folder in the build's target),
 *  so a test run changes no tracked file. */
export const SHOTS = process.env.WEFT_E2E_SCREENSHOTS ?? path.join(TMP ?? here, "screenshots");

if (!APP || !TMP) {
  throw new Error("run the end-to-end tests with tests/e2e/run.sh");
}

/** Starts the app (or `application`, with `args`) in a new WebDriver session and waits until
 * `readyTestId` shows (the palette unless the test has collapsed it), looking every `interval` ms. */
export async function openApp(readyTestId = "palette-agent", { application = APP, args = [], interval } = {}) {
  const browser = await remote({
    hostname: "127.0.0.1",
    port: Number(process.env.TAURI_DRIVER_PORT ?? 4444),
    logLevel: "warn",
    connectionRetryTimeout: 60_000,
    capabilities: {
      "tauri:options": { application, args },
      "wdio:enforceWebDriverClassic": true,
    },
  });
  await byTestId(browser, readyTestId).waitForDisplayed({ timeout: 30_000, interval });
  return browser;
}

export function byTestId(browser, id) {
  return browser.$(`[data-testid="${id}"]`);
}

export function allByTestId(browser, id) {
  return browser.$$(`[data-testid="${id}"]`);
}

/** Saves a screenshot of the app window as NAME.png in SHOTS. */
export async function shot(browser, name) {
  mkdirSync(SHOTS, { recursive: true });
  await browser.saveScreenshot(path.join(SHOTS, `${name}.png`));
}

/** The canvas node element of `nodeId` (the generic node's root, which carries data-status). */
export function node(browser, nodeId) {
  return byTestId(browser, `node-${nodeId}`);
}

/** Drops `paths` onto the app's window the way a file manager would: drags them with xdotool
 *  from a window of their own (drag-files.py, Debian's GTK bindings for the system Python)
 *  across the window's canvas, and waits until the drag has ended. */
export async function dropFiles(paths) {
  const source = spawn("/usr/bin/python3", [path.join(here, "drag-files.py"), "1100", "620", ...paths], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let said = "";
  source.stdout.on("data", (chunk) => (said += chunk));
  const saying = async (word) => {
    for (let waited = 0; !said.includes(word); waited += 20) {
      if (waited > 10_000) throw new Error(`the window to drag files from never said "${word}" (it said "${said}")`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  try {
    await saying("ready");
    const pointer = (...args) => execFileSync("xdotool", args.map(String));
    pointer("mousemove", 1180, 700);
    pointer("mousedown", 1);
    // GTK starts a drag once the pointer has moved a few pixels with the button down; the
    // window under the pointer then hears of it step by step, as under a hand.
    for (const [x, y] of [[1170, 690], [1100, 620], [900, 500], [700, 400], [500, 300]]) {
      pointer("mousemove", x, y);
      await new Promise((resolve) => setTimeout(resolve, 120));
    }
    pointer("mouseup", 1);
    await saying("ended");
    if (said.includes("failed")) throw new Error(`nothing on the window took the files dragged onto it (${paths.join(", ")})`);
  } finally {
    source.kill();
  }
}

/** Waits until the element with data-testid `id` stands still on screen: the view glides to a
 *  prompt, and back once it is answered, and a click meanwhile can land beside its target. */
export async function standsStill(browser, id, timeout = 3_000) {
  const where = () =>
    browser.execute((testId) => JSON.stringify(document.querySelector(`[data-testid="${testId}"]`)?.getBoundingClientRect()), id);
  let last = null;
  await browser.waitUntil(
    async () => {
      const now = await where();
      const still = now === last;
      last = now;
      return still;
    },
    { timeout, interval: 200, timeoutMsg: `${id} does not stand still` },
  );
}

/** Waits until the prompt with data-testid `id` (an approval's, a breakpoint's) shows and the
 *  view has finished gliding to it, so that what is clicked or typed next lands in it. */
export async function promptReady(browser, id, timeout = 5_000) {
  await byTestId(browser, id).waitForDisplayed({ timeout });
  await standsStill(browser, id);
}

/** Reads an attribute (or, with attribute null, the text) of the element with data-testid
 *  `id` inside the page, or null when there is none: a poll that cannot hit a stale element. */
export function readTestId(browser, id, attribute = null) {
  return browser.execute(
    (testId, name) => {
      const element = document.querySelector(`[data-testid="${testId}"]`);
      if (!element) return null;
      return name === null ? element.textContent.trim() : element.getAttribute(name);
    },
    id,
    attribute,
  );
}

/** The inbox item of run `runId`, if the inbox lists it. */
export async function inboxItem(browser, runId) {
  for (const candidate of await allByTestId(browser, "inbox-item")) {
    if ((await candidate.getAttribute("data-run-id")) === runId) return candidate;
  }
  return undefined;
}

export async function waitForStatus(browser, nodeId, status, timeout = 20_000) {
  let seen = null;
  await browser.waitUntil(
    async () => {
      seen = await readTestId(browser, `node-${nodeId}`, "data-status");
      return seen === status;
    },
    { timeout, timeoutMsg: `node ${nodeId} did not become ${status} (it is ${seen})` },
  );
}

export async function waitForRunStatus(browser, status, timeout = 20_000) {
  let seen = null;
  try {
    await browser.waitUntil(
      async () => {
        seen = await readTestId(browser, "run-status");
        return seen === status;
      },
      { timeout, timeoutMsg: `the run did not become ${status} (it shows "${seen}")` },
    );
  } catch (error) {
    throw new Error(`${error.message}\n${await whatIsShown(browser, `run-not-${status}`)}`);
  }
}

/** For a failure's message: a screenshot of the window (failed-NAME.png beside the others)
 *  and the start of the page's text, so a failure that does not reproduce can be read. */
export async function whatIsShown(browser, name) {
  try {
    await browser.saveScreenshot(path.join(SHOTS, `failed-${name}.png`));
    const text = await browser.execute(() => document.body?.innerText ?? "(no body)");
    return `the window showed (${SHOTS}/failed-${name}.png): ${String(text).slice(0, 600)}`;
  } catch (error) {
    return `the window could not be read: ${error.message}`;
  }
}

/** Presses the mouse on `from`, moves in steps to `to` (an element, or {x, y} in the
 *  viewport), and releases it: a pointer drag as a person makes it. */
export async function drag(browser, from, to) {
  const source = await from.getLocation();
  const size = await from.getSize();
  const start = { x: Math.round(source.x + size.width / 2), y: Math.round(source.y + size.height / 2) };
  let end;
  if (typeof to.getLocation === "function") {
    const location = await to.getLocation();
    const targetSize = await to.getSize();
    end = {
      x: Math.round(location.x + targetSize.width / 2),
      y: Math.round(location.y + targetSize.height / 2),
    };
  } else {
    end = to;
  }
  const steps = 6;
  let chain = browser
    .action("pointer", { parameters: { pointerType: "mouse" } })
    .move({ x: start.x, y: start.y, origin: "viewport" })
    .down({ button: 0 })
    .pause(50);
  for (let i = 1; i <= steps; i++) {
    chain = chain.move({
      x: Math.round(start.x + ((end.x - start.x) * i) / steps),
      y: Math.round(start.y + ((end.y - start.y) * i) / steps),
      origin: "viewport",
      duration: 40,
    });
  }
  await chain.pause(50).up({ button: 0 }).perform();
}

/** Drags a kind from the palette onto the canvas at (x, y) in the window. */
export async function dropKind(browser, kind, x, y) {
  await drag(browser, byTestId(browser, `palette-${kind}`), { x, y });
}

export function handle(browser, nodeId, handleId) {
  return browser.$(`.react-flow__handle[data-nodeid="${nodeId}"][data-handleid="${handleId}"]`);
}

/** Wires `source`'s handle to `target`'s input. */
export async function connect(browser, source, sourceHandle, target) {
  await viewSettled(browser);
  await drag(browser, handle(browser, source, sourceHandle), handle(browser, target, "input"));
}

/** Waits until the canvas's view has stopped moving (it glides to a node just added): a drag
 *  begun meanwhile lets go where the handle was, not where it is, and makes no edge. */
async function viewSettled(browser) {
  let last = null;
  await browser.waitUntil(
    async () => {
      const now = await browser.execute(() => document.querySelector(".react-flow__viewport")?.style.transform ?? "");
      const steady = now === last;
      last = now;
      return steady;
    },
    { timeout: 5_000, interval: 100, timeoutMsg: "the canvas's view does not stop moving" },
  );
}

/** Replaces the text of an input or textarea the way typing does. The click that focuses it
 *  is repeated until it has the focus: the view glides to a prompt (and again as the prompt
 *  grows), a click meanwhile lands on the canvas, and Ctrl+A, Backspace there would select and
 *  delete every node. */
export async function typeInto(browser, element, text) {
  await browser.waitUntil(
    async () => {
      await element.click();
      return element.isFocused();
    },
    { timeout: 5_000, interval: 250, timeoutMsg: `a click does not focus ${element.selector}` },
  );
  await browser.keys(["Control", "a"]);
  await browser.keys(["Backspace"]);
  if (text.length > 0) {
    await element.addValue(text);
  }
}

/** Problems listed in the Problems tab, as {severity, code, nodeId, edgeId, text}. */
export async function problems(browser) {
  const rows = await allByTestId(browser, "problem");
  const out = [];
  for (const row of rows) {
    out.push({
      severity: await row.getAttribute("data-severity"),
      code: await row.getAttribute("data-code"),
      nodeId: await row.getAttribute("data-node-id"),
      edgeId: await row.getAttribute("data-edge-id"),
      text: await row.getText(),
    });
  }
  return out;
}

/** Opens a flow file through the Open dialog (discarding unsaved changes when asked). */
export async function openFile(browser, file) {
  await byTestId(browser, "file-open").click();
  const discard = byTestId(browser, "discard-confirm");
  if (await discard.isExisting()) {
    await discard.click();
  }
  const input = byTestId(browser, "path-input");
  await input.waitForDisplayed();
  await typeInto(browser, input, file);
  await byTestId(browser, "path-confirm").click();
  await waitUntilGone(browser, "path-dialog");
}

/** Waits until no element has data-testid `id`. Asked inside the page: WebKitWebDriver can
 *  answer a find with "stale element" while React is removing the element. */
/** Waits until the canvas draws `count` edges: React Flow draws an edge a frame or more after
 * the nodes it joins, so a count read right after a node appears can still be short. */
export async function waitForEdges(browser, count, why, timeout = 5_000) {
  await browser.waitUntil(async () => (await browser.$$(".react-flow__edge")).length === count, {
    timeout,
    timeoutMsg: `${why}: the canvas did not show ${count} edges`,
  });
}

export async function waitUntilGone(browser, id, timeout = 5_000) {
  await browser.waitUntil(
    () => browser.execute((testId) => document.querySelector(`[data-testid="${testId}"]`) === null, id),
    { timeout, timeoutMsg: `${id} did not go away` },
  );
}

/** What a person sees of the element matching `selector`: its text colour, the colour behind
 *  it (the backgrounds of it and its ancestors laid over each other), their contrast ratio as
 *  WCAG counts it, and its font size in CSS pixels. Null when nothing matches. */
export function looks(browser, selector, index = 0) {
  return browser.execute((query, at) => {
    const element = document.querySelectorAll(query)[at];
    if (!element) return null;
    const parse = (text) => {
      const parts = /rgba?\(([^)]*)\)/.exec(text)?.[1].split(/[\s,/]+/).filter(Boolean).map(Number) ?? [0, 0, 0, 0];
      return { rgb: parts.slice(0, 3), alpha: parts.length > 3 ? parts[3] : 1 };
    };
    const over = (top, bottom) => top.rgb.map((value, i) => value * top.alpha + bottom[i] * (1 - top.alpha));
    const layers = [];
    for (let at = element; at; at = at.parentElement) {
      const layer = parse(getComputedStyle(at).backgroundColor);
      if (layer.alpha > 0) layers.push(layer);
      if (layer.alpha >= 1) break;
    }
    let background = [255, 255, 255];
    for (const layer of layers.reverse()) background = over(layer, background);
    const style = getComputedStyle(element);
    const color = over(parse(style.color), background);
    const luminance = (rgb) => {
      const [r, g, b] = rgb.map((value) => {
        const v = value / 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const [light, dark] = [luminance(color), luminance(background)].sort((a, b) => b - a);
    const hex = (rgb) => `#${rgb.map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
    return {
      color: hex(color),
      background: hex(background),
      contrast: Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100,
      fontSize: parseFloat(style.fontSize),
    };
  }, selector, index);
}

/** The contrast ratio of two colours (#rrggbb) as WCAG counts it. */
export function contrastOf(first, second) {
  const luminance = (hex) => {
    const [r, g, b] = [1, 3, 5].map((i) => {
      const v = parseInt(hex.slice(i, i + 2), 16) / 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [light, dark] = [luminance(first), luminance(second)].sort((a, b) => b - a);
  return Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100;
}

/** The zoom of the canvas's view, from xyflow's viewport transform. */
export function canvasZoom(browser) {
  return browser.execute(() => {
    const viewport = document.querySelector(".react-flow__viewport");
    const scale = /scale\(([0-9.]+)\)/.exec(viewport?.style.transform ?? "");
    return scale ? Number(scale[1]) : null;
  });
}

/** Switches the theme in Settings and waits until the window draws it. */
export async function setTheme(browser, theme) {
  await byTestId(browser, "tab-settings").click();
  await byTestId(browser, "settings-theme").selectByAttribute("value", theme);
  await browser.waitUntil(async () => (await browser.$(".app").getAttribute("data-theme")) === theme, {
    timeout: 5_000,
    timeoutMsg: `the ${theme} theme did not apply`,
  });
}

let axeSource = null;

/** What axe-core finds wrong in the window as shown, as serious or critical: one line each,
 *  its rule, impact, help and the elements (CSS selectors) it names. */
export async function accessibilityProblems(browser) {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
  if (!(await browser.execute(() => typeof window.axe !== "undefined"))) await browser.execute(axeSource);
  const found = await browser.executeAsync((done) => {
    window.axe
      .run(document, { resultTypes: ["violations"] })
      .then((results) =>
        done(
          results.violations.map((violation) => ({
            id: violation.id,
            impact: violation.impact,
            help: violation.help,
            targets: violation.nodes.map((node) => node.target.join(" ")),
          })),
        ),
      )
      .catch((error) => done([{ id: "axe-failed", impact: "critical", help: String(error), targets: [] }]));
  });
  return found
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map((violation) => `${violation.id} (${violation.impact}): ${violation.help}: ${violation.targets.slice(0, 6).join(", ")}${violation.targets.length > 6 ? ` and ${violation.targets.length - 6} more` : ""}`);
}
