#!/usr/bin/env bash
# End-to-end GRPO throughput on one H200, ours against TRL's GRPOTrainer, from one recipe:
#
#   bash bench/gpu_e2e.sh          # on the GPU machine, repository root; carry bench/.work/wheels
#
# The wheels: ../shared/tools/stage-gpu-wheels bench/.work/wheels $(grep -v '^#' bench/gpu_wheels.txt | grep -v antlr)
# (bench/gpu_wheels.txt names TRL's: trl, datasets, dill, multiprocess). Steps, each stopping the
# script when it fails: the smoke suite (bench/gpu_smoke.sh), the engine's GPU tests beside it (no
# synchronising call in a train step's loop, the kernel trace: $OUT/e2e/gpu_tests.log);
# recipes/perf_grpo_dense_1b.yaml by our engine (6 steps, then a 7th with its kernels traced:
# profile.kernel_steps); recipes/perf_grpo_dense_1b_trl.yaml, the same recipe by TRL (6 steps);
# bench/e2e_ratio.py over both, the first 2 steps left out as warm-up (compilation, CUDA graphs).
# Prints tokens/s/GPU of both, the ratio, each phase's median seconds and the peer's over ours, each
# run's GPU-busy fraction over the timed steps (NVML utilization sampled beside it; bench/gpu_busy.py)
# and ours from the traced step's kernels (the union of what ran on the GPU over the step's wall
# time). Writes under $OUT/e2e/: both run dirs, ratio.json and machine.json (machine, date, commit).
# PERF_HYBRID=1 also runs recipes/perf_grpo_hybrid_1b.yaml (our engine only: its tokens/s and phases).
# E2E_STEPS=N runs N steps of each (6; at least 3), so a call that must also hold the smoke suite fits
# its 10 minutes: about 9 minutes at 5 steps on a bare machine.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${HARNESS:-}" ]; then
  . bench/gpu_setup.sh || exit 1
fi
DEST=${OUT:-bench/.work}/e2e
mkdir -p "$DEST"
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
python3 - "$DEST/machine.json" "$COMMIT" <<'PY'
import json, socket, sys, time
import torch
json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": socket.gethostname(),
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
           "torch": torch.__version__, "python": sys.version.split()[0], "commit": sys.argv[2]},
          open(sys.argv[1], "w"), indent=1)
PY
cat "$DEST/machine.json"

echo "== smoke suite, the engine's GPU tests beside it"
( timeout 300 python3 -m pytest -q -p no:cacheprovider --durations=8 tests/rl/test_train_step_no_sync.py tests/rl/test_kernel_trace.py \
    > "$DEST/gpu_tests.log" 2>&1; echo "gpu tests: exit $?" >> "$DEST/gpu_tests.log" ) &
tests=$!
bash bench/gpu_smoke.sh || { echo "gpu_e2e: the smoke suite failed; no throughput run" >&2; kill $tests; exit 1; }
wait $tests
tail -14 "$DEST/gpu_tests.log"  # the summary and the slowest tests (they share the smoke's minutes)

STEPS=${E2E_STEPS:-6}
run() {  # run NAME RECIPE LIMIT_S [OVERRIDE...]: the run, NVML's utilization sampled beside it into DEST/NAME_gpu_util.csv
  local name=$1 recipe=$2 limit=$3
  shift 3
  echo "== $name: $recipe ($STEPS steps $*)"
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$DEST/${name}_gpu_util.csv" &
  local sampler=$!
  timeout "$limit" $HARNESS run "$recipe" "algorithm.num_steps=$STEPS" "$@" --out "$DEST/$name" --no-progress 2>&1 \
    | tail -15
  local code=${PIPESTATUS[0]}
  kill "$sampler" 2>/dev/null
  [ "$code" -eq 0 ] || { echo "gpu_e2e: $name exited $code; $DEST/$name/engine.log:" >&2; tail -30 "$DEST/$name/engine.log" >&2; }
  return "$code"
}
TRACED=$((STEPS + 1))  # after the timed steps: a traced step pays the tracing, so it is no throughput figure
run ours recipes/perf_grpo_dense_1b.yaml 300 "algorithm.num_steps=$TRACED" "profile.kernel_steps=[$TRACED,$TRACED]"
ours_rc=$?  # a run that died in its traced step still holds the timed ones: the ratio reads them, the exit says it
run trl recipes/perf_grpo_dense_1b_trl.yaml 240 || exit 1
echo "== ratio (steps 3-$STEPS)"
python3 bench/e2e_ratio.py "$DEST/ours" "$DEST/trl" --warmup 2 --json "$DEST/ratio.json" \
  --gpu-util "$DEST/ours_gpu_util.csv" "$DEST/trl_gpu_util.csv" || exit 1
[ "$ours_rc" -eq 0 ] || { echo "gpu_e2e: our run exited $ours_rc (its traced step $TRACED)" >&2; exit 1; }
if [ "${PERF_HYBRID:-0}" = 1 ]; then
  run hybrid recipes/perf_grpo_hybrid_1b.yaml 300 "algorithm.num_steps=$TRACED" "profile.kernel_steps=[$TRACED,$TRACED]" || exit 1
  python3 - "$DEST/hybrid" <<'PY' || exit 1  # no TRL twin of the hybrid layout: its own figures only
import json, sys
from pathlib import Path
sys.path.insert(0, "bench")
from e2e_ratio import summary
print("hybrid", json.dumps(summary(Path(sys.argv[1]), 2)))
PY
fi
