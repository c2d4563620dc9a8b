# Sourced by bench/gpu.sh on the GPU machine: install the carried wheels (bench/.work/wheels, staged
# as bench/README.md says from the list in bench/gpu_wheels.txt) and set the environment the engine
# and benches expect. The NVLink-multicast switches are the GPU machine's (they reach every Ray
# worker through rl.cluster's pass-through list).
# Once per machine and wheel set (two scripts of one call may both source this).
staged=$(ls bench/.work/wheels | md5sum | cut -c1-12)
if [ "$(cat /tmp/site/.staged 2>/dev/null)" != "$staged" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site bench/.work/wheels/*.whl \
    || return 1
  echo "$staged" > /tmp/site/.staged
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HARNESS="python3 -m harness.cli"
# the commit under test for the nightly summary and history (the machine's copy has no or a stale .git)
[ -n "${BENCH_COMMIT:-}" ] && export HARNESS_COMMIT=$BENCH_COMMIT
# The compile and warm-start caches (bench/gpu_cache.sh carries the autotuning between calls): fla autotunes
# each kernel on its first use (about 2 minutes), inductor compiles each decode forward; the caches
# serve every later process of the call, and the next call when carried.
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TORCHINDUCTOR_COMPILE_THREADS=4 \
       TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/tmp/triton RL_CACHE_DIR=/tmp/rl-cache
[ -f /tmp/.gpu_cache_restored ] || { bash bench/gpu_cache.sh restore && touch /tmp/.gpu_cache_restored; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
