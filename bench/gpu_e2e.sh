#!/usr/bin/env bash
# End-to-end GRPO throughput on one H200, ours against TRL's GRPOTrainer, from one recipe:
#
#   bash bench/gpu_e2e.sh          # on the GPU machine, repository root; carry bench/.work/wheels
#
# The wheels: ../shared/tools/stage-gpu-wheels bench/.work/wheels $(grep -v '^#' bench/gpu_wheels.txt | grep -v antlr)
# (bench/gpu_wheels.txt names TRL's: trl, datasets, dill, multiprocess). Steps, each stopping the
# script when it fails: the smoke suite (bench/gpu_smoke.sh); recipes/perf_grpo_dense_1b.yaml by
# our engine (6 steps); recipes/perf_grpo_dense_1b_trl.yaml, the same recipe by TRL (6 steps);
# bench/e2e_ratio.py over both, the first 2 steps left out as warm-up (compilation, CUDA graphs).
# Prints tokens/s/GPU of both, the ratio, each phase's median seconds and each run's GPU-busy
# fraction over the timed steps (NVML utilization sampled beside it; bench/gpu_busy.py). Writes under
# $OUT/e2e/: both run dirs, ratio.json and machine.json (machine, date, commit) for bench/results/.
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

echo "== smoke suite"
bash bench/gpu_smoke.sh || { echo "gpu_e2e: the smoke suite failed; no throughput run" >&2; exit 1; }

STEPS=${E2E_STEPS:-6}
run() {  # run NAME RECIPE LIMIT_S: the run, with NVML's utilization sampled beside it into DEST/NAME_gpu_util.csv
  echo "== $1: $2 ($STEPS steps)"
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$DEST/$1_gpu_util.csv" &
  local sampler=$!
  timeout "$3" $HARNESS run "$2" "algorithm.num_steps=$STEPS" --out "$DEST/$1" --no-progress 2>&1 | tail -15
  local code=${PIPESTATUS[0]}
  kill "$sampler" 2>/dev/null
  [ "$code" -eq 0 ] || { echo "gpu_e2e: $1 exited $code; $DEST/$1/engine.log:" >&2; tail -30 "$DEST/$1/engine.log" >&2; }
  return "$code"
}
run ours recipes/perf_grpo_dense_1b.yaml 300 || exit 1
run trl recipes/perf_grpo_dense_1b_trl.yaml 240 || exit 1
echo "== ratio (steps 3-$STEPS)"
python3 bench/e2e_ratio.py "$DEST/ours" "$DEST/trl" --warmup 2 --json "$DEST/ratio.json" \
  --gpu-util "$DEST/ours_gpu_util.csv" "$DEST/trl_gpu_util.csv" || exit 1
if [ "${PERF_HYBRID:-0}" = 1 ]; then
  run hybrid recipes/perf_grpo_hybrid_1b.yaml 300 || exit 1
  python3 - "$DEST/hybrid" <<'PY' || exit 1  # no TRL twin of the hybrid layout: its own figures only
import json, sys
from pathlib import Path
sys.path.insert(0, "bench")
from e2e_ratio import summary
print("hybrid", json.dumps(summary(Path(sys.argv[1]), 2)))
PY
fi
