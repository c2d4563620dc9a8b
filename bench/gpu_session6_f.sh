# NOT YET RUN (the 2 x H200 kind was withdrawn in session 6): run it when that kind is lent.
# Session 6, planned call (2 x H200): the refit channel over NCCL. The dense twin with one policy rank
# on GPU 0 and the generator on GPU 1 (generation.colocated false: rank 0 broadcasts the weights
# over a group of two each step), 20 steps; then the same run colocated on one GPU (CUDA IPC) to
# compare refit seconds and the generator's agreement (train/gen_kl_error).
. bench/gpu_setup.sh > /dev/null 2>&1 || exit 1
for mode in false true; do
  timeout 240 $HARNESS run recipes/arith_grpo_cpu.yaml --scale h200x2 cluster.devices_per_node=1 \
    generation.colocated=$mode algorithm.num_steps=20 --out /tmp/refit-$mode > $OUT/refit-$mode.out 2>&1
  echo "colocated=$mode rc=$?" | tee -a $OUT/progress.log
  cp /tmp/refit-$mode/metrics.jsonl $OUT/refit-$mode.metrics.jsonl
done
