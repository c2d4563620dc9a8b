#!/bin/bash
# Triton's autotuning results, carried between device calls (each call starts on a bare machine).
# fla autotunes each of its kernels on first use: every candidate configuration is compiled and
# timed, for the warm start's fp32 model, the trainer's bf16 one and the generator's, minutes on a
# cold machine with four runs compiling at once. Triton keeps each result as a small
# `*.autotune.json` in its cache (TRITON_CACHE_AUTOTUNING=1), keyed by Triton's version, the GPU,
# the kernel's source and the candidate list, so a stale entry is never used; with them carried,
# a kernel compiles its chosen configuration alone. The compiled kernels (~220 MB), inductor's
# graphs and the warm starts' weights stay behind: they do not fit a call's 64 MiB.
#
#   bash bench/gpu_cache.sh save FILE     # on the GPU machine: the autotuning results as .tar.xz (to $OUT)
#   bash bench/gpu_cache.sh restore       # on the GPU machine (bench/gpu_setup.sh does it): unpack
#                                         # bench/.work/gpu_cache.tar.xz when it was carried, else
#                                         # bench/triton_autotune_h200.tar.xz, the committed one
#
# bench/triton_autotune_h200.tar.xz: the 59 results of the smoke suite's kernels and the full-width
# cut's (`full-width-grpo`) on one H200 (Triton 3.6, fla-core 0.6.0), saved 2026-12-04 at 8963103;
# with the smoke suite's alone it ran in 310 s against more than 515 s on a bare machine
# (bench/results/gpu_smoke.jsonl). Refresh it with
# `save` after a change to those versions or to the kernels' shapes.
set -uo pipefail
CARRIED=bench/.work/gpu_cache.tar.xz
[ -f "$CARRIED" ] || CARRIED=bench/triton_autotune_h200.tar.xz
case "${1:-}" in
  save)
    out=${2:?usage: bash bench/gpu_cache.sh save FILE}
    [ -d /tmp/triton ] || { echo "gpu cache: nothing to save"; exit 0; }
    (cd /tmp && find triton -name '*.autotune.json' -print0 | tar --null -T - -cf - | xz -T0 -9 > "$out") || exit 1
    echo "gpu cache: $(find /tmp/triton -name '*.autotune.json' | wc -l) autotuning results, $(du -sh "$out" | cut -f1) in $out" ;;
  restore)
    [ -f "$CARRIED" ] || { echo "gpu cache: none carried (a cold start)"; exit 0; }
    mkdir -p /tmp/triton && xz -dc "$CARRIED" | tar -C /tmp -xf - || exit 1
    echo "gpu cache: restored $(find /tmp/triton -name '*.autotune.json' | wc -l) autotuning results from $CARRIED" ;;
  *) echo "usage: bash bench/gpu_cache.sh save FILE | restore" >&2; exit 2 ;;
esac
