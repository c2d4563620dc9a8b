#!/bin/bash
# Session 2, second call: pipeline parallel and MoE with tensor parallel on H200 (same set-up as
# bench/megatron_gpu.sh; figures in bench/megatron_gpu.md).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site bench/.work/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1
R=${OUT:-.}/results.jsonl
run() { n=$1; shift; echo "== $n GPU: $*"; torchrun --standalone --nproc_per_node $n bench/megatron_gpu.py --out $R "$@" 2>&1 | grep -v -i "warn\|deprecat\|class Mimo\|falling back" | tail -4; }
run 2 --model tiny --layers hybrid --pp 2 --precision fp32 --check-hf --steps 3 --seq 512
run 2 --model tiny_moe --tp 2 --sp --precision fp32 --check-hf --steps 3 --seq 512
run 2 --model dense_1b --pp 2
run 2 --model dense_1b --pp 2 --mbs 2
run 2 --model moe_1b --tp 2 --sp
run 1 --model moe_1b --layers hybrid --precision fp32 --check-hf --rows 4 --steps 1 --warmup 1
