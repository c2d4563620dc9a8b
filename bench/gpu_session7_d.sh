# Session 7, call D (one H200, the session's last device minutes): issue 11's hybrid ratio at
# Qwen3.5-35B-A3B's proportions of linear to attention widths, fla's kernels with our backward
# piece taken into the compiled layer's graph, beside dense_1b all attention in the same call.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
run() { t=$1; shift; timeout $t torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --out $T "$@" \
        > /tmp/last.log 2>&1; rc=$?; echo "rc=$rc $*"; tail -1 /tmp/last.log | cut -c1-200; return $rc; }
run 100 --compile-layers --model dense_1b
run 200 --compile-layers --model dense_1b --layers hybrid
cat $T
