# Session 6, call C (2 x H200): the VLM twin with its new h200x2 checks (thresholds derived from
# call A): seed 7 (cut at step 67 in call A) and seed 42, side by side; `harness run` exits 0
# only when every check passes.
. bench/gpu_setup.sh > /dev/null 2>&1 || exit 1
R=/tmp/runs; mkdir -p $R
go() { name=$1; shift; (s0=$SECONDS; timeout 545 $HARNESS run "$@" --out $R/$name > $R/$name.out 2>&1; \
       echo "$name rc=$? wall_s=$((SECONDS - s0))" | tee -a $OUT/progress.log; cp $R/$name.out $R/$name/ 2>/dev/null; \
       tar czf $OUT/$name.tgz --exclude=checkpoints --exclude='*.pt' -C $R $name) & }
for s in 7 42; do go vlm-$s recipes/qwen3_5_35b_vlm.yaml --scale h200x2 algorithm.seed=$s; done
wait
