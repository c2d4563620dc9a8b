# Session 7, call B (one H200): where the hybrid layout's time goes. bench/gdn_check.py (fixed
# inputs; timings of fla's rule and of our backward piece eager and compiled); dense_1b all
# attention and hybrid with compiled layers, the hybrid one also eager and under torch.profiler.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
timeout 200 python3 bench/gdn_check.py 2>&1 | tail -6 | tee $OUT/gdn_check.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
run() { timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --out $T "$@" \
        > /tmp/last.log 2>&1; rc=$?; echo "rc=$rc $*"; tail -2 /tmp/last.log | cut -c1-300; return $rc; }
run --compile-layers --model dense_1b
run --compile-layers --model dense_1b --layers hybrid --profile $OUT/profile_hybrid_compiled.txt
run --model dense_1b --layers hybrid
