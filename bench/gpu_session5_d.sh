# Session 5, call D (one H200; the 2 x H200 kind was not lent): does the 300-step warm start lift
# every seed of the VLM twin off chance on the GPU? The h200x2 VLM twin squeezed onto one GPU
# (one policy rank, EP 1), 30 steps, seeds 42, 7 and 123 side by side; metrics come back.
. bench/gpu_setup.sh || exit 1
R=/tmp/runs; mkdir -p $R
for s in 42 7 123; do
  (timeout 400 $HARNESS run recipes/qwen3_5_35b_vlm.yaml --scale h200x2 cluster.devices_per_node=1 \
     policy.parallel.ep=1 algorithm.num_steps=30 algorithm.seed=$s --no-progress --out $R/vlm1-$s > $R/vlm1-$s.out 2>&1
   echo "vlm1-$s rc=$?" >> $OUT/progress.log; cp $R/vlm1-$s/metrics.jsonl $OUT/vlm1-$s.metrics.jsonl
   grep -i "warm start" $R/vlm1-$s/engine.log | tail -1 >> $OUT/progress.log) &
done
wait
cat $OUT/progress.log
for s in 42 7 123; do python3 -c "
import json,sys; r=[json.loads(l)['train/reward'] for l in open('$OUT/vlm1-$s.metrics.jsonl')]
print('seed $s', len(r), 'first5', round(sum(r[:5])/5,3), 'last5', round(sum(r[-5:])/5,3))"; done
