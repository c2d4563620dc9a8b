# Session 5, call C (one H200): the training anchor and our megatron backend with policy.compile
# after the graph-break fix (one graph per layer), same call; then a profile of our step.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --compile-layers --out $T 2>&1 | tail -2
timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --compile-layers \
  --profile $OUT/profile_compiled.txt 2>&1 | tail -1
head -c 5000 $OUT/profile_compiled.txt
