# Session 4, call B (one H200): generation tokens/s, ours against HF `generate`, then the training
# anchor and our megatron backend with policy.compile, each alone on the GPU. JSON lines in $OUT.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
G=$OUT/generation.jsonl T=$OUT/train.jsonl
timeout 170 python3 bench/bench_generation.py --model twin --batch 64 --prompt 32 --new 256 --out $G 2>&1 | grep -v Warning | tail -8
timeout 170 python3 bench/bench_generation.py --model dense_1b --layers hybrid --batch 64 --prompt 32 --new 256 \
  --variants ours_graphs,ours_eager,hf_static --repeats 2 --out $G 2>&1 | grep -v Warning | tail -5
timeout 90 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
timeout 120 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --compile-layers --out $T 2>&1 | tail -2
