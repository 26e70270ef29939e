#!/usr/bin/env bash
# The whole-process speed of `weft`, on the workloads of the peers' harness
# (../shared/peers-bench/): each figure is the median (min–max) of several fresh processes.
#
#   chain N      start → N `template` nodes (`{{ PREVIOUS_OUTPUT }}`) or `if` nodes (`contains
#                "go"`) → output, as the peers' harness writes them, run with `--events` (NDJSON
#                on stdout, as a script would) into a new store: engine µs per step from
#                `run_start` to `run_end` (the events' own times), whole-process µs per step
#                ((wall − the trivial flow's wall) / N, as the harness counts it), and set-up
#                (process start to the first printed event: reading, validating and storing
#                the flow);
#   trivial      start → output: wall time and peak RSS of the process;
#   fan-out N    start → N concurrent agents (1,000 and 10,000) against the scripted LLM server
#                answering after 50 ms over loopback HTTP: wall time and peak RSS;
#   large value  start → a node pinned to 45,000 small objects (a 6 MB pins file, ~40 MB as a
#                value in memory) → 12 `if` nodes → output, run with `--pins`: wall time, peak
#                RSS and the store's size (the value is held once, stored once a step).
#
#   bash scripts/bench.sh                  # chain 1000,10000, trivial, fan-out 1000,10000; 5 runs each
#   WEFT_BENCH_RUNS=9 bash scripts/bench.sh
#
# It measures the `release` build (Cargo.toml), the one that is shipped and compared with peers.
#
# Figures only: nothing here passes or fails on time (a busy machine is not a defect).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${WEFT_BENCH_PROFILE:-release}"
if [ "$profile" = release ]; then
  bash scripts/build-release.sh
else
  cargo build --profile "$profile" --locked -p weft-cli -p weft-scripted-llm >&2
fi
target="${CARGO_TARGET_DIR:-target}/$profile"
exec python3 - "$target/weft" "$target/scripted-llm" "${WEFT_BENCH_RUNS:-5}" <<'PYTHON'
import atexit, json, os, shutil, statistics, subprocess, sys, tempfile, time
from datetime import datetime

weft, scripted_llm, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
# The flows and stores (~100 MB) are removed however the script ends.
work = tempfile.mkdtemp(prefix="weft-bench-")
atexit.register(shutil.rmtree, work, True)


def node(id, kind, data):
    return {"id": id, "type": kind, "position": {"x": 0, "y": 0}, "data": data}


def edge(id, source, target, handle="output"):
    return {"id": id, "source": source, "target": target, "sourceHandle": handle}


def write(name, nodes, edges):
    path = os.path.join(work, name)
    with open(path, "w") as file:
        json.dump({"version": 1, "name": name, "settings": {"maxNodeVisits": 25},
                   "nodes": nodes, "edges": edges}, file)
    return path


def chain(length, kind):
    nodes = [node("start", "start", {"initialInput": "go"})]
    edges, previous = [], "start"
    data = ({"conditions": [{"operator": "contains", "value": "go"}]} if kind == "if"
            else {"template": "{{ PREVIOUS_OUTPUT }}"})
    for index in range(length):
        id = f"n{index}"
        nodes.append(node(id, kind, data))
        handle = "condition-0" if kind == "if" and previous != "start" else "output"
        edges.append(edge(f"e{index}", previous, id, handle))
        previous = id
    nodes.append(node("end", "output", {}))
    edges.append(edge("e-end", previous, "end", "condition-0" if kind == "if" else "output"))
    return write(f"chain-{kind}-{length}.json", nodes, edges)


def fan_out(branches):
    nodes = [node("start", "start", {"initialInput": "go"})]
    edges = []
    for index in range(branches):
        nodes.append(node(f"a{index}", "agent", {"model": "scripted", "userPrompt": "branch {{ PREVIOUS_OUTPUT }}"}))
        edges.append(edge(f"e{index}", "start", f"a{index}"))
    return write(f"fan-out-{branches}.json", nodes, edges)


def stamp(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# A child's peak RSS as the kernel counts it includes the memory of the process that forked it
# (this Python, ~35 MiB) up to its exec, so the peak is read through /usr/bin/time, a small
# process in between, in a run of its own (as ../shared/peers-bench does).
TIME = "/usr/bin/time"


def peak_rss(flow, env=None, extra=()):
    """Peak RSS in KiB of one `weft run --events` of `flow`, or None without /usr/bin/time."""
    if not os.path.exists(TIME):
        return None
    out = os.path.join(work, "peak.txt")
    subprocess.run([TIME, "-f", "%M", "-o", out, weft, "run", flow, "--events", *extra, "--db",
                    os.path.join(work, "runs.db")], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env, check=True)
    with open(out) as file:
        return int(file.read().split()[-1])


def store_bytes():
    db = os.path.join(work, "runs.db")
    return sum(os.path.getsize(db + suffix) for suffix in ("", "-wal")
               if os.path.exists(db + suffix))


def run(flow, env=None, fresh_store=False, extra=()):
    """One fresh `weft run --events`: wall s, set-up s, engine s."""
    db = os.path.join(work, "runs.db")
    if fresh_store:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    # Warnings and progress go to a file: a pipe nobody reads would fill and stop `weft`.
    errors = tempfile.TemporaryFile()
    started = time.monotonic()
    child = subprocess.Popen([weft, "run", flow, "--events", *extra, "--db", db],
                             stdout=subprocess.PIPE, stderr=errors, env=env)
    first = child.stdout.readline()
    setup = time.monotonic() - started
    rest = child.stdout.read()
    _, status, _ = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        errors.seek(0)
        sys.exit(f"{flow}: exit {child.returncode}: {errors.read().decode()[-500:]}")
    events = [json.loads(line) for line in (first + rest).splitlines()]
    ends = [e for e in events if e["type"] == "run_end"]
    engine = stamp(ends[-1]["ts"]) - stamp(events[0]["ts"])
    return wall, setup, engine


def figures(values, scale, unit):
    values = sorted(v * scale for v in values)
    return f"{statistics.median(values):.1f} {unit} ({values[0]:.1f}–{values[-1]:.1f})"


def measure(name, flow, steps=None, env=None, baseline=None, extra=(), stored=False):
    """Prints the figures of `runs` runs (after a warm-up); returns the walls. With `steps`,
    each run uses a new store and `baseline` (the trivial flow) is run before it, round by round,
    so that whole-process µs per step compares runs made at the same moment. With `stored`, each
    run uses a new store, whose size after it is printed too."""
    run(flow, env, extra=extra)  # warm-up: page cache, store file
    peaks = [peak for peak in (peak_rss(flow, env, extra) for _ in range(min(runs, 3))) if peak]
    samples, bases, sizes = [], [], []
    for _ in range(runs):
        if baseline:
            bases.append(run(baseline, env)[0])
        samples.append(run(flow, env, fresh_store=steps is not None or stored, extra=extra))
        sizes.append(store_bytes())
    walls, setups, engines = zip(*samples)
    peak = f"peak {figures(peaks, 1 / 1024, 'MiB')}" if peaks else "peak n/a (no /usr/bin/time)"
    line = f"{name:<22} wall {figures(walls, 1e3, 'ms')}  {peak}"
    if stored:
        line += f"  store {figures(sizes, 1 / 2**20, 'MiB')}"
    if steps:
        whole = [wall - base for wall, base in zip(walls, bases)] if bases else walls
        line += (f"  engine {figures(engines, 1e6 / steps, 'µs/step')}"
                 f"  whole {figures(whole, 1e6 / steps, 'µs/step')}"
                 f"  set-up {figures(setups, 1e3, 'ms')}")
    print(line, flush=True)
    return walls


def symbol_order_coverage():
    """How many functions of crates/cli/symbol-order.txt the measured binary has: a stale list
    costs the short runs' memory, so the figures say how current it is."""
    check = subprocess.run(["bash", "scripts/symbol-order-check.sh", weft, "0"],
                           capture_output=True, text=True)
    return (check.stdout or check.stderr).strip().replace(f" in {weft}", " in this binary")


print(f"weft {weft}; {runs} runs each, median (min–max); {symbol_order_coverage()}")
trivial = write("trivial.json", [node("start", "start", {"initialInput": "hi"}), node("end", "output", {})], [edge("e", "start", "end")])
measure("trivial (start→output)", trivial)
for length in (1000, 10000):
    for kind in ("template", "if"):
        measure(f"chain {length} {kind}", chain(length, kind), steps=length, baseline=trivial)

def large_value():
    nodes = [node("start", "start", {"initialInput": "go"}), node("big", "template", {"template": "x"})]
    edges, previous = [edge("e-big", "start", "big")], "big"
    for index in range(12):
        id = f"n{index}"
        nodes.append(node(id, "if", {"conditions": [{"operator": "is_not_empty", "value": ""}]}))
        edges.append(edge(f"e{index}", previous, id, "output" if previous == "big" else "condition-0"))
        previous = id
    nodes.append(node("end", "output", {}))
    edges.append(edge("e-end", previous, "end", "condition-0"))
    flow = write("large-value.json", nodes, edges)
    rows = [{"id": id, "name": f"customer {id}", "note": "lorem ipsum dolor sit amet " * 3}
            for id in range(45000)]
    with open(flow.replace(".json", ".pins.json"), "w") as file:
        json.dump({"pins": {"big": {"output": rows}}}, file)
    return flow


measure("large value 6 MB × 12", large_value(), extra=["--pins"], stored=True)

script = os.path.join(work, "script.json")
with open(script, "w") as file:
    json.dump({"rules": [], "fallback": {"kind": "text", "content": "ok", "delay_ms": 50}}, file)
server = subprocess.Popen([scripted_llm, script], stdout=subprocess.PIPE)
try:
    base_url = json.loads(server.stdout.readline())["baseUrl"]
    env = dict(os.environ, OPENAI_BASE_URL=base_url, OPENAI_API_KEY="sk-bench")
    measure("fan-out 1000 × 50 ms", fan_out(1000), env=env)
    # Beyond the 1,000 requests in flight at once: the rest wait for a turn (bounded sockets).
    measure("fan-out 10000 × 50 ms", fan_out(10000), env=env)
finally:
    server.terminate()
    server.wait()
PYTHON
