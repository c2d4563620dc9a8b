# Session 6, call G (one H200): Qwen3.5-35B-A3B at its full width (hidden 2048, 256 experts top-8,
# vocab 248,320) with 4 and 8 of its 40 hybrid layers on one GPU (EP 1, bf16, micro-batch 1 of
# 4096 tokens): the training peak against `harness plan`'s estimate for the same layout (issue 20:
# what one GPU allows before the 8 x H200 kind is lent).
. bench/gpu_setup.sh > /dev/null 2>&1 || exit 1
for n in 4 8; do
  timeout 160 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model qwen35_full --num-layers $n \
    --layers hybrid --rows 1 --mbs 1 --seq 4096 --steps 2 --warmup 1 --out $OUT/train.jsonl 2>&1 | tail -1 | cut -c1-600
done
# Follow-ups (same day): 2 layers at 4096 tokens and 4 layers at 2048, then 4 layers at 4096 with
# policy.activation_checkpointing (megatron's full recompute), each a separate call:
#   torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model qwen35_full --num-layers 2 \
#     --layers hybrid --rows 1 --mbs 1 --seq 4096 --steps 2 --warmup 1 --out $OUT/train.jsonl
#   ... --num-layers 4 --seq 2048 ...
#   ... --num-layers 4 --seq 4096 --activation-checkpointing ...
