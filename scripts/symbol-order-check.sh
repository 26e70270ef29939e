#!/usr/bin/env bash
# How much of crates/cli/symbol-order.txt a built `weft` still has (or of LIST, for the app's
# src-tauri/symbol-order.txt and `weft-app`): prints "symbol order: FOUND of LISTED listed
# functions in BINARY" and exits 1 when fewer than MIN_PERCENT (default 99) are there.
#
# Why a check: the list names functions as they are mangled, and the names change with more
# than the code (a dependency's version or features change every hash below it). Names the
# binary lacks are skipped by the linker without a word, so a stale list costs a trivial run
# ~5 MiB of resident memory (7 → 12 MiB, the peers' harness measured it after two commits)
# and nothing else tells. The package test runs this on the release build it ships. Why 99:
# the names a change renames are those of the code it touched, often the hottest. A build
# with 93.5 % of the list present (three crates changed since it was traced) kept 12.9 MiB
# resident in a trivial run against 8.0 at 100 %, and one with 97.5 % (one change to the
# store) 8.8 MiB against 7.4. A fresh clone's build of the commit the list was traced on has
# all of it (CI's package stage prints the count).
#
#   bash scripts/symbol-order-check.sh target/release/weft [MIN_PERCENT]
#   bash scripts/symbol-order-check.sh target/release/weft-app 99 src-tauri/symbol-order.txt
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:?usage: symbol-order-check.sh BINARY [MIN_PERCENT]}"
minimum="${2:-99}"
list="${3:-crates/cli/symbol-order.txt}"
python3 - "$binary" "$minimum" "$list" <<'PYTHON'
import subprocess, sys
binary, minimum, list_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
listed = open(list_file).read().split()
nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True)
if nm.returncode != 0:
    sys.exit(f"symbol order: nm could not read {binary}: {nm.stderr.strip()}")
present = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
found = sum(1 for name in listed if name in present)
print(f"symbol order: {found} of {len(listed)} listed functions in {binary}")
if found < len(listed) * minimum / 100:
    sys.exit(
        f"symbol order: under {minimum:g} % of {list_file} is in {binary}, so it takes several "
        "MiB more memory at each start than it should; list the functions again "
        f"(WEFT_ORDER_BIN={binary} bash scripts/symbol-order.sh"
        f"{' --app' if list_file.startswith('src-tauri') else ''}), rebuild and commit the list"
    )
PYTHON
