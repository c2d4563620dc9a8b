# Prepared in session 8 for the next 2 x H200 call: issue 10's refit over NCCL (generation on its
# own GPU, `generation.colocated: false`, never run on GPUs) against the colocated refit; then
# issue 11's two-GPU rows with the anchor: moe_1b EP2 at 32k-token micro-batches (one GPU reached
# 26.8% MFU at that shape) and dense_1b DP2 against our one GPU.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton
for mode in false true; do
  timeout 150 $HARNESS run recipes/arith_grpo_cpu.yaml --scale h200x2 cluster.devices_per_node=1 \
    generation.colocated=$mode algorithm.num_steps=20 --out /tmp/refit-$mode > $OUT/refit-$mode.out 2>&1
  echo "colocated=$mode rc=$?"; cp /tmp/refit-$mode/metrics.jsonl $OUT/refit-$mode.metrics.jsonl
done
T=$OUT/train.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
run() { n=$1; shift; timeout 110 torchrun --standalone --nproc_per_node $n bench/megatron_gpu.py --compile-layers \
        --out $T "$@" > /tmp/last.log 2>&1; echo "rc=$? $*"; grep '^{' /tmp/last.log | tail -1 | cut -c1-200; }
run 2 --model moe_1b --ep 2 --rows 32 --mbs 32
run 1 --model dense_1b
run 2 --model dense_1b --distributed-optimizer
