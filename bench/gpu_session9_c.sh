# Prepared in session 8 for the next one-H200 call (issue 11): first fla_ops against fla's own
# functions (`gdn_check.py ops`), then the hybrid layout's A/B at micro-batch 4, where its step is
# host-bound: compiled around fla's kernels (the engine's) against whole with the kernels as custom
# ops (`--gdn-compile ops`), beside the anchor and all attention; then ops at micro-batch 16.
# fla autotunes every kernel on first use (about 2 minutes in session 8's runs): the autotune
# cache is kept for the later runs of the call and comes back as triton_cache.tgz.
. bench/gpu_setup.sh || exit 1
export TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T0=$(date +%s); T=$OUT/train.jsonl
left() { echo $(( 560 - ($(date +%s) - T0) )); }
stamp() { echo "t=$(( $(date +%s) - T0 ))s $*"; }
timeout 200 python3 bench/gdn_check.py ops 2>&1 | grep '^{'; stamp "gdn_check ops"
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T; stamp anchor
run() { name=$1; shift; t=$(left); [ $t -gt 30 ] || { stamp "skip $name"; return; }
        timeout $t torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --compile-layers --out $T "$@" \
            > $OUT/$name.log 2>&1
        stamp "rc=$? $name $*"; grep '^{' $OUT/$name.log | tail -1 | cut -c1-400; }
run hybrid_ops --model dense_1b --layers hybrid --gdn-compile ops
run full --model dense_1b
run hybrid_around --model dense_1b --layers hybrid
run hybrid_ops_mbs16 --model dense_1b --layers hybrid --gdn-compile ops --mbs 16
run hybrid_logprob16 --model dense_1b --layers hybrid --logprob-mbs 16  # policy.logprob_batch_size 16 at mbs 4
tar czf $OUT/triton_cache.tgz -C /tmp triton 2>/dev/null; ls -la $OUT/triton_cache.tgz
