# Session 7, call A (one H200): issue 11's hybrid layout with fla's kernels. fla-core 0.6.0 with
# our torch backward for the kernel it refuses under this image's Triton (bench/gdn_check.py:
# correctness against megatron's torch rule, and speed); then the torch.compile anchor, dense_1b
# all attention and dense_1b hybrid (3 gated-delta-net : 1 attention) in the same call.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
python3 -c "import fla, triton, torch; print('fla', fla.__version__, 'triton', triton.__version__, 'torch', torch.__version__)"
timeout 150 python3 bench/gdn_check.py 2>&1 | tail -5 | tee $OUT/gdn_check.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
run() { timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --out $T "$@" \
        > /tmp/last.log 2>&1; rc=$?; echo "rc=$rc $*"; tail -3 /tmp/last.log | cut -c1-600; return $rc; }
run --compile-layers --model dense_1b
run --compile-layers --model dense_1b --layers hybrid || run --model dense_1b --layers hybrid
cat $T
