# Session 4, call C (one H200): generation with the compiled decode forward inside our CUDA graph,
# against HF `generate` (static cache, compiled), then a profile of our compiled megatron step.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
G=$OUT/generation.jsonl T=$OUT/train.jsonl
timeout 150 python3 bench/bench_generation.py --model twin --batch 64 --prompt 32 --new 256 \
  --variants ours_graphs,hf_static,ours_eager --out $G 2>&1 | grep '^{' | tail -5
timeout 170 python3 bench/bench_generation.py --model dense_1b --layers hybrid --batch 64 --prompt 32 --new 256 \
  --variants ours_graphs,hf_static --repeats 2 --out $G 2>&1 | grep '^{' | tail -5
timeout 120 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --compile-layers \
  --profile $OUT/profile_compiled.txt --out $T 2>&1 | tail -1
head -c 6000 $OUT/profile_compiled.txt
