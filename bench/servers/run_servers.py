#!/usr/bin/env python3
"""run_servers.py — `weft serve` against the servers teams deploy instead (n8n, Flowise), in one
run: each server started on loopback in its default single-machine mode and given the same flow
through its own import (an HTTP trigger → a template step → an LLM step against one scripted
OpenAI-compatible server answering after DELAY ms → the answer), then loaded by 1, 16, 64 and 256
concurrent clients, round after round with the systems interleaved. Every answer is checked
(it must carry the LLM's reply to that request's own input). Prints one table and the goals.

  run_servers.py --weft WEFT_BIN --llm SCRIPTED_LLM_BIN --peers PEERS_DIR
                 [--systems weft-hook,weft-runs,n8n,flowise] [--clients 1,16,64,256] [--rounds 3]
                 [--delay-ms 50] [--json OUT.json]

PEERS_DIR is where install-peers.sh put n8n and Flowise. See README.md for what each figure is.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "bench-token-0123456789abcdef"
# Requests per measurement, by the number of clients: enough for a p99 at 16 and more.
REQUESTS = {1: 40, 4: 40, 16: 320, 64: 640, 256: 2560}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(method, url, body=None, headers=None, timeout=30):
    """(status, parsed JSON or text) of one request."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if body is not None and "Content-Type" not in (headers or {}):
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            status, text = answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_until(check, what, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{what} within {timeout} s")


def group_members(pgid):
    """The process ids of the process group `pgid`: a server and the processes it started."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            yield entry, fields


def group_cpu_s(pgid):
    """CPU seconds (user and system) used so far by the processes of the process group `pgid`."""
    ticks = sum(int(fields[11]) + int(fields[12]) for _, fields in group_members(pgid))
    return ticks / os.sysconf("SC_CLK_TCK")


def group_rss_mib(pgid):
    """Resident memory of the processes of the process group `pgid`, MiB."""
    total = 0
    for pid, _ in group_members(pgid):
        try:
            with open(f"/proc/{pid}/status") as status:
                total += next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total / 1024


class Sampler:
    """The peak resident memory of a process group while it runs, sampled every 20 ms."""

    def __init__(self, pgid):
        self.pgid, self.peak, self.done = pgid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.is_set():
            self.peak = max(self.peak, group_rss_mib(self.pgid))
            self.done.wait(0.02)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak


class System:
    """One server under test: started, given the flow, asked with `spec`."""

    name = ""
    version = ""

    def __init__(self, args, work, llm_url):
        self.args, self.work, self.llm_url = args, work, llm_url
        self.process = None
        self.port = free_port()
        self.log_path = os.path.join(work, f"{self.name}.log")

    def spawn(self, command, env, cwd=None):
        self.process = subprocess.Popen(
            command, env=env, cwd=cwd or self.work, stdin=subprocess.DEVNULL,
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def alive(self):
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} stopped (exit {self.process.returncode}); see {self.log_path}")
        return True

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def rss(self):
        return group_rss_mib(self.process.pid)


class Weft(System):
    """`weft serve` over a fresh SQLite store; the flow is a file of its flows folder."""

    name = "weft"
    route = ""

    def start(self):
        flows = os.path.join(self.work, "weft-flows")
        os.makedirs(flows, exist_ok=True)
        at = {"x": 0, "y": 0}
        flow = {
            "version": 1,
            "name": "Summarize",
            "nodes": [
                {"id": "start", "type": "start", "position": at, "data": {}},
                {"id": "prompt", "type": "template", "position": at,
                 "data": {"template": "Summarize: {{ PREVIOUS_OUTPUT }}"}},
                {"id": "llm", "type": "agent", "position": at,
                 "data": {"model": "openai/gpt-4o-mini", "userPrompt": "{{ PREVIOUS_OUTPUT }}"}},
                {"id": "answer", "type": "output", "position": at, "data": {}},
            ],
            "edges": [
                {"id": "e1", "source": "start", "target": "prompt"},
                {"id": "e2", "source": "prompt", "target": "llm"},
                {"id": "e3", "source": "llm", "target": "answer"},
            ],
        }
        with open(os.path.join(flows, "summarize.json"), "w") as out:
            json.dump(flow, out)
        tokens = os.path.join(self.work, "weft-tokens.txt")
        with open(tokens, "w") as out:
            out.write(f"bench:{TOKEN}\n")
        env = dict(os.environ, OPENAI_BASE_URL=self.llm_url, OPENAI_API_KEY="sk-bench-not-a-key")
        self.spawn([self.args.weft, "serve", "--flows", flows, "--tokens", tokens,
                    "--addr", f"127.0.0.1:{self.port}", "--db", os.path.join(self.work, "weft-runs.db")], env)
        self.version = subprocess.run([self.args.weft, "--version"], capture_output=True, text=True).stdout.strip()
        base = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: self.alive() and http("GET", f"{base}/openapi.json")[0] == 200, "weft serve answers")

    def spec(self):
        base = f"http://127.0.0.1:{self.port}"
        headers = {"authorization": f"Bearer {TOKEN}"}
        if self.route == "hook":
            return {"url": f"{base}/v1/hooks/summarize?wait=120",
                    "headers": {**headers, "content-type": "text/plain"},
                    "body": "ticket {{id}}"}
        return {"url": f"{base}/v1/runs?wait=120", "headers": {**headers, "content-type": "application/json"},
                "body": json.dumps({"flow": "summarize", "input": "ticket {{id}}"})}


class WeftHook(Weft):
    name, route = "weft-hook", "hook"


class WeftRuns(Weft):
    name, route = "weft-runs", "runs"


class N8n(System):
    """n8n (`n8n start`, its default SQLite store): Webhook (answers with the last node's
    output) → Edit Fields (the prompt) → HTTP Request (the OpenAI-compatible chat call: n8n's
    lightest way to call an LLM), imported with `n8n import:workflow`."""

    name = "n8n"

    def env(self):
        home = os.path.join(self.work, "n8n-home")
        os.makedirs(home, exist_ok=True)
        return dict(
            os.environ, N8N_USER_FOLDER=home, N8N_PORT=str(self.port), N8N_LISTEN_ADDRESS="127.0.0.1",
            N8N_DIAGNOSTICS_ENABLED="false", N8N_VERSION_NOTIFICATIONS_ENABLED="false",
            N8N_PERSONALIZATION_ENABLED="false", N8N_SECURE_COOKIE="false", N8N_HIRING_BANNER_ENABLED="false",
            N8N_ENCRYPTION_KEY="bench-encryption-key-0123456789", N8N_LOG_LEVEL="warn",
            N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS="false", WEBHOOK_URL=f"http://127.0.0.1:{self.port}/",
        )

    def start(self):
        root = os.path.join(self.args.peers, "n8n")
        n8n = os.path.join(root, "node_modules", "n8n", "bin", "n8n")
        with open(os.path.join(root, "node_modules", "n8n", "package.json")) as package:
            self.version = "n8n " + json.load(package)["version"]
        workflow = {
            "id": "weftBench0000001",
            "name": "summarize",
            "active": True,
            "settings": {"executionOrder": "v1"},
            "nodes": [
                {"id": str(uuid.uuid4()), "name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
                 "position": [0, 0], "webhookId": str(uuid.uuid4()),
                 "parameters": {"httpMethod": "POST", "path": "summarize", "responseMode": "lastNode",
                                "options": {}}},
                {"id": str(uuid.uuid4()), "name": "Prompt", "type": "n8n-nodes-base.set", "typeVersion": 3.4,
                 "position": [220, 0],
                 "parameters": {"assignments": {"assignments": [
                     {"id": str(uuid.uuid4()), "name": "prompt", "type": "string",
                      "value": "=Summarize: {{ $json.body.text }}"}]}, "options": {}}},
                {"id": str(uuid.uuid4()), "name": "LLM", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2,
                 "position": [440, 0],
                 "parameters": {
                     "method": "POST", "url": f"{self.llm_url}/chat/completions",
                     "sendHeaders": True,
                     "headerParameters": {"parameters": [
                         {"name": "Authorization", "value": "Bearer sk-bench-not-a-key"}]},
                     "sendBody": True, "specifyBody": "json",
                     "jsonBody": "={{ JSON.stringify({model: 'gpt-4o-mini', messages: "
                                 "[{role: 'user', content: $json.prompt}]}) }}",
                     "options": {}}},
            ],
            "connections": {
                "Webhook": {"main": [[{"node": "Prompt", "type": "main", "index": 0}]]},
                "Prompt": {"main": [[{"node": "LLM", "type": "main", "index": 0}]]},
            },
        }
        path = os.path.join(self.work, "n8n-workflow.json")
        with open(path, "w") as out:
            json.dump(workflow, out)
        env = self.env()
        for command in (["import:workflow", f"--input={path}"],
                        ["update:workflow", "--id=weftBench0000001", "--active=true"]):
            done = subprocess.run(["node", n8n, *command], env=env, cwd=self.work, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"n8n {command[0]} failed: {done.stdout[-600:]} {done.stderr[-600:]}")
        self.spawn(["node", n8n, "start"], env)
        base = f"http://127.0.0.1:{self.port}"
        # n8n answers before it has activated its workflows; the webhook is there once a GET of
        # it is refused as the wrong method rather than as unknown.
        wait_until(lambda: self.alive() and "not registered for GET" in str(http("GET", f"{base}/webhook/summarize")[1]),
                   "n8n activates the workflow", 300)

    def spec(self):
        return {"url": f"http://127.0.0.1:{self.port}/webhook/summarize",
                "headers": {"content-type": "application/json"},
                "body": json.dumps({"text": "ticket {{id}}"})}


class Flowise(System):
    """Flowise (`flowise start`, its default SQLite store): a chatflow made from Flowise's own
    "LLM Chain" parts — Prompt Template (the prompt) → LLM Chain ← ChatOpenAI (base path set
    to the scripted server) — created over its API; asked with its prediction API."""

    name = "flowise"

    def start(self):
        root = os.path.join(self.args.peers, "flowise")
        package_dir = os.path.join(root, "node_modules", "flowise")
        with open(os.path.join(package_dir, "package.json")) as package:
            self.version = "flowise " + json.load(package)["version"]
        home = os.path.join(self.work, "flowise-home")
        os.makedirs(home, exist_ok=True)
        env = dict(
            os.environ, PORT=str(self.port), HOST="127.0.0.1", DATABASE_PATH=home, SECRETKEY_PATH=home,
            LOG_PATH=os.path.join(home, "logs"), BLOB_STORAGE_PATH=os.path.join(home, "storage"),
            APIKEY_PATH=home, LOG_LEVEL="warn", DISABLE_FLOWISE_TELEMETRY="true", HOME=home,
            # See offline-tiktoken.cjs: what a deployment with internet access downloads once.
            NODE_OPTIONS=f"--require {os.path.join(HERE, 'offline-tiktoken.cjs')}", WEFT_BENCH_FLOWISE_ROOT=root,
        )
        self.spawn(["node", os.path.join(package_dir, "bin", "run"), "start"], env)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: self.alive() and http("GET", f"{self.base}/api/v1/ping")[0] == 200, "Flowise answers", 300)
        self.chatflow = flowise_chatflow(self.base, self.llm_url)

    def spec(self):
        return {"url": f"{self.base}/api/v1/prediction/{self.chatflow}",
                "headers": {"content-type": "application/json"},
                "body": json.dumps({"question": "ticket {{id}}"})}


def flowise_chatflow(base, llm_url):
    """Creates the chatflow over Flowise's API (see flowise.py); its id."""
    from flowise import create_chatflow
    return create_chatflow(base, llm_url)


SYSTEMS = {"weft-hook": WeftHook, "weft-runs": WeftRuns, "n8n": N8n, "flowise": Flowise}


def measure(system, clients, first_id, args):
    """One load of `system` with `clients` clients; the load generator's report, with the peak
    resident memory of the server meanwhile."""
    spec = dict(system.spec(), expect="LLM: Summarize: ticket {{id}}", clients=clients,
                requests=REQUESTS[clients], timeoutMs=120_000, firstId=first_id)
    sampler = Sampler(system.process.pid)
    cpu_before = group_cpu_s(system.process.pid)
    done = subprocess.run(["node", os.path.join(HERE, "load.mjs"), json.dumps(spec)],
                          capture_output=True, text=True, timeout=900)
    cpu = group_cpu_s(system.process.pid) - cpu_before
    peak = sampler.stop()
    if done.returncode != 0:
        raise RuntimeError(f"the load generator failed on {system.name}: {done.stderr[-800:]}")
    report = json.loads(done.stdout)
    report["peakMiB"] = peak
    report["cpuMsPerRun"] = cpu * 1000 / max(1, report["completed"])
    return report


def percentile(values, share):
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def fmt(values, unit=""):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    middle = statistics.median(values)
    digits = 0 if middle >= 100 else 1 if middle >= 10 else 2
    text = f"{middle:.{digits}f}"
    if len(values) > 1:
        text += f" ({min(values):.{digits}f}–{max(values):.{digits}f})"
    return text + unit


def verdict(weft, peer, w, p, memory, clients, delay_ms):
    """The goals' line for `weft` against `peer` at `clients` (their summaries `w` and `p`, the
    ratio of their idle memory)."""
    rate = w["rate"] / p["rate"] if p["rate"] else float("inf")
    p99 = w["p99"] / p["p99"] if p["p99"] else float("inf")
    goals = [("runs/s ≥ 10×", rate >= 10), ("p99 ≤ 0.2×", p99 <= 0.2), ("idle ≤ 0.2×", memory <= 0.2)]
    met = ", ".join(f"{what} {'met' if ok else 'NOT met'}" for what, ok in goals)
    # Each client waits for its answer, and every answer waits the LLM's delay: no server
    # completes more runs per second than this (README.md).
    bound = clients * 1000 / delay_ms
    reach = ""
    if rate < 10 and 10 * p["rate"] > bound:
        reach = (f" (out of any server's reach here: {clients} clients and a {delay_ms} ms LLM allow "
                 f"at most {bound:,.0f} runs/s, 10× {peer}'s would be {10 * p['rate']:,.0f}; "
                 f"{weft} completes {w['rate'] / bound:.0%} of that bound)")
    return (f"- {weft} vs {peer} at {clients} clients: runs/s {rate:.1f}×, p99 {p99:.2f}×, "
            f"idle memory {memory:.2f}× — {met}{reach}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weft", required=True)
    llm_given = parser.add_mutually_exclusive_group(required=True)
    llm_given.add_argument("--llm", help="the scripted-llm binary, started with the harness's script")
    llm_given.add_argument("--llm-url", help="an OpenAI-compatible server already answering as that script does")
    parser.add_argument("--peers", help="where install-peers.sh put n8n and Flowise")
    parser.add_argument("--systems", default="weft-hook,weft-runs,n8n,flowise")
    parser.add_argument("--clients", default="1,16,64,256")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=int, default=50)
    parser.add_argument("--rest-s", type=float, default=5, help="rest before the idle memory is read")
    parser.add_argument("--json")
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    unknown = [c for c in clients if c not in REQUESTS]
    if unknown:
        parser.error(f"--clients takes some of {sorted(REQUESTS)}, not {unknown}")
    if not args.peers and any(name in ("n8n", "flowise") for name in args.systems.split(",")):
        parser.error("--peers is needed to measure n8n or Flowise")
    work = tempfile.mkdtemp(prefix="weft-servers-bench-")
    sys.path.insert(0, HERE)

    llm = None
    if args.llm:
        script = os.path.join(work, "llm-script.json")
        with open(script, "w") as out:
            json.dump({"rules": [], "fallback": {"kind": "text", "content": "LLM: ", "echo": True,
                                                 "delay_ms": args.delay_ms}}, out)
        llm = subprocess.Popen([args.llm, script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, start_new_session=True)
        llm_url = json.loads(llm.stdout.readline())["baseUrl"].rstrip("/")
    else:
        llm_url = args.llm_url.rstrip("/")
    systems = []
    try:
        for name in args.systems.split(","):
            system = SYSTEMS[name](args, work, llm_url)
            log(f"starting {name}")
            started = time.monotonic()
            systems.append(system)
            system.start()
            system.ready_s = time.monotonic() - started
        # Warm up (and check) each, then let it rest before reading its idle memory.
        for system in systems:
            warm = measure(system, 1, 10_000_000, args)
            if warm["failed"]:
                raise RuntimeError(f"{system.name} does not answer as it should: {warm['reasons']}")
        time.sleep(args.rest_s)
        idle = {system.name: statistics.median(system.rss() for _ in range(5) if time.sleep(0.2) is None)
                for system in systems}
        results = {(s.name, c): [] for s in systems for c in clients}
        next_id = 0
        for round_number in range(args.rounds):
            for count in clients:
                order = systems[round_number % len(systems):] + systems[:round_number % len(systems)]
                for system in order:
                    log(f"round {round_number + 1}/{args.rounds}: {system.name}, {count} clients")
                    report = measure(system, count, next_id, args)
                    next_id += REQUESTS[count]
                    results[(system.name, count)].append(report)
        table(systems, clients, results, idle, args)
    except BaseException:
        log(f"the servers' files and logs are kept in {work}")
        raise
    else:
        shutil.rmtree(work, ignore_errors=True)
    finally:
        for system in systems:
            system.stop()
        if llm:
            llm.send_signal(signal.SIGINT)
            llm.wait(10)


def table(systems, clients, results, idle, args):
    print("| system | clients | completed runs/s | p50 ms | p99 ms | server CPU ms/run | failed | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for system in systems:
        for count in clients:
            reports = results[(system.name, count)]
            rates = [r["completed"] / (r["wallMs"] / 1000) for r in reports]
            p50 = [percentile(r["latenciesMs"], 0.5) for r in reports]
            p99 = [percentile(r["latenciesMs"], 0.99) for r in reports]
            failed = sum(r["failed"] for r in reports)
            total = sum(r["completed"] + r["failed"] for r in reports)
            peak = max(r["peakMiB"] for r in reports)
            summary[(system.name, count)] = {
                "rate": statistics.median(rates), "p50": statistics.median(p50),
                "p99": statistics.median(p99), "failed": failed, "peak": peak}
            reasons = sorted({why for r in reports for why in r["reasons"]})
            cpu = [r["cpuMsPerRun"] for r in reports]
            print(f"| {system.name} | {count} | {fmt(rates)} | {fmt(p50)} | {fmt(p99)} | {fmt(cpu)} | "
                  f"{failed}/{total}{' ' + reasons[0][:80] if reasons else ''} | {peak:.0f} |")
    print()
    print("| system | version | idle MiB | ready s |")
    print("|---|---|---|---|")
    for system in systems:
        print(f"| {system.name} | {system.version} | {idle[system.name]:.1f} | {system.ready_s:.1f} |")
    print()
    wefts = [s.name for s in systems if s.name.startswith("weft")]
    peers = [s.name for s in systems if not s.name.startswith("weft")]
    # The goals are read at the largest number of clients, where the clients bound the rate least
    # (README.md); 64 clients, the goals' first setting, is shown too.
    for count in sorted({c for c in clients if c >= 64} | {max(clients)}):
        for weft in wefts:
            for peer in peers:
                print(verdict(weft, peer, summary[(weft, count)], summary[(peer, count)],
                              idle[weft] / idle[peer], count, args.delay_ms))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"summary": {f"{k[0]}@{k[1]}": v for k, v in summary.items()}, "idle": idle}, out, indent=1)


if __name__ == "__main__":
    main()
