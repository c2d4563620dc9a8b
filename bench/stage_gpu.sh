#!/bin/bash
# Stage what the GPU machine lacks into bench/.work (git-ignored; name it in the device call's carry
# list): the wheels of bench/gpu_wheels.txt plus stage-gpu-wheels' own, and the training anchor the
# throughput targets compare with. Run it from the repository root on the machine you start from,
# not on the GPU machine; SHARED is the team's shared folder (tools/, anchors/), ../shared unless set.
set -euo pipefail
SHARED=${SHARED:-../shared}
# shellcheck disable=SC2046  # one argument per listed wheel
"$SHARED/tools/stage-gpu-wheels" bench/.work/wheels $(grep -v '^#' bench/gpu_wheels.txt | grep -v antlr)
python3 -m pip wheel -q --no-deps -w bench/.work/wheels antlr4-python3-runtime==4.9.3   # an sdist only on PyPI
cp "$SHARED/anchors/torch_train_anchor.py" bench/.work/
du -sh bench/.work
