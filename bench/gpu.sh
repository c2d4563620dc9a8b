#!/bin/bash
# The GPU benchmarks, one target each, run from the repository root of the GPU machine:
#
#   BENCH_COMMIT=<sha> bash bench/gpu.sh TARGET [ARGS...]      # `bash bench/gpu.sh` lists them
#
# Staging (on the machine you start from) and the table of figures: bench/README.md. Each target
# appends its figures, one JSON line each stamped with date, machine and commit (bench/record.py),
# to $OUT/NAME.jsonl, or to bench/results/NAME.jsonl where OUT is unset; append what comes back to
# bench/results/NAME.jsonl. Run dirs of engine targets come back as $OUT/NAME.tgz (no checkpoints).
set -uo pipefail
RESULTS=${OUT:-bench/results}
TARGET=${1:-}; shift || true
ARGS="$*"
COMMAND="bash bench/gpu.sh $TARGET${ARGS:+ $ARGS}"

usage() {
  cat <<'EOF'
targets (GPUs, about how long):
  throughput [--mbs N] [--only a,b]  the anchor and ours: dense_1b, hybrid; DP2, moe_1b EP2 on 2 GPUs (1-2, 5 min)
  train [--gpus N] ARGS...           one bench/megatron_gpu.py run with compiled layers, e.g. --model moe_1b --mbs 16
  mbs-sweep                          dense_1b, hybrid, moe_1b at micro-batches 8 and 16; moe_1b at 32 (1, 7 min)
  layouts                            TP, SP, EP, CP, PP layouts and log-probs against HF in fp32 (2, 8 min)
  full-width-memory                  Qwen3.5-35B-A3B widths, 2 and 4 layers: peak against `harness plan` (1, 4 min)
  full-width-grpo                    Qwen3.5-35B-A3B's width cut to 4 layers: 10 GRPO steps, colocated, training offloaded; plan against peaks (1, 8 min)
  profile ARGS...                    torch.profiler table of one bench/megatron_gpu.py step (1, 2 min)
  gdn [ops]                          fla's gated-delta-net kernels against the torch rule, and their speed (1, 3 min)
  grouped-experts                    grouped expert GEMMs against a per-expert loop, and their speed (1, 1 min)
  generation-shapes [LAYERS [BATCHES [PROFILE_BATCH]]]  dense_1b full,hybrid at batches 64,256, 128 + 256 tokens: ours, HF static, the roofline (1, 5 min)
  decode-kernels [--batches B,...]   the decode step's hand kernels alone: attention launches, logit statistics (1, 2 min)
  generation                         our decoders against HF `generate`: twin, dense_1b hybrid, VLM twin (1, 8 min)
  llm-seeds | vlm-seeds              the h200x2 twin through `harness run`, seeds 42, 7, 123 side by side (2, 9 min)
  smoke-seeds [TWINS [SEEDS [OVR...]]] the GPU smoke suite's learning twins (h200x1) on seeds 42, 7, 123: its thresholds (1, 8 min)
  padding-grads                      a right-padded batch of mixed lengths against its rows alone: log-probs, gradients (1, 2 min)
  vlm-decode                         the VLM twin in the engine, CUDA-graph decode against eager, one GPU (1, 7 min)
  refit-nccl                         refit over NCCL (generation on its own GPU) against colocated (2, 5 min)
  parity                             the parity recipe, legacy against TQ data path at tolerance 0, one GPU (1, 4 min)
  warm-start                         the warm start twice per seed under deterministic kernels (1, 4 min)
EOF
}

[ -n "$TARGET" ] && [ "$TARGET" != help ] || { usage; exit 2; }
. bench/gpu_setup.sh || exit 1
mkdir -p "$RESULTS"

record() { python3 bench/record.py --out "$RESULTS/$1.jsonl" --command "$COMMAND"; }   # stdin: a bench's output
need_anchor() {
  [ -f bench/.work/torch_train_anchor.py ] && return 0
  echo "bench/.work/torch_train_anchor.py is missing: stage it (bench/README.md, staging)" >&2; exit 2
}
mgpu() {   # mgpu GPUS SECONDS ARGS...: one bench/megatron_gpu.py run, its JSON line on stdout
  local n=$1 t=$2; shift 2
  timeout "$t" torchrun --standalone --nproc_per_node "$n" bench/megatron_gpu.py "$@" > /tmp/mgpu.log 2>&1
  local rc=$?; echo "rc=$rc megatron_gpu.py $*" >&2; grep '^{' /tmp/mgpu.log | tail -1
  [ $rc -eq 0 ] || tail -5 /tmp/mgpu.log >&2
}
harness_runs() {   # harness_runs SECONDS NAME RECIPE ARGS... (each NAME=... pair run side by side)
  local t=$1; shift; R=/tmp/runs; mkdir -p $R
  while [ $# -gt 0 ]; do
    local name=$1 recipe=$2; shift 2; local extra=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do extra+=("$1"); shift; done; shift || true
    ( timeout "$t" $HARNESS run "$recipe" "${extra[@]}" --no-progress --out $R/$name > $R/$name.out 2>&1
      echo "$name rc=$?" >&2; cp $R/$name.out $R/$name/ 2>/dev/null
      tar czf "${OUT:-/tmp}/$name.tgz" --exclude=checkpoints --exclude='*.pt' -C $R $name ) &
  done
  wait
}

case "$TARGET" in
  throughput)
    need_anchor; rm -f /tmp/throughput.jsonl   # a warm machine keeps /tmp: this call's runs only
    python3 bench/throughput.py --out /tmp/throughput.jsonl --logs "${OUT:-/tmp}" "$@" | grep -v '^{"verdicts"'
    record train < /tmp/throughput.jsonl > /dev/null ;;
  train)
    n=1; [ "${1:-}" = "--gpus" ] && { n=$2; shift 2; }
    mgpu "$n" 300 --compile-layers "$@" | record train ;;
  mbs-sweep)
    { for m in 8 16; do
        for model in "--model dense_1b" "--model dense_1b --layers hybrid" "--model moe_1b"; do
          mgpu 1 150 --compile-layers $model --mbs $m   # $model: several words on purpose
        done
      done
      mgpu 1 150 --compile-layers --model moe_1b --rows 32 --mbs 32; } | record train ;;
  layouts)
    export CUDA_DEVICE_MAX_CONNECTIONS=1   # as these layouts were first measured (2026-11-30)
    { mgpu 1 120 --model tiny --layers hybrid --precision fp32 --check-hf --steps 3 --seq 512
      mgpu 2 120 --model tiny --layers hybrid --tp 2 --precision fp32 --check-hf --steps 3 --seq 512
      mgpu 2 120 --model tiny --layers hybrid --pp 2 --precision fp32 --check-hf --steps 3 --seq 512
      mgpu 2 120 --model tiny_moe --layers hybrid --cp 2 --ep 2 --precision fp32 --check-hf --steps 3 --seq 512
      mgpu 2 120 --model tiny_moe --tp 2 --sp --precision fp32 --check-hf --steps 3 --seq 512
      mgpu 1 120 --model dense_1b --layers hybrid --precision fp32 --check-hf --rows 4 --steps 1 --warmup 1
      mgpu 1 120 --model moe_1b --layers hybrid --precision fp32 --check-hf --rows 4 --steps 1 --warmup 1
      mgpu 2 120 --compile-layers --model dense_1b --tp 2 --sp
      mgpu 2 120 --compile-layers --model dense_1b --pp 2
      mgpu 1 120 --compile-layers --model dense_1b --seq 4096 --rows 4 --mbs 1
      mgpu 2 120 --compile-layers --model dense_1b --cp 2 --seq 4096 --rows 4 --mbs 1
      mgpu 2 120 --compile-layers --model moe_1b --tp 2 --sp
    } | record layouts ;;
  full-width-memory)
    for spec in "2 4096" "4 4096" "4 2048"; do
      set -- $spec
      mgpu 1 160 --model qwen35_full --num-layers "$1" --layers hybrid --rows 1 --mbs 1 --seq "$2" --steps 2 --warmup 1
    done | record full_width_memory ;;
  full-width-grpo)   # issue 33: thresholds/qwen3_5_35b_full_width_cut.yaml says what it must show
    cut='model.config={layer_types: [linear_attention, linear_attention, linear_attention, full_attention],
      hidden_size: 2048, num_hidden_layers: 4, num_attention_heads: 16, num_key_value_heads: 2, head_dim: 256,
      vocab_size: 248320, tie_word_embeddings: false, linear_num_key_heads: 16, linear_num_value_heads: 32,
      linear_key_head_dim: 128, linear_value_head_dim: 128, linear_conv_kernel_dim: 4, num_experts: 256,
      num_experts_per_tok: 8, moe_intermediate_size: 512, shared_expert_intermediate_size: 512,
      router_aux_loss_coef: 0.001}'
    # no checkpoint: at 4.38 B its files are ~82 GiB (fp32 weights and reference, the optimizer
    # state), more than the GPU machine's 64 GiB disk
    over=("$cut" generation.offload_training=true algorithm.num_steps=10 algorithm.warm_start.steps=0
          checkpoint.every_steps=0 checkpoint.at_end=false
          policy.micro_batch_size=8 checks.thresholds=thresholds/qwen3_5_35b_full_width_cut.yaml "$@")
    $HARNESS plan recipes/qwen3_5_35b.yaml --scale h200x1 "${over[@]}" | tee "$RESULTS/full_width_grpo_plan.txt"
    harness_runs "${FULL_WIDTH_TIMEOUT_S:-480}" full-width-grpo recipes/qwen3_5_35b.yaml --scale h200x1 "${over[@]}"
    python3 bench/run_summary.py /tmp/runs/full-width-grpo | record engine ;;
  profile)
    file="$RESULTS/profiles/$(echo "$*" | sed 's/--//g; s/[^a-z0-9_]\+/_/g')_$(date -u +%Y-%m-%d).txt"
    mkdir -p "$RESULTS/profiles"
    mgpu 1 220 --steps 2 --warmup 2 --profile "$file" "$@" | record profile; echo "table: $file" ;;
  gdn)
    timeout 300 python3 bench/gdn_check.py "$@" 2>&1 | record gdn ;;
  grouped-experts)
    timeout 120 python3 bench/grouped_experts_check.py 2>&1 | record grouped_experts ;;
  generation)
    { timeout 150 python3 bench/bench_generation.py --model twin --batch 64 --prompt 32 --new 256 \
        --variants ours_graphs,hf_static,ours_eager
      timeout 170 python3 bench/bench_generation.py --model dense_1b --layers hybrid --batch 64 --prompt 32 --new 256 \
        --variants ours_graphs,hf_static --repeats 2
      timeout 200 python3 bench/bench_generation.py --model vlm_twin --batch 64 --new 256 \
        --variants ours_graphs,ours_static,ours_eager,hf_dynamic
    } 2>&1 | grep -v Warning | record generation ;;
  decode-kernels)   # bench/decode_kernels.py --warm beside the smoke first makes this run time only
    timeout 200 python3 bench/decode_kernels.py "$@" 2>&1 | grep --line-buffered -v Warning | record decode_kernels ;;
  generation-shapes)   # issue 31's shapes; the PROFILE_BATCH run also writes its kernel table
    for l in $(echo "${1:-full,hybrid}" | tr , ' '); do
      for b in $(echo "${2:-64,256}" | tr , ' '); do
        prof=(); [ "$b" = "${3:-none}" ] && prof=(--profile "$RESULTS/generation_dense_1b_${l}_batch${b}_graphs_$(date +%F).txt")
        timeout 240 python3 bench/bench_generation.py --model dense_1b --layers "$l" --prompt 128 --new 256 \
          --repeats 3 --batch "$b" --variants "${GEN_VARIANTS:-ours_graphs,ours_graphs_sdpa,hf_static}" "${prof[@]}"
      done
    done 2>&1 | grep --line-buffered -v Warning | record generation ;;
  llm-seeds|vlm-seeds)
    recipe=recipes/qwen3_5_35b.yaml; [ "$TARGET" = vlm-seeds ] && recipe=recipes/qwen3_5_35b_vlm.yaml
    p=${TARGET%-seeds}
    harness_runs 540 $p-42 $recipe --scale h200x2 algorithm.seed=42 -- $p-7 $recipe --scale h200x2 algorithm.seed=7 \
      -- $p-123 $recipe --scale h200x2 algorithm.seed=123
    python3 bench/run_summary.py /tmp/runs/$p-42 /tmp/runs/$p-7 /tmp/runs/$p-123 | record engine ;;
  padding-grads)
    timeout 300 torchrun --standalone --nproc_per_node 1 bench/padding_grads.py "$@" > /tmp/padding_grads.log 2>&1
    echo "padding-grads: exit $?" >&2; grep '^{' /tmp/padding_grads.log | record padding_grads
    grep -v '^{' /tmp/padding_grads.log | grep -iE "error|Traceback" -A3 | tail -20 >&2 ;;
  smoke-seeds)
    # The h200x1 checks of the smoke suite's recipes are derived from these 9 runs, side by side on one
    # GPU; their metrics come back as one $OUT/smoke_seeds.tgz (the 8-file limit on what returns).
    # `smoke-seeds [TWINS [SEEDS [OVERRIDES...]]]`: TWINS of llm,vlm,distill, SEEDS (default all,
    # 42,7,123) and recipe overrides for every run (a candidate twin, before it is written in);
    # SEEDS_NAME=X prefixes the runs' names and the archive's (two candidates side by side).
    runs=(); names=(); tag=${SEEDS_NAME:+${SEEDS_NAME}_}
    for s in $(echo "${2:-42,7,123}" | tr , ' '); do
      for pair in llm:qwen3_5_35b vlm:qwen3_5_35b_vlm distill:xtoken_distill_qwen3_5; do
        [[ ",${1:-llm,vlm,distill}," == *",${pair%%:*},"* ]] || continue
        runs+=($tag${pair%%:*}-$s recipes/${pair#*:}.yaml --scale h200x1 algorithm.seed=$s "${@:3}" --)
        names+=($tag${pair%%:*}-$s)
      done
    done
    mkdir -p /tmp/smoke-seeds-tgz; OUT=/tmp/smoke-seeds-tgz harness_runs 500 "${runs[@]}"
    (cd /tmp/runs && python3 "$OLDPWD/bench/run_summary.py" "${names[@]}") | record engine
    tar czf "${OUT:-/tmp}/${tag}smoke_seeds.tgz" --exclude=checkpoints --exclude='*.pt' -C /tmp/runs "${names[@]}" ;;
  vlm-decode)
    for decode in auto eager; do
      harness_runs 200 vlm-$decode recipes/qwen3_5_35b_vlm.yaml --scale h200x2 cluster.devices_per_node=1 \
        policy.parallel.ep=1 algorithm.num_steps=10 algorithm.warm_start.steps=50 generation.decode=$decode
    done
    python3 bench/run_summary.py /tmp/runs/vlm-auto /tmp/runs/vlm-eager | record engine ;;
  refit-nccl)
    for mode in false true; do
      harness_runs 240 refit-colocated-$mode recipes/arith_grpo_cpu.yaml --scale h200x2 cluster.devices_per_node=1 \
        generation.colocated=$mode algorithm.num_steps=20
    done
    python3 bench/run_summary.py /tmp/runs/refit-colocated-false /tmp/runs/refit-colocated-true | record engine ;;
  parity)
    harness_runs 330 parity recipes/arith_grpo_cpu_parity.yaml --scale h200x2 cluster.devices_per_node=1 \
      checks.hardware=h200
    python3 bench/run_summary.py /tmp/runs/parity | record parity ;;
  warm-start)
    mkdir -p /tmp/vlm /tmp/llm
    $HARNESS show recipes/qwen3_5_35b_vlm.yaml --scale h200x2 > /tmp/vlm/recipe.yaml
    $HARNESS show recipes/qwen3_5_35b.yaml --scale h200x2 > /tmp/llm/recipe.yaml
    { for s in 123 7; do timeout 200 python3 bench/warm_start_repeat.py /tmp/vlm/recipe.yaml $s 2>&1 & done
      timeout 200 python3 bench/warm_start_repeat.py /tmp/llm/recipe.yaml 42 2>&1; wait; } | record warm_start ;;
  *) echo "unknown target: $TARGET" >&2; usage; exit 2 ;;
esac
