// The desktop app's benchmark (run through run.sh bench, which starts the display and
// tauri-driver): prints cold start to an interactive canvas, idle memory of the app's
// processes, and the time to open and render a 1,000-node flow.

import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";

import { APP, TMP, byTestId, openApp, typeInto } from "./harness.mjs";

const ROUNDS = Number(process.env.WEFT_BENCH_ROUNDS ?? 3);
const NODES = 1000;

/** Resident memory (kB) of a process, from /proc. */
function rssKb(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** CPU time (s) a process has used, from /proc (its user and system clock ticks, 100 a second
 *  on Linux). */
function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** Every process as [pid, ppid, command]. */
function processes() {
  const out = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const command = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      out.push([Number(entry), ppid, command]);
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

/** The app's process and its descendants (WebKit's web and network processes). */
function appProcesses(binary = APP) {
  const all = processes();
  const name = path.basename(binary).slice(0, 15);
  const roots = all.filter(([, , command]) => command === name).map(([pid]) => pid);
  const family = new Set(roots);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, ppid] of all) {
      if (family.has(ppid) && !family.has(pid)) {
        family.add(pid);
        grew = true;
      }
    }
  }
  return all.filter(([pid]) => family.has(pid));
}

/** A flow of `count` nodes: a start and a chain of templates, laid out in a grid. */
function bigFlow(count) {
  const nodes = [{ id: "start", type: "start", position: { x: 0, y: 0 }, data: { label: "Start" } }];
  const edges = [];
  for (let i = 1; i < count; i++) {
    nodes.push({
      id: `t${i}`,
      type: "template",
      position: { x: (i % 40) * 220, y: Math.floor(i / 40) * 140 },
      data: { label: `Step ${i}`, template: "{{ PREVIOUS_OUTPUT }}" },
    });
    const source = i === 1 ? "start" : `t${i - 1}`;
    edges.push({ id: `e${i}`, source, target: `t${i}` });
  }
  return { version: 1, name: "Big", nodes, edges };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Now, in milliseconds since the epoch (the clock a page's `performance.timeOrigin` uses). */
const now = () => performance.timeOrigin + performance.now();

/** When the page began loading and the moments it marked (ms since the epoch): the canvas marks
 *  its start (ui/src/startup.ts); the bare window's page marks nothing. */
async function pageTimeline(browser) {
  return JSON.parse(
    await browser.execute(() => {
      const marks = Object.fromEntries(
        performance.getEntriesByType("mark").map((mark) => [mark.name, performance.timeOrigin + mark.startTime]),
      );
      const navigation = performance.getEntriesByType("navigation")[0];
      marks.loaded = performance.timeOrigin + (navigation?.domContentLoadedEventEnd ?? 0);
      return JSON.stringify({ origin: performance.timeOrigin, marks });
    }),
  );
}

/** "name +median ms" for each moment, from each round's start. */
function moments(rounds, names) {
  return names
    .map(([key, label]) => {
      const values = rounds.map(({ began, timeline }) =>
        key === "origin" ? timeline.origin - began : (timeline.marks[key] ?? NaN) - began,
      );
      return `${label} +${median(values).toFixed(0)}`;
    })
    .join(", ");
}

const totalKb = (family) => family.reduce((sum, p) => sum + p.kb, 0);

/** The start whose idle memory is the median of all starts': one start's figure moves by a few
 *  percent with what WebKit's processes happen to hold 3 s in. */
const medianIdle = (samples) => [...samples].sort((a, b) => totalKb(a) - totalKb(b))[Math.floor(samples.length / 2)];

/** The lowest and highest idle memory of the starts, in MiB. */
const range = (samples) => {
  const totals = samples.map((family) => totalKb(family) / 1024);
  return `${Math.min(...totals).toFixed(0)}–${Math.max(...totals).toFixed(0)} MiB`;
};

const memory = (family) =>
  family.map((p) => `${p.command} ${(p.kb / 1024).toFixed(0)} MiB`).join(", ");

/** The CPU time the processes used from their start until 3 s after the window showed. */
const cpu = (family) =>
  `${family.reduce((sum, p) => sum + p.cpu, 0).toFixed(2)} s (${family.map((p) => `${p.command} ${p.cpu.toFixed(2)} s`).join(", ")})`;

const bigFile = path.join(TMP, "big.json");
writeFileSync(bigFile, JSON.stringify(bigFlow(NODES), null, 2));

// The floor: a minimal Tauri 2 window with a static page (tests/hello-tauri), built the same way.
const HELLO = process.env.WEFT_HELLO_APP;

/** Ends the session and waits until the program and its WebKit processes are gone (up to 10 s):
 *  the next start does not share the machine with this one's exit. */
async function close(browser, application) {
  await browser.deleteSession();
  for (let waited = 0; waited < 10_000 && appProcesses(application).length > 0; waited += 20) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The WebKit variables (WEBKIT_*, as NAME=VALUE) that `application`'s processes run with. */
function webKitVariables(application) {
  const variables = new Set();
  for (const [pid] of appProcesses(application)) {
    let environ = "";
    try {
      environ = readFileSync(`/proc/${pid}/environ`, "utf8");
    } catch {
      continue; // The process ended while we looked.
    }
    for (const pair of environ.split("\0")) if (pair.startsWith("WEBKIT_")) variables.add(pair);
  }
  return [...variables].sort();
}

/** The memory and CPU time of `application`'s processes now. */
const measure = (application) =>
  appProcesses(application).map(([pid, , command]) => ({ command, kb: rssKb(pid), cpu: cpuSeconds(pid) }));

/** One cold start of `application` (given `args`) until `readyTestId` shows: its time, the
 *  page's timeline, (when `measureIdle`) the memory of its processes, and the WebKit variables
 *  they run with. Leaves the session open.
 *
 *  Memory is taken twice. `firstIdle` is 3 s after the start. Then the page changes once (the
 *  ready element's text is underlined) and `idle` is taken 1 s later. WebKit keeps a second
 *  frame buffer (its shared memory, mapped in both processes, and the renderer's colour and
 *  depth buffers) from a page's second frame on, and frees it only once the window is hidden.
 *  A page a person uses draws a second frame at the first hover; the bare window's static page
 *  never does unless it is changed, so only `idle` compares like with like. */
async function start(application, readyTestId, measureIdle, args = []) {
  const began = now();
  // The palette is drawn from the engine's kinds; the window is looked at every 10 ms.
  const browser = await openApp(readyTestId, { application, args, interval: 10 });
  const took = now() - began;
  const timeline = { began, timeline: await pageTimeline(browser) };
  let idle = null;
  let firstIdle = null;
  if (measureIdle) {
    await browser.pause(3000);
    firstIdle = measure(application);
    await browser.execute((testId) => {
      document.querySelector(`[data-testid="${testId}"]`).style.textDecoration = "underline";
    }, readyTestId);
    await browser.pause(1000);
    idle = measure(application);
  }
  return { browser, took, timeline, idle, firstIdle, webKit: webKitVariables(application) };
}

// One start of each first, not counted: the first start after a build reads WebKit's and the
// program's files from disk, and whichever went first would pay for both. Then they take
// turns, so that a busy moment of the machine falls on all alike.
const webKitOf = {};
for (const [application, readyTestId] of [[APP, "palette-agent"], ...(HELLO ? [[HELLO, "ready"]] : [])]) {
  const first = await start(application, readyTestId, false);
  webKitOf[application] = first.webKit;
  await close(first.browser, application);
}
// What the app set up in WebKit for this machine (src-tauri/src/painting.rs): its WebKit
// variables that the bare window, started by the same driver, does not have.
const helloNames = new Set((webKitOf[HELLO] ?? []).map((pair) => pair.split("=")[0]));
const appChose = webKitOf[APP].filter((pair) => !helloNames.has(pair.split("=")[0]));
// Where it set something (painting with the CPU where there is no GPU), the bare window is
// measured set up the same way too (it sets the NAME=VALUE arguments it is given): the first
// comparison is with what a Tauri window costs by default, the second shows Weft's own cost
// apart from the set-up's.
const HELLO_LIKE_APP = HELLO && appChose.length > 0;
const starts = [];
const timelines = [];
const opens = [];
const idles = [];
const firstIdles = [];
const helloStarts = [];
const helloTimelines = [];
const helloIdles = [];
const helloFirstIdles = [];
const likeStarts = [];
const likeIdles = [];
const likeFirstIdles = [];
for (let round = 0; round < ROUNDS; round++) {
  const app = await start(APP, "palette-agent", true);
  const browser = app.browser;
  starts.push(app.took);
  timelines.push(app.timeline);
  idles.push(app.idle);
  firstIdles.push(app.firstIdle);

  await byTestId(browser, "file-open").click();
  const input = byTestId(browser, "path-input");
  await input.waitForDisplayed();
  await typeInto(browser, input, bigFile);
  const opened = performance.now();
  await byTestId(browser, "path-confirm").click();
  await browser.waitUntil(
    async () =>
      (await browser.execute(() => document.querySelectorAll(".react-flow__node").length)) >= NODES,
    { timeout: 60_000, interval: 20, timeoutMsg: "the 1,000 nodes were not rendered" },
  );
  opens.push(performance.now() - opened);
  await close(browser, APP);

  if (HELLO) {
    const hello = await start(HELLO, "ready", true);
    helloStarts.push(hello.took);
    helloTimelines.push(hello.timeline);
    helloIdles.push(hello.idle);
    helloFirstIdles.push(hello.firstIdle);
    await close(hello.browser, HELLO);
  }
  if (HELLO_LIKE_APP) {
    const like = await start(HELLO, "ready", true, appChose);
    likeStarts.push(like.took);
    likeIdles.push(like.idle);
    likeFirstIdles.push(like.firstIdle);
    await close(like.browser, HELLO);
  }
}

const ms = (value) => `${value.toFixed(0)} ms`;
console.log(
  `app: ${APP} (${ROUNDS} starts${HELLO ? `, each followed by one of the bare window${HELLO_LIKE_APP ? " and one of it set up as the app set WebKit up" : ""}` : ""}, after one of each not counted)`,
);
if (HELLO) {
  console.log(`WebKit set up by the app for this machine: ${appChose.length > 0 ? appChose.join(" ") : "as WebKit chooses"}`);
}
console.log(
  `cold start to interactive canvas (new WebDriver session until the palette shows): median ${ms(median(starts))} [${starts.map(ms).join(", ")}]`,
);
console.log(
  `  where it goes (median ms from the session's request): ${moments(timelines, [
    ["origin", "page begins"],
    ["loaded", "page loaded"],
    ["weft:script", "bundle run"],
    ["weft:kinds", "kinds received"],
    ["weft:committed", "first render committed"],
    ["weft:palette", "palette drawn"],
  ])}`,
);
const idle = medianIdle(idles);
const total = totalKb(idle);
const firstTotal = totalKb(medianIdle(firstIdles));
console.log(
  `idle memory (RSS, 1 s after the page's one change, 4 s after each start; the median start's): ${(total / 1024).toFixed(0)} MiB in ${idle.length} processes (${memory(idle)}); all starts ${range(idles)}; 3 s after the start, before the change: ${(firstTotal / 1024).toFixed(0)} MiB`,
);
console.log(`CPU time from the start until 3 s after it: ${cpu(medianIdle(firstIdles))}`);
console.log(
  `open and render a ${NODES}-node flow (confirm in the Open dialog until every node is in the DOM): median ${ms(median(opens))} [${opens.map(ms).join(", ")}]`,
);

/** Prints a bare window's figures beside the app's: `title`, then its starts' times (with
 *  their `timelines`, when given) and idle memory (after its page's one change, and before it),
 *  each as a ratio of the app's. */
function printWindow(title, windowStarts, windowIdles, windowFirstIdles, windowTimelines) {
  const windowIdle = medianIdle(windowIdles);
  const windowTotal = totalKb(windowIdle);
  const windowFirstTotal = totalKb(medianIdle(windowFirstIdles));
  console.log(title);
  console.log(
    `  cold start to its page: median ${ms(median(windowStarts))} [${windowStarts.map(ms).join(", ")}]; Weft's app takes ${(median(starts) / median(windowStarts)).toFixed(2)}× that`,
  );
  if (windowTimelines) {
    console.log(
      `  where it goes: ${moments(windowTimelines, [
        ["origin", "page begins"],
        ["loaded", "page loaded"],
      ])}`,
    );
  }
  console.log(
    `  idle memory: ${(windowTotal / 1024).toFixed(0)} MiB in ${windowIdle.length} processes (${memory(windowIdle)}); all starts ${range(windowIdles)}; Weft's app uses ${(total / windowTotal).toFixed(2)}× that`,
  );
  console.log(
    `  before the page's change (one frame drawn, and so one frame buffer): ${(windowFirstTotal / 1024).toFixed(0)} MiB; Weft's app, before its change, ${(firstTotal / windowFirstTotal).toFixed(2)}× that`,
  );
  console.log(`  CPU time from the start until 3 s after it: ${cpu(medianIdle(windowFirstIdles))}`);
}

if (HELLO) printWindow(`minimal Tauri 2 window (${HELLO}):`, helloStarts, helloIdles, helloFirstIdles, helloTimelines);
if (HELLO_LIKE_APP) {
  printWindow(`the same window with the app's WebKit set-up (${appChose.join(" ")}):`, likeStarts, likeIdles, likeFirstIdles);
}
