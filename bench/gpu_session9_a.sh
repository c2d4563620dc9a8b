# Prepared in session 8 for the next 2 x H200 call (issue 10): the VLM twin's three seeds as whole
# runs, side by side, now that `generation.decode: auto` decodes a vision model with CUDA graphs
# (session 6 derived the h200x2 VLM checks from eager runs and cut seed 7 at step 67). Each run dir
# comes back as its own small tarball; progress.log has each run's exit code and wall time.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TORCHINDUCTOR_COMPILE_THREADS=4
R=/tmp/runs; mkdir -p $R
go() { name=$1; shift; (s0=$SECONDS; timeout 540 $HARNESS run "$@" --out $R/$name > $R/$name.out 2>&1; \
       echo "$name rc=$? wall_s=$((SECONDS - s0))" | tee -a $OUT/progress.log; cp $R/$name.out $R/$name/ 2>/dev/null; \
       tar czf $OUT/$name.tgz --exclude=checkpoints --exclude='*.pt' -C $R $name) & }
for s in 42 7 123; do go vlm-$s recipes/qwen3_5_35b_vlm.yaml --scale h200x2 algorithm.seed=$s; done
wait
