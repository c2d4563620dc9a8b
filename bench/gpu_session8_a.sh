# Prepared in session 7 for the next device call (one H200): issue 11's hybrid layout, A/B of how
# its gated-delta-net layers compile (whole layer vs `--gdn-compile around`), beside the anchor and
# dense_1b all attention, 7 timed steps each (bench/megatron_gpu.py's defaults now).
. bench/gpu_setup.sh || exit 1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
T=$OUT/train.jsonl
timeout 100 python3 bench/.work/torch_train_anchor.py compile 2>&1 | tail -1 | tee -a $T
run() { t=$1; shift; timeout $t torchrun --standalone --nproc_per_node 1 bench/megatron_gpu.py --out $T "$@" \
        > /tmp/last.log 2>&1; rc=$?; echo "rc=$rc $*"; tail -1 /tmp/last.log | cut -c1-200; return $rc; }
run 110 --compile-layers --model dense_1b
run 200 --compile-layers --model dense_1b --layers hybrid --gdn-compile around
run 200 --compile-layers --model dense_1b --layers hybrid
