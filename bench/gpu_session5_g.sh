# Session 5, call G (one H200): the warm start under deterministic kernels, twice per seed: the
# VLM h200x2 twin (seeds 123, 7) and the LLM h200x2 twin (seed 42); bit-identical or not.
. bench/gpu_setup.sh || exit 1
$HARNESS run recipes/qwen3_5_35b_vlm.yaml --scale h200x2 --dry-run --out /tmp/vlm > /dev/null 2>&1
$HARNESS run recipes/qwen3_5_35b.yaml --scale h200x2 --dry-run --out /tmp/llm > /dev/null 2>&1
for s in 123 7; do timeout 200 python3 bench/warm_start_repeat.py /tmp/vlm/recipe.yaml $s 2>&1 | grep '^{' | tee -a $OUT/warm_start.jsonl & done
timeout 200 python3 bench/warm_start_repeat.py /tmp/llm/recipe.yaml 42 2>&1 | grep '^{' | tee -a $OUT/warm_start.jsonl
wait
