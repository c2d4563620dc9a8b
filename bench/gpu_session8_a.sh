# Session 8, call 1 (one H200): where the hybrid layout's step goes. torch.profiler tables (and
# gzipped chrome traces) of one eager step, hybrid and all attention, so the difference can be read
# per kernel; then issue 10's VLM generation (the h200x2 VLM twin's decoders, an image per prompt).
. bench/gpu_setup.sh || exit 1
# fla autotunes each kernel on first use; keep the results for the later runs of this call.
export TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
stamp() { echo "t=$(( $(date +%s) - T0 ))s $*"; }
T0=$(date +%s)
for layers in hybrid full; do
  timeout 220 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --layers $layers \
      --steps 2 --warmup 2 --profile $OUT/profile_${layers}_eager.txt --out $OUT/train.jsonl > $OUT/p_$layers.log 2>&1
  stamp "rc=$? $layers"; tail -1 $OUT/p_$layers.log | cut -c1-300
done
timeout 200 python3 bench/bench_generation.py --model vlm_twin --batch 64 --new 256 \
    --variants ours_graphs,ours_static,ours_eager,hf_dynamic --out $OUT/generation.jsonl > $OUT/gen.log 2>&1
stamp "rc=$? vlm generation"; tail -5 $OUT/gen.log | cut -c1-300
