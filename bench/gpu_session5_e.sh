# Session 5, call E (one H200): call D's VLM twin on one GPU after the 300-step warm start, at a
# lower GRPO learning rate (seed 123 collapsed from 0.34 to 0.10 at 6e-4 in call D): lr 3e-4 on
# seeds 42, 7, 123 and 2e-4 on seeds 7, 123, 30 steps each, side by side.
. bench/gpu_setup.sh || exit 1
R=/tmp/runs; mkdir -p $R
go() { lr=$1 s=$2; n=vlm1-lr$lr-$s
  (timeout 400 $HARNESS run recipes/qwen3_5_35b_vlm.yaml --scale h200x2 cluster.devices_per_node=1 \
     policy.parallel.ep=1 algorithm.num_steps=30 algorithm.seed=$s policy.optimizer.lr=$lr --no-progress \
     --out $R/$n > $R/$n.out 2>&1
   echo "$n rc=$?" >> $OUT/progress.log; cp $R/$n/metrics.jsonl $OUT/$n.metrics.jsonl) & }
go 3e-4 42; go 3e-4 7; go 3e-4 123; go 2e-4 7; go 2e-4 123
wait
for f in $OUT/*.metrics.jsonl; do python3 -c "
import json; r=[json.loads(l)['train/reward'] for l in open('$f')]
print('$(basename $f .metrics.jsonl)', len(r), 'first5', round(sum(r[:5])/5,3), 'last5', round(sum(r[-5:])/5,3), 'min', round(min(r),3))"; done
