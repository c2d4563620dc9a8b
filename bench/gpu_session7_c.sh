# Session 7, call C (one H200): issue 11's hybrid ratio with fla's kernels and our compiled
# backward piece (bench/gdn_check.py first: correctness on the GPU), beside the torch.compile
# anchor and dense_1b all attention. The hybrid layout at Qwen3.5-35B-A3B's proportions of
# linear to attention widths ("scaled", the default) and at the HF config's default widths.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
timeout 200 python3 bench/gdn_check.py 2>&1 | tail -4 | tee $OUT/gdn_check.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
run() { timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --out $T "$@" \
        > /tmp/last.log 2>&1; rc=$?; echo "rc=$rc $*"; tail -2 /tmp/last.log | cut -c1-300; return $rc; }
run --compile-layers --model dense_1b
run --compile-layers --model dense_1b --layers hybrid
run --compile-layers --model dense_1b --layers hybrid --linear-widths hf
