#!/bin/bash
# Session 2 runs behind bench/megatron_gpu.md (hybrid gated-delta-net layers, context parallel);
# same set-up as bench/megatron_gpu.sh.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site bench/.work/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1
R=${OUT:-.}/results.jsonl
run() { n=$1; shift; echo "== $n GPU: $*"; torchrun --standalone --nproc_per_node $n bench/megatron_gpu.py --out $R "$@" 2>&1 | grep -v -i "warn\|deprecat\|class Mimo" | tail -4; }
run 1 --model tiny --layers hybrid --precision fp32 --check-hf --steps 3 --seq 512
run 2 --model tiny_moe --layers hybrid --cp 2 --ep 2 --precision fp32 --check-hf --steps 3 --seq 512
run 2 --model tiny --layers hybrid --tp 2 --precision fp32 --check-hf --steps 3 --seq 512
run 1 --model dense_1b --layers hybrid --precision fp32 --check-hf --rows 4 --steps 1 --warmup 1
run 1 --model dense_1b --layers hybrid
run 2 --model dense_1b --layers hybrid --tp 2 --sp
run 2 --model dense_1b --cp 2 --seq 4096 --rows 4 --mbs 1
run 1 --model dense_1b --seq 4096 --rows 4 --mbs 1
run 2 --model moe_1b --layers hybrid --ep 2
