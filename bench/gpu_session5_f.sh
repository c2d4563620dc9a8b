# Session 5, call F (one H200): why does VLM twin seed 123 fall to chance (calls D, E)? The same
# 30-step run on one GPU (a) with the megatron policy in fp32 instead of bf16, (b) on the torch
# backend (the HF model, fp32), (c) as called D ran it (megatron bf16), side by side.
. bench/gpu_setup.sh || exit 1
R=/tmp/runs; mkdir -p $R
go() { n=$1; shift
  (timeout 420 $HARNESS run recipes/qwen3_5_35b_vlm.yaml --scale h200x2 cluster.devices_per_node=1 \
     policy.parallel.ep=1 algorithm.num_steps=30 algorithm.seed=123 --no-progress --out $R/$n "$@" > $R/$n.out 2>&1
   echo "$n rc=$?" >> $OUT/progress.log; cp $R/$n/metrics.jsonl $OUT/$n.metrics.jsonl; tail -3 $R/$n.out >> $OUT/progress.log) & }
go fp32 policy.precision=fp32
go torch policy.backend=torch policy.precision=fp32
go bf16
wait
cat $OUT/progress.log | cut -c1-300
for f in $OUT/*.metrics.jsonl; do python3 -c "
import json; r=[json.loads(l)['train/reward'] for l in open('$f')]
print('$(basename $f .metrics.jsonl)', len(r), [round(x,2) for x in r])"; done
