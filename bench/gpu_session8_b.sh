# Session 8, call 2 (one H200): issue 11's hybrid layout with its gated-delta-net layers compiled
# around the recurrence (the engine's choice since call 1's profiles), against the anchor and
# dense_1b all attention, 7 timed steps each; then one profiled compiled hybrid step and the
# whole-layer compile as the A/B, as far as the call's time allows.
. bench/gpu_setup.sh || exit 1
export TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T0=$(date +%s); T=$OUT/train.jsonl
left() { echo $(( 575 - ($(date +%s) - T0) )); }
stamp() { echo "t=$(( $(date +%s) - T0 ))s $*"; }
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T; stamp anchor
run() { name=$1; shift; t=$(left); [ $t -gt 30 ] || { stamp "skip $name"; return; }
        timeout $t torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py "$@" > $OUT/$name.log 2>&1
        stamp "rc=$? $name $*"; grep '^{' $OUT/$name.log | tail -1 | cut -c1-400; }
run dense --compile-layers --model dense_1b --out $T
run hybrid_around --compile-layers --model dense_1b --layers hybrid --out $T
run hybrid_around_profile --compile-layers --model dense_1b --layers hybrid --steps 2 --warmup 2 \
    --profile $OUT/profile_hybrid_compiled.txt
run hybrid_whole --compile-layers --model dense_1b --layers hybrid --gdn-compile whole --out $T
