#!/bin/bash
SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)
source $SCRIPT_DIR/common.env

# ===== BEGIN CONFIG =====
NUM_NODES=1
MAX_STEPS=10
NUM_MINUTES=20
# ===== END CONFIG =====

cd $PROJECT_ROOT
uv run examples/run_grpo.py --config $CONFIG_PATH grpo.max_num_steps=$MAX_STEPS

uv run tests/check_metrics.py $JSON_METRICS \
    'data["train/loss"]["10"] < data["train/loss"]["1"]'
