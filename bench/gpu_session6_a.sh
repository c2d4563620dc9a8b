# Session 6, call A (2 x H200): the VLM twin (warm start to a loss, stop_at_loss 0.6) and the LLM
# twin, seeds 42, 7 and 123 each, all six side by side (each run a private Ray over both GPUs).
# Each run dir comes back as its own small tarball (no checkpoints) as soon as it ends;
# progress.log gets each run's exit code, wall time and, every 30 s, its last metrics line.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TORCHINDUCTOR_COMPILE_THREADS=4
R=/tmp/runs; mkdir -p $R
go() { name=$1; shift; (s0=$SECONDS; timeout 530 $HARNESS run "$@" --out $R/$name > $R/$name.out 2>&1; \
       echo "$name rc=$? wall_s=$((SECONDS - s0))" | tee -a $OUT/progress.log; cp $R/$name.out $R/$name/ 2>/dev/null; \
       tar czf $OUT/$name.tgz --exclude=checkpoints --exclude='*.pt' -C $R $name) & }
for s in 42 7 123; do go vlm-$s recipes/qwen3_5_35b_vlm.yaml --scale h200x2 algorithm.seed=$s; done
for s in 42 7 123; do go llm-$s recipes/qwen3_5_35b.yaml --scale h200x2 algorithm.seed=$s; done
for i in $(seq 1 17); do sleep 30; for n in vlm-42 vlm-7 vlm-123 llm-42 llm-7 llm-123; do
  echo "$((i*30))s $n $(tail -c 300 $R/$n/metrics.jsonl 2>/dev/null | tail -1 | cut -c1-160)" >> $OUT/progress.log; done; done &
wait
