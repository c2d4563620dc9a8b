# Prepared in session 8 for the next 2 x H200 call: issue 10's refit over NCCL (generation on its
# own GPU, `generation.colocated: false`, never run on GPUs) against the colocated refit; then
# issue 11's two-GPU rows through the one command, bench/throughput.py: the anchor and dense_1b on
# one GPU and DP2 at micro-batch 16, moe_1b EP2 at 32k-token micro-batches (one GPU reached 26.8%
# MFU at that shape).
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton
for mode in false true; do
  timeout 150 $HARNESS run recipes/arith_grpo_cpu.yaml --scale h200x2 cluster.devices_per_node=1 \
    generation.colocated=$mode algorithm.num_steps=20 --out /tmp/refit-$mode > $OUT/refit-$mode.out 2>&1
  echo "colocated=$mode rc=$?"; cp /tmp/refit-$mode/metrics.jsonl $OUT/refit-$mode.metrics.jsonl
done
python3 bench/throughput.py --only anchor,dense,dense_dp2,moe_ep2 --out $OUT/train.jsonl 2>&1 | tail -14
