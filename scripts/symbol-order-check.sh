#!/usr/bin/env bash
# How much of crates/cli/symbol-order.txt a built `weft` still has: prints
# "symbol order: FOUND of LISTED listed functions in BINARY" and exits 1 when fewer than
# MIN_PERCENT (default 90) are there.
#
# Why a check: the list names functions as they are mangled, and the names change with more
# than the code (a dependency's version or features change every hash below it). Names the
# binary lacks are skipped by the linker without a word, so a stale list costs a trivial run
# ~5 MiB of resident memory (7 → 12 MiB, the peers' harness measured it after two commits)
# and nothing else tells. The package test runs this on the release build it ships.
#
#   bash scripts/symbol-order-check.sh target/release/weft [MIN_PERCENT]
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:?usage: symbol-order-check.sh BINARY [MIN_PERCENT]}"
minimum="${2:-90}"
python3 - "$binary" "$minimum" <<'PYTHON'
import subprocess, sys
binary, minimum = sys.argv[1], float(sys.argv[2])
listed = open("crates/cli/symbol-order.txt").read().split()
nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True)
if nm.returncode != 0:
    sys.exit(f"symbol order: nm could not read {binary}: {nm.stderr.strip()}")
present = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
found = sum(1 for name in listed if name in present)
print(f"symbol order: {found} of {len(listed)} listed functions in {binary}")
if found < len(listed) * minimum / 100:
    sys.exit(
        f"symbol order: under {minimum:g} % of crates/cli/symbol-order.txt is in {binary}, so "
        "short runs of weft take several MiB more memory than they should; list the functions "
        f"again (WEFT_ORDER_BIN={binary} bash scripts/symbol-order.sh), rebuild and commit the list"
    )
PYTHON
