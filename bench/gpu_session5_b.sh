# Session 5, call B (one H200): the parity recipe (legacy vs TQ, tolerance 0) on one H200 with the
# CUDA-graph decoder, then generation tokens/s against HF `generate` in the same call.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
R=/tmp/runs; mkdir -p $R
s0=$SECONDS
timeout 330 $HARNESS run recipes/arith_grpo_cpu_parity.yaml --scale h200x2 cluster.devices_per_node=1 \
  --out $R/parity > $R/parity.out 2>&1
echo "parity rc=$? wall_s=$((SECONDS - s0))" | tee $OUT/progress.log
tail -25 $R/parity.out; cp $R/parity.out $R/parity/
tar czf $OUT/parity.tgz --exclude=checkpoints --exclude='*.pt' -C $R parity
G=$OUT/generation.jsonl
timeout 120 python3 bench/bench_generation.py --model twin --batch 64 --prompt 32 --new 256 \
  --variants ours_graphs,hf_static,ours_eager --out $G 2>&1 | grep '^{' | tail -5
