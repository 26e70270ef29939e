// The desktop app's benchmark (run through run.sh bench, which starts the display and
// tauri-driver): prints cold start to an interactive canvas, idle memory of the app's
// processes, and the time to open and render a 1,000-node flow.

import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";

import { remote } from "webdriverio";

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

const starts = [];
const opens = [];
let idle = null;
const bigFile = path.join(TMP, "big.json");
writeFileSync(bigFile, JSON.stringify(bigFlow(NODES), null, 2));

for (let round = 0; round < ROUNDS; round++) {
  const began = performance.now();
  const browser = await openApp(); // returns once the palette (drawn from the engine's kinds) shows
  starts.push(performance.now() - began);

  if (round === 0) {
    await browser.pause(3000);
    const family = appProcesses();
    idle = family.map(([pid, , command]) => ({ command, kb: rssKb(pid) }));
  }

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
  await browser.deleteSession();
}

const ms = (value) => `${value.toFixed(0)} ms`;
console.log(`app: ${APP}`);
console.log(
  `cold start to interactive canvas (new WebDriver session until the palette shows): median ${ms(median(starts))} [${starts.map(ms).join(", ")}]`,
);
const total = idle.reduce((sum, p) => sum + p.kb, 0);
console.log(
  `idle memory (RSS, 3 s after start): ${(total / 1024).toFixed(0)} MiB in ${idle.length} processes (${idle
    .map((p) => `${p.command} ${(p.kb / 1024).toFixed(0)} MiB`)
    .join(", ")})`,
);
console.log(
  `open and render a ${NODES}-node flow (confirm in the Open dialog until every node is in the DOM): median ${ms(median(opens))} [${opens.map(ms).join(", ")}]`,
);

// The floor: a minimal Tauri 2 window with a static page (tests/hello-tauri), built the same way.
const HELLO = process.env.WEFT_HELLO_APP;
if (HELLO) {
  const helloStarts = [];
  let helloIdle = null;
  for (let round = 0; round < ROUNDS; round++) {
    const began = performance.now();
    const browser = await remote({
      hostname: "127.0.0.1",
      port: Number(process.env.TAURI_DRIVER_PORT ?? 4444),
      logLevel: "warn",
      capabilities: { "tauri:options": { application: HELLO }, "wdio:enforceWebDriverClassic": true },
    });
    await byTestId(browser, "ready").waitForDisplayed({ timeout: 30_000 });
    helloStarts.push(performance.now() - began);
    if (round === 0) {
      await browser.pause(3000);
      helloIdle = appProcesses(HELLO).map(([pid, , command]) => ({ command, kb: rssKb(pid) }));
    }
    await browser.deleteSession();
  }
  const helloTotal = helloIdle.reduce((sum, p) => sum + p.kb, 0);
  console.log(`minimal Tauri 2 window (${HELLO}):`);
  console.log(`  cold start to its page: median ${ms(median(helloStarts))} [${helloStarts.map(ms).join(", ")}]`);
  console.log(
    `  idle memory: ${(helloTotal / 1024).toFixed(0)} MiB in ${helloIdle.length} processes; Weft's app uses ${(total / helloTotal).toFixed(2)}× that`,
  );
}
