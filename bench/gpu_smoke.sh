#!/bin/bash
# The GPU smoke suite on one H200: the engine end to end on every path a change can break there
# (recipes/suites/gpu-smoke.yaml: legacy-vs-TQ parity, the LLM and VLM flagship twins, distillation,
# each at --scale h200x1 and judged by its h200x1 checks), the four entries side by side.
#
#   BENCH_COMMIT=<sha> bash bench/gpu_smoke.sh      # carry bench/.work (staging: bench/README.md)
#   SMOKE_TIMEOUT_S=N                               # the suite's limit (540 s), to leave a call room
#
# Writes one stamped row per entry to $OUT/gpu_smoke.jsonl (bench/run_summary.py: state, checks
# passed of total, step time, tokens/s), the suite's summary to $OUT/gpu_smoke.md and the run
# dirs to $OUT/gpu_smoke_runs.tgz; append the rows to bench/results/gpu_smoke.jsonl. Exit 0 only
# when every entry passed: every GPU benchmark script runs this first and stops on a red smoke
# (`bash bench/gpu_smoke.sh || exit 1`).
set -uo pipefail
RESULTS=${OUT:-bench/results}
. bench/gpu_setup.sh || exit 1
SMOKE=/tmp/gpu-smoke-$(date +%s)
T0=$(date +%s)
timeout "${SMOKE_TIMEOUT_S:-540}" $HARNESS nightly gpu-smoke -n 4 --no-history --out "$SMOKE"
rc=$?
echo "gpu smoke: exit $rc after $(( $(date +%s) - T0 )) s"
mkdir -p "$RESULTS"
find "$SMOKE" -mindepth 2 -maxdepth 2 -name recipe.yaml -printf "%h\n" | sort | xargs python3 bench/run_summary.py \
  | python3 bench/record.py --out "$RESULTS/gpu_smoke.jsonl" --command "bash bench/gpu_smoke.sh"
cp "$SMOKE/summary.md" "$RESULTS/gpu_smoke.md" 2>/dev/null
# the run dirs, for the record (thresholds cite them): metrics, status, result, logs; no checkpoints
tar czf "$RESULTS/gpu_smoke_runs.tgz" --exclude=checkpoints --exclude='*.pt' -C "$SMOKE" . 2>/dev/null
exit $rc
