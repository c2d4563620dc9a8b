# Session 5, call A (2 x H200): the VLM twin (300-step warm start) on seeds 42, 7, 123, the LLM
# twin on seeds 7 and 123 (CUDA-graph decode; seed 42 ran in session 4), and the parity recipe
# legacy vs TQ on one H200 with the graph decoder. Each run dir comes back as its own small
# tarball (no checkpoints) as soon as it ends; progress.log gets each run's last metrics line.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TORCHINDUCTOR_COMPILE_THREADS=4
R=/tmp/runs; mkdir -p $R
go() { name=$1; shift; (s0=$SECONDS; timeout 520 $HARNESS run "$@" --out $R/$name > $R/$name.out 2>&1; \
       echo "$name rc=$? wall_s=$((SECONDS - s0))" | tee -a $OUT/progress.log; cp $R/$name.out $R/$name/ 2>/dev/null; \
       tar czf $OUT/$name.tgz --exclude=checkpoints --exclude='*.pt' -C $R $name) & }
for s in 42 7 123; do go vlm-$s recipes/qwen3_5_35b_vlm.yaml --scale h200x2 algorithm.seed=$s; done
for s in 7 123; do go llm-$s recipes/qwen3_5_35b.yaml --scale h200x2 algorithm.seed=$s; done
go parity recipes/arith_grpo_cpu_parity.yaml --scale h200x2 cluster.devices_per_node=1
for i in $(seq 1 17); do sleep 30; for n in vlm-42 vlm-7 vlm-123 llm-7 llm-123; do
  echo "$((i*30))s $n $(tail -c 300 $R/$n/metrics.jsonl 2>/dev/null | tail -1 | cut -c1-160)" >> $OUT/progress.log; done; done &
wait
