# Prepared in session 7 for the next device call (one H200): a torch.profiler table of one hybrid
# step (eager layers, so the profile needs no compile), and issue 10's VLM generation: the h200x2
# VLM twin's decoders with an image per prompt (the engine's eager loop made ~265 tokens/s).
. bench/gpu_setup.sh || exit 1
timeout 200 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --layers hybrid \
    --steps 4 --warmup 2 --profile $OUT/profile_hybrid_eager.txt --out $OUT/train.jsonl > /tmp/p.log 2>&1; echo "rc=$?"
tail -1 /tmp/p.log | cut -c1-200
timeout 200 python3 bench/bench_generation.py --model vlm_twin --batch 64 --new 256 \
    --variants ours_graphs,ours_static,ours_eager,hf_dynamic --out $OUT/generation.jsonl
