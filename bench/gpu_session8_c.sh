# Session 8, call 3 (one H200): call 2's compiled hybrid step was host-bound (the GPU busy 235 ms of
# its 434 ms; all attention 246 ms, GPU-bound). Fewer, larger micro-batches divide the host work:
# hybrid against all attention at micro-batches 16 and 8 (16 rows x 1024 per step), beside the
# anchor; then moe_1b on one GPU at micro-batch 4 with the stacked expert parameters (session 6:
# 47,813 tokens/s, 9.0%, before them).
. bench/gpu_setup.sh || exit 1
export TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T0=$(date +%s); T=$OUT/train.jsonl
left() { echo $(( 570 - ($(date +%s) - T0) )); }
stamp() { echo "t=$(( $(date +%s) - T0 ))s $*"; }
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T; stamp anchor
run() { name=$1; shift; t=$(left); [ $t -gt 30 ] || { stamp "skip $name"; return; }
        timeout $t torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --compile-layers --out $T "$@" \
            > $OUT/$name.log 2>&1
        stamp "rc=$? $name $*"; grep '^{' $OUT/$name.log | tail -1 | cut -c1-400; }
run full_mbs16 --model dense_1b --mbs 16
run hybrid_mbs16 --model dense_1b --layers hybrid --mbs 16
run hybrid_mbs8 --model dense_1b --layers hybrid --mbs 8
run full_mbs8 --model dense_1b --mbs 8
run moe_mbs4 --model moe_1b --mbs 4
