#!/usr/bin/env bash
# Regenerates crates/cli/symbol-order.txt: the functions `weft` runs in short commands (a
# trivial run, a chain with --events, the offline example flow, validate, runs, show), which
# the linker places side by side at the start of the binary's code (crates/cli/build.rs).
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
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${WEFT_ORDER_PROFILE:-release}"
command -v valgrind >/dev/null || { echo "symbol-order.sh needs valgrind (apt-get install valgrind)" >&2; exit 1; }
if [ -n "${WEFT_ORDER_BIN:-}" ]; then
  weft="$WEFT_ORDER_BIN"   # a build already made (of the same source)
else
  if [ "$profile" = release ]; then
    # As the test command builds the package (scripts/test.sh): with another wrapper, or none,
    # every name in the list would be another build's and the package's check would fail.
    # shellcheck source=scripts/clippy-wrapper.sh
    source scripts/clippy-wrapper.sh
    bash scripts/build-release.sh
  else
    cargo build --profile "$profile" --locked -p weft-cli >&2
  fi
  target="${CARGO_TARGET_DIR:-target}"
  case "$target" in /*) ;; *) target="$(pwd)/$target" ;; esac
  weft="$target/$profile/weft"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

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

# Every function of the binary that ran, most-run commands first (a name once).
python3 - "$weft" "$work" crates/cli/symbol-order.txt <<'PYTHON'
import glob, os, re, subprocess, sys
weft, work, out = sys.argv[1:]
symbols = set()
for line in subprocess.run(["nm", "--defined-only", weft], capture_output=True, text=True, check=True).stdout.splitlines():
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
