#!/bin/bash
# The exact runs behind bench/megatron_gpu.md; from the repo root of the GPU machine, with the
# megatron-core 0.19.2 cp312 wheel in bench/.work/wheels (OUT = where results.jsonl goes).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site bench/.work/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1
R=${OUT:-.}/results.jsonl
run() { n=$1; shift; echo "== $n GPU: $*"; torchrun --standalone --nproc_per_node $n bench/megatron_gpu.py --out $R "$@" 2>&1 | grep -v -i "warn\|deprecat\|class Mimo" | tail -4; }
run 1 --model tiny --precision fp32 --check-hf --steps 3 --seq 512
run 1 --model tiny --seq 512
run 2 --model tiny --tp 2 --seq 512
run 2 --model tiny_moe --ep 2 --seq 512
run 1 --model dense_1b --precision fp32 --check-hf --rows 4 --steps 1 --warmup 1
run 1 --model dense_1b
run 2 --model dense_1b --tp 2
run 2 --model dense_1b --tp 2 --sp
run 2 --model dense_1b --distributed-optimizer
run 2 --model moe_1b --ep 2
run 2 --model moe_1b --ep 2 --distributed-optimizer
