# Session 4, call A (2 x H200): the h200x2 twins through `harness run`, all at once on the two GPUs
# (each step time includes its neighbours'): three LLM seeds, three VLM seeds, and the CPU
# parity recipe on one GPU (legacy vs TQ). Run dirs come back as one tarball.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
R=/tmp/runs; mkdir -p $R
go() { name=$1; shift; (s0=$SECONDS; timeout 540 $HARNESS run "$@" --out $R/$name > $R/$name.out 2>&1; \
       echo "$name rc=$? wall_s=$((SECONDS - s0))" >> $R/rcs) & }
for s in 42 7 123; do go llm-$s recipes/qwen3_5_35b.yaml --scale h200x2 algorithm.seed=$s; done
for s in 42 7 123; do go vlm-$s recipes/qwen3_5_35b_vlm.yaml --scale h200x2 algorithm.seed=$s; done
go parity recipes/arith_grpo_cpu_parity.yaml --scale h200x2 cluster.devices_per_node=1
sleep 90; tail -n 2 $R/*.out | grep -v "^$" | tail -20
wait
cat $R/rcs
for f in $R/*.out; do echo "== $f"; tail -6 $f; done
for d in $R/*/; do grep -h -B2 -A6 "Traceback\|Error" $d/engine.log 2>/dev/null | tail -12; done
tar czf $OUT/runs.tgz -C $R . 2>/dev/null
