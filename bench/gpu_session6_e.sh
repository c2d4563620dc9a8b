# Session 6, calls E and F (one H200): moe_1b with grouped experts and compiled layers at larger
# micro-batches (call D's profile: the GPU busy 123 ms of a 343 ms step, so the step is bound by the
# host's per-micro-batch launches and gradient-accumulation hooks, not by the GPU).
. bench/gpu_setup.sh > /dev/null 2>&1; export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
for m in 8 16; do   # call E
  timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model moe_1b --compile-layers --mbs $m --out $OUT/train.jsonl 2>&1 | tail -1
done
# call F: 32 rows of 1024 tokens in one micro-batch
timeout 150 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model moe_1b --compile-layers --rows 32 --mbs 32 --out $OUT/train.jsonl 2>&1 | tail -1
