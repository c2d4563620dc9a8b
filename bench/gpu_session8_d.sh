# Session 8, call 4 (one H200): the engine's VLM path with `generation.decode: auto`, now CUDA
# graphs for a vision model, against the eager loop it used before; the h200x2 VLM twin squeezed
# onto one GPU (EP 1), 10 GRPO steps after a 50-step warm start, so its reward checks are not the
# point: the run must finish and its metrics give generation tokens/s on both loops.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
R=/tmp/runs; mkdir -p $R; T0=$(date +%s)
for decode in auto eager; do
  timeout 200 $HARNESS run recipes/qwen3_5_35b_vlm.yaml --scale h200x2 cluster.devices_per_node=1 policy.parallel.ep=1 \
      algorithm.num_steps=10 algorithm.warm_start.steps=50 generation.decode=$decode --out $R/vlm-$decode \
      > $R/vlm-$decode.out 2>&1
  rc=$?; echo "t=$(( $(date +%s) - T0 ))s decode=$decode rc=$rc"; tail -3 $R/vlm-$decode.out | cut -c1-200
  cp $R/vlm-$decode.out $R/vlm-$decode/ 2>/dev/null
  tar czf $OUT/vlm-$decode.tgz --exclude=checkpoints --exclude='*.pt' -C $R vlm-$decode
done
