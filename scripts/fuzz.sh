#!/usr/bin/env bash
# The property tests of the test command, for longer: many cases from random seeds, each case in
# a child process with a time limit, so that an abort or a hang is reported with its input
# instead of ending the test binary. A failure prints the seed; rerun it with
# `WEFT_FUZZ_SEED=<seed> bash scripts/fuzz.sh`.
#
#   bash scripts/fuzz.sh            # 20,000 cases per property
#   WEFT_FUZZ_CASES=200000 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export WEFT_FUZZ_CASES="${WEFT_FUZZ_CASES:-20000}"
export WEFT_FUZZ_SEED="${WEFT_FUZZ_SEED:-random}"
# proptest's own switches: a child process per case, and 30 s per case before it counts as a hang.
export PROPTEST_FORK="${PROPTEST_FORK:-true}"
export PROPTEST_TIMEOUT="${PROPTEST_TIMEOUT:-30000}"
echo "== fuzz: $WEFT_FUZZ_CASES cases per property, seed $WEFT_FUZZ_SEED"
cargo test --release --locked -p weft-engine --test it fuzz::
cargo test --release --locked -p weft-template --lib fuzz
cargo test --release --locked -p weft-testing --lib fuzz
cargo test --release --locked -p weft-history --lib fuzz
cargo test --release --locked -p weft-server --lib fuzz
cargo test --release --locked -p weft-server --test fuzz
