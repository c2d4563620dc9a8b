#!/bin/bash
# The GPU machine's compile and warm-start caches, carried between device calls (each call starts
# on a bare machine): Triton's kernels and fla's autotuning results, inductor's compiled graphs and
# the engine's warm-start results (rl.warm_start, keyed by model, data, seed and device). A cold
# machine pays minutes for them at every first use (fla autotunes each kernel, inductor compiles each
# decode forward); with the cache the same code starts in seconds. Stale entries are harmless:
# each cache keys its entries by the code and versions that made them.
#
#   bash bench/gpu_cache.sh save FILE     # on the GPU machine: the caches as one .tar.xz (to $OUT)
#   bash bench/gpu_cache.sh restore       # on the GPU machine (bench/gpu_setup.sh does it): unpack
#                                         # bench/.work/gpu_cache.tar.xz when it was carried
#
# Where they live there: bench/gpu_setup.sh's exports (/tmp/triton, /tmp/inductor, /tmp/rl-cache).
set -uo pipefail
CARRIED=bench/.work/gpu_cache.tar.xz
DIRS=(triton inductor rl-cache)
case "${1:-}" in
  save)
    out=${2:?usage: bash bench/gpu_cache.sh save FILE}
    present=(); for d in "${DIRS[@]}"; do [ -d "/tmp/$d" ] && present+=("$d"); done
    [ ${#present[@]} -gt 0 ] || { echo "gpu cache: nothing to save"; exit 0; }
    tar -C /tmp -cf - "${present[@]}" | xz -T0 -6 > "$out" || exit 1
    echo "gpu cache: $(du -sh "$out" | cut -f1) in $out (${present[*]})" ;;
  restore)
    [ -f "$CARRIED" ] || { echo "gpu cache: none carried (a cold start)"; exit 0; }
    xz -dc "$CARRIED" | tar -C /tmp -xf - || exit 1
    echo "gpu cache: restored $(du -sh "$CARRIED" | cut -f1) from $CARRIED" ;;
  *) echo "usage: bash bench/gpu_cache.sh save FILE | restore" >&2; exit 2 ;;
esac
