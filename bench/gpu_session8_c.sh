# Prepared in session 7 for the next 2 x H200 call: issue 10's VLM seed 7 as a whole run (session
# 6 cut it at step 67: its warm start shared the GPUs with five other runs) beside the refit over
# NCCL (bench/gpu_session6_f.sh, never run), then issue 11's moe_1b EP2 at 32k-token micro-batches
# with the anchor (one GPU reached 26.8% MFU at that shape).
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
R=/tmp/runs; mkdir -p $R
(s0=$SECONDS; timeout 420 $HARNESS run recipes/qwen3_5_35b_vlm.yaml --scale h200x2 algorithm.seed=7 --out $R/vlm-7 \
   > $R/vlm-7.out 2>&1; echo "vlm-7 rc=$? wall_s=$((SECONDS - s0))" | tee -a $OUT/progress.log; cp $R/vlm-7.out $R/vlm-7/;
 tar czf $OUT/vlm-7.tgz --exclude=checkpoints --exclude='*.pt' -C $R vlm-7) &
for mode in false true; do
  timeout 200 $HARNESS run recipes/arith_grpo_cpu.yaml --scale h200x2 cluster.devices_per_node=1 \
    generation.colocated=$mode algorithm.num_steps=20 --out /tmp/refit-$mode > $OUT/refit-$mode.out 2>&1
  echo "colocated=$mode rc=$?" | tee -a $OUT/progress.log
  cp /tmp/refit-$mode/metrics.jsonl $OUT/refit-$mode.metrics.jsonl
done
wait
T=$OUT/train.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
timeout 150 torchrun --standalone --nproc_per_node 2 bench/megatron_gpu.py --compile-layers --model moe_1b --ep 2 \
  --rows 32 --mbs 32 --out $T > /tmp/moe.log 2>&1; echo "moe ep2 rc=$?"; tail -1 /tmp/moe.log | cut -c1-200
