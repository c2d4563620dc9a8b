# Session 6, call B (2 x H200): issue 11's ratios in one call. The grouped-experts check (GPU
# correctness against a per-expert loop, and its speed at moe_1b's shapes); the torch.compile
# anchor; our megatron backend with compiled layers on dense_1b at 1 GPU and DP2 (distributed
# optimizer), moe_1b at 1 GPU and EP2 (grouped experts), and the hybrid layout at 1 GPU.
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
timeout 60 python3 bench/grouped_experts_check.py 2>&1 | tail -3 | tee $OUT/grouped_experts.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
run() { n=$1; shift; timeout 120 torchrun --standalone --nproc_per_node $n bench/megatron_gpu.py --compile-layers --out $T "$@" \
        > /tmp/last.log 2>&1; echo "rc=$? $*"; tail -2 /tmp/last.log | cut -c1-400; }
run 1 --model dense_1b
run 2 --model dense_1b --distributed-optimizer
run 1 --model moe_1b
run 2 --model moe_1b --ep 2
run 1 --model dense_1b --layers hybrid
cat $T
