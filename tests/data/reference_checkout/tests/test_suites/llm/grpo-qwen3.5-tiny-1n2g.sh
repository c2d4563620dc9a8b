#!/bin/bash
SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)
source $SCRIPT_DIR/common.env

# ===== BEGIN CONFIG =====
NUM_NODES=1
STEPS_PER_RUN=20
MAX_STEPS=20
NUM_RUNS=$(( (MAX_STEPS + STEPS_PER_RUN - 1) / STEPS_PER_RUN ))  # Round up
NUM_MINUTES=30
# ===== END CONFIG =====

exit_if_max_steps_reached

cd $PROJECT_ROOT
uv run examples/run_grpo.py \
    --config $CONFIG_PATH \
    grpo.max_num_steps=$MAX_STEPS \
    logger.log_dir=$LOG_DIR \
    checkpointing.checkpoint_dir=$CKPT_DIR \
    policy.generation.temperature=0.8 \
    $@ \
    2>&1 | tee $RUN_LOG

uv run tests/json_dump_tb_logs.py $LOG_DIR --output_path $JSON_METRICS

# Only run metrics if the target step is reached
if [[ $(jq 'to_entries | .[] | select(.key == "train/loss") | .value | keys | map(tonumber) | max' $JSON_METRICS) -ge $MAX_STEPS ]]; then
    uv run tests/check_metrics.py $JSON_METRICS \
        'mean(data["train/gen_kl_error"]) < 0.002' \
        'median(data["train/token_mult_prob_error"], 1, 10) < 1.1' \
        "data[\"train/token_mult_prob_error\"][\"$MAX_STEPS\"] < 1.1" \
        'mean(data["train/loss"], -5, -1) < 0.7 * data["train/loss"]["1"]' \
        '0.2 < mean(data["train/reward"], -6, -1) < 0.9' \
        'ratio_above(data["train/token_mult_prob_error"], 1.05) < 0.1' \
        'mean(data["timing/train/total_step_time"], 2, ignore_top_p=0.05) < 30' \
        'min(data["train/grad_norm"]) >= 0.0' \
        'max(data["train/loss"]) < 1000000.0' \
        'abs(median(data["train/loss"])) < 0.05' \
        'data["score"] >= 0.25' \
        "data['train/reward']['$FINAL_STEP'] > 0.5"

    rm -rf "$CKPT_DIR"
fi
