# Session 6, call D (one H200): where a moe_1b step goes with grouped experts and compiled layers
# (torch.profiler table of one step, rank 0), to direct the MoE work of issue 11.
. bench/gpu_setup.sh > /dev/null 2>&1 || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
timeout 200 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model moe_1b --compile-layers \
  --out $OUT/train.jsonl --profile $OUT/profile_moe_1b.txt 2>&1 | tail -2
head -c 9000 $OUT/profile_moe_1b.txt
