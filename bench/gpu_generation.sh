#!/bin/bash
# One device call of issue 31's generation figures: the GPU smoke suite first, with the decode
# kernels' tests and untimed warm-ups of every timed run beside it (they fill inductor's, Triton's and
# the autotuners' caches, so each timed variant's first call takes seconds, not a minute), then the
# timed runs in order, each only while the call's time still holds it.
#
#   BENCH_COMMIT=<sha> bash bench/gpu_generation.sh [SHAPES [VARIANTS]]    # carry bench/.work
#
#   SHAPES    layers:batch pairs of dense_1b at 128 + 256 tokens (hybrid:64,full:256; the default
#             hybrid:64,full:64)
#   VARIANTS  bench/bench_generation.py's (default ours_graphs,hf_static); one whose warm-up raised
#             is left out of its timed run (one the warm-up's time limit cut is kept)
#   AB        more variants timed at the first shape only (a one-part A/B beside VARIANTS there)
#   CALL_S    the seconds the call may run (default 590); KERNELS=1 also times bench/decode_kernels.py
#   PROFILE   a shape (full:64) whose timed run also writes ours_graphs' kernel table to
#             $OUT/generation_dense_1b_<layers>_batch<batch>_graphs_<date>.txt
#
# Rows: $OUT/gpu_smoke.jsonl, $OUT/generation.jsonl (and decode_kernels.jsonl), stamped as
# bench/gpu.sh stamps them; $OUT/timeline.log says when each part ended. A red smoke stops the call.
set -uo pipefail
SHAPES=${1:-hybrid:64,full:64}
VARIANTS=${2:-ours_graphs,hf_static}
RESULTS=${OUT:-bench/results}
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( ${CALL_S:-590} - $(elapsed) )); }
mark() { echo "$1 at $(elapsed) s" | tee -a "$RESULTS/timeline.log"; }
. bench/gpu_setup.sh > /dev/null || exit 1
mkdir -p "$RESULTS" /tmp/gpu-generation
rm -f /tmp/gpu-generation/*
GEN=(python3 bench/bench_generation.py --model dense_1b --prompt 128 --new 256)

(SMOKE_TIMEOUT_S=480 bash bench/gpu_smoke.sh > /tmp/gpu-generation/smoke.log 2>&1; echo $? > /tmp/gpu-generation/smoke_rc) &
smoke=$!
( timeout 200 python3 -m pytest -q -p no:cacheprovider tests/rl/test_flash_decode.py tests/rl/test_decode_attention.py \
    tests/rl/test_gdn_decode.py tests/rl/test_logit_stats.py tests/rl/test_draw_kernel.py tests/rl/test_attention_step.py > "$RESULTS/kernel_tests.log" 2>&1
  mark "kernel tests: exit $?"
  if [ -n "${KERNELS:-}" ]; then timeout 240 python3 bench/decode_kernels.py --warm > /dev/null 2>&1; mark "kernels warm: exit $?"; fi
) &
tests=$!
FIRST=${SHAPES%%,*}
variants_of() { if [ "$1" = "$FIRST" ] && [ -n "${AB:-}" ]; then echo "$VARIANTS,$AB"; else echo "$VARIANTS"; fi; }
( for shape in ${SHAPES//,/ }; do
    timeout 300 "${GEN[@]}" --layers "${shape%%:*}" --batch "${shape##*:}" --variants "$(variants_of "$shape")" --warm 2>&1 \
      | grep '"ok": false' | sed "s/^/$shape /" >> /tmp/gpu-generation/warm_failed
    mark "warm $shape"
  done ) &
warm=$!

wait $smoke
rc=$(cat /tmp/gpu-generation/smoke_rc 2>/dev/null || echo 1)
mark "smoke: exit $rc"
rm -f "$RESULTS/gpu_smoke_runs.tgz"   # the run dirs stay on the machine: the call returns 8 files at most
if [ "$rc" != 0 ]; then kill $tests $warm 2>/dev/null; tail -20 /tmp/gpu-generation/smoke.log; exit 1; fi
wait $tests $warm

record() { grep --line-buffered -v Warning | python3 bench/record.py --out "$RESULTS/$1.jsonl" --command "$2"; }
for shape in ${SHAPES//,/ }; do
  all=$(variants_of "$shape")
  timed=$(for v in ${all//,/ }; do
    grep -q "^$shape {\"warm\": \"$v\"," /tmp/gpu-generation/warm_failed 2>/dev/null || echo "$v"; done | paste -sd,)
  [ -n "$timed" ] && [ "$(left)" -gt 60 ] || { mark "skipped $shape"; continue; }
  prof=(); [ "$shape" = "${PROFILE:-none}" ] && \
    prof=(--profile "$RESULTS/generation_dense_1b_${shape%%:*}_batch${shape##*:}_graphs_$(date +%F).txt")
  timeout $(( $(left) - 5 )) "${GEN[@]}" --layers "${shape%%:*}" --batch "${shape##*:}" --repeats 3 --variants "$timed" \
    "${prof[@]}" 2>&1 \
    | record generation "GEN_VARIANTS=$timed bash bench/gpu.sh generation-shapes ${shape%%:*} ${shape##*:}" > /dev/null
  mark "timed $shape ($timed)"
done
if [ -n "${KERNELS:-}" ] && [ "$(left)" -gt 40 ]; then
  timeout $(( $(left) - 5 )) python3 bench/decode_kernels.py 2>&1 | record decode_kernels "bash bench/gpu.sh decode-kernels" > /dev/null
  mark "timed decode kernels"
fi
tail -2 "$RESULTS/kernel_tests.log"
cat /tmp/gpu-generation/warm_failed 2>/dev/null | sed 's/^/warm-up failed: /'
cut -c1-400 "$RESULTS/generation.jsonl" 2>/dev/null
