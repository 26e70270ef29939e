#!/usr/bin/env bash
# Regenerates crates/cli/symbol-order.txt: the functions `weft` runs in short commands (a
# trivial run, a chain with --events, the offline example flow, validate, runs, show), which
# the linker places side by side at the start of the binary's code (build-support/link.rs).
#
# Why: a short `weft run` executes ~2 MB of a ~30 MB code section. Scattered, each first call
# faults in the 64 KiB around it, and a trivial run ended up with ~12 MiB of the binary
# resident (RssFile); laid out together they are a few MiB (issue 16: the trivial flow's peak
# RSS went from 16 to 9 MiB).
#
# Needs valgrind (Debian: valgrind). Run it after changes that rename many functions (a new
# dependency, a Rust upgrade): names that are gone are ignored by the linker, so a stale file
# costs memory, never correctness; scripts/bench.sh prints how much of it the binary still has.
#
#   bash scripts/symbol-order.sh              # traces the release build (what is shipped)
#   WEFT_ORDER_BIN=path/to/weft bash scripts/symbol-order.sh   # trace a build already made
#                   (the package stage's of `bash .ci/run`, say: one built as it builds it)
#   bash scripts/symbol-order.sh --app        # the app's start instead, into
#                   src-tauri/symbol-order.txt (src-tauri/build.rs); WEFT_ORDER_BIN names a
#                   built weft-app. Needs Xvfb when there is no display.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${WEFT_ORDER_PROFILE:-release}"
program=weft
list=crates/cli/symbol-order.txt
if [ "${1:-}" = --app ]; then
  program=weft-app
  list=src-tauri/symbol-order.txt
fi
command -v valgrind >/dev/null || { echo "symbol-order.sh needs valgrind (apt-get install valgrind)" >&2; exit 1; }
if [ -n "${WEFT_ORDER_BIN:-}" ]; then
  weft="$WEFT_ORDER_BIN"   # a build already made (of the same source)
else
  if [ "$profile" = release ]; then
    # The package's build, compiler wrapper and all: the list must name its functions.
    bash scripts/build-release.sh
  else
    cargo build --profile "$profile" --locked -p weft-cli >&2
  fi
  target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$(pwd)/$target" ;; esac
  weft="$target/$profile/$program"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Every function of the binary that ran, in the order the traces met them (a name once).
write_order() {
  python3 - "$weft" "$work" "$list" <<'PYTHON'
import glob, os, re, subprocess, sys
binary, work, out = sys.argv[1:]
symbols = set()
for line in subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        symbols.add(parts[2])
order, seen = [], set()
for path in sorted(glob.glob(f"{work}/trace.*"), key=os.path.getmtime):
    for match in re.finditer(r"^c?fn=(?:\(\d+\) )?(.+)$", open(path).read(), re.M):
        name = match.group(1)
        if name in symbols and name not in seen:
            seen.add(name)
            order.append(name)
with open(out, "w") as file:
    file.write("\n".join(order) + "\n")
print(f"{out}: {len(order)} functions", file=sys.stderr)
PYTHON
}

if [ "$program" = weft-app ]; then
  # The app started with a new store and settings, as a new user starts it, left to draw its
  # canvas (slowly: under valgrind) and closed by SIGTERM, which it takes as its window's close
  # button, so that callgrind writes the trace. WebKit's own processes run outside valgrind.
  xvfb=""
  if [ -z "${DISPLAY:-}" ]; then
    command -v Xvfb >/dev/null || { echo "symbol-order.sh --app needs a display or Xvfb" >&2; exit 1; }
    export DISPLAY=":$((70 + RANDOM % 9))"
    Xvfb "$DISPLAY" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
    xvfb=$!
    trap 'kill "$xvfb" 2>/dev/null || true; rm -rf "$work"' EXIT
    sleep 1
  fi
  WEFT_DB="$work/runs.db" WEFT_CONFIG_DIR="$work/config" XDG_DATA_HOME="$work/data" \
    WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS=1 \
    valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
    --callgrind-out-file="$work/trace.%p" -q "$weft" >"$work/app.log" 2>&1 &
  app=$!
  # The canvas asks the engine for its node kinds once drawn: wait for that, then a while more.
  sleep "${WEFT_ORDER_APP_SECONDS:-60}"
  kill -TERM "$app"
  wait "$app" || true
  write_order
  exit
fi

python3 - "$work" <<'PYTHON'
import json, sys
work = sys.argv[1]
def node(id, kind, data, x=0):
    return {"id": id, "type": kind, "position": {"x": x, "y": 0}, "data": data}
def edge(source, target, handle="output"):
    return {"id": f"{source}-{target}", "source": source, "target": target, "sourceHandle": handle}
def write(name, nodes, edges):
    with open(f"{work}/{name}.json", "w") as file:
        json.dump({"version": 1, "name": name, "nodes": nodes, "edges": edges}, file)
write("trivial", [node("start", "start", {"prompt": "go"}), node("t", "template", {"template": "{{ PREVIOUS_OUTPUT }}"})],
      [edge("start", "t")])
chain = [node("start", "start", {"prompt": "go"})]
edges = []
for i in range(1, 21):
    if i % 2:
        chain.append(node(f"s{i}", "if", {"conditions": [{"operator": "contains", "value": "go"}]}))
    else:
        chain.append(node(f"s{i}", "template", {"template": "{{ PREVIOUS_OUTPUT }}"}))
    edges.append(edge(chain[-2]["id"], chain[-1]["id"], "condition-0" if (i - 1) % 2 and i > 1 else "output"))
chain.append(node("out", "output", {}))
edges.append(edge(chain[-2]["id"], "out"))
write("chain", chain, edges)
PYTHON

trace() {
  valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
    --callgrind-out-file="$work/trace.%p" -q "$weft" "$@" >/dev/null 2>&1 || true
}
db="$work/runs.db"
trace --version
trace validate flows/offline.json
trace run "$work/trivial.json" --db "$db"
trace run "$work/trivial.json" --db "$db"
trace run "$work/chain.json" --events --db "$db"
trace run flows/offline.json --decide review=approve --db "$db"
trace runs --db "$db"
run_id="$("$weft" runs --db "$db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
trace show "$run_id" --db "$db"

write_order
