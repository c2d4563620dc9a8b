# One call on an H200 machine: the torch anchor (copied to bench/.work/ from the shared anchors)
# and our megatron backend, eager and with compiled layers, on dense_1b; one JSON line each.
. bench/gpu_setup.sh || exit 1
B=$OUT/bench.jsonl
python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $B
timeout 80 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --out $B 2>&1 | tail -1
timeout 80 torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --model dense_1b --compile-layers --out $B 2>&1 | tail -1
