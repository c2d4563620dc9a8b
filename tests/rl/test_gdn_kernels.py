"""Every process that builds a Qwen3.5 model runs fla with the Hopper backward fix installed.

fla needs a GPU and Triton, so a stand-in with fla's module layout (tests/rl/fake_fla) plays it:
like fla on an H200 under Triton 3.6, its backward refuses `chunk_bwd_dqkwg` unless that function
was replaced. fla runs on CUDA tensors only, so the cases that play a GPU add "cpu" to
`gdn_kernels.FLA_DEVICES`; without that, CPU tensors must take HF's torch code. Each case runs in a
fresh interpreter, since transformers binds fla's functions when its Qwen3.5 module is first imported.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_FLA = Path(__file__).resolve().parent / "fake_fla"

# Importing rl.models ran `prepare()`; on the CPU `needs_patch()` is False (no Hopper), so the
# "hopper" case asks again as an H200 would answer, with a counting stand-in for the torch kernel.
SCRIPT = """
import json, sys
import torch
from rl.models import fla_hopper, gdn_kernels
calls = []
if sys.argv[2] == "as_gpu":
    gdn_kernels.FLA_DEVICES.add("cpu")
if sys.argv[1] == "hopper":
    fla_hopper.needs_patch = lambda: True
    fla_hopper.chunk_bwd_dqkwg = lambda **kwargs: calls.append(sorted(kwargs))
    gdn_kernels._done.clear()
    gdn_kernels.prepare()
from rl.models.qwen3_5 import FAMILIES, init_from_config, make_config
config = make_config("{family}", {{"layer_types": ["linear_attention", "full_attention"], "num_hidden_layers": 2}},
                     vocab_size=32)
model = init_from_config(config, FAMILIES["{family}"][1], seed=0)
ids = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(0))
try:
    model(input_ids=ids, use_cache=False).logits.float().square().mean().backward()
    error = None
except RuntimeError as e:
    error = str(e)
print(json.dumps({{"calls": len(calls), "prepared": gdn_kernels.prepared(), "error": error}}))
"""


def _run(family: str, mode: str, device: str = "as_gpu") -> dict:
    # no GPU in the child, on a GPU machine too: the stand-in has no causal conv to install there
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAKE_FLA), str(ROOT)]), CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(family=family), mode, device], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_hf_gated_delta_net_backward_goes_through_the_replaced_kernel(family):
    out = _run(family, "hopper")
    assert out["error"] is None
    assert out["prepared"] == {"hopper_backward": True, "fla_causal_conv": False}  # no GPU: HF's conv
    assert out["calls"] == 1  # the one gated-delta-net layer's backward


def test_without_the_fix_fla_refuses_the_backward_as_on_an_h200():
    out = _run("qwen3_5", "plain")
    assert out["prepared"] == {"hopper_backward": False, "fla_causal_conv": False}
    assert "chunk_bwd_dqkwg" in (out["error"] or "")


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_5_moe"])
def test_cpu_tensors_take_hf_torch_code_where_fla_is_importable(family):
    # a GPU machine's CPU model (tiny twins, CPU tests): fla's Triton kernels cannot take its tensors
    out = _run(family, "hopper", device="cpu")
    assert out["error"] is None
    assert out["calls"] == 0  # neither fla's backward nor its replacement ran


def test_the_dispatch_refuses_packed_rows_off_fla():
    import torch

    from rl.models.gdn_kernels import on_device

    def fla(x, cu_seqlens=None):
        return "fla"

    def torch_code(x, cu_seqlens=None):
        return "torch"

    rule = on_device(fla, torch_code)
    assert rule(torch.zeros(1)) == "torch"
    assert rule(torch.zeros(1), cu_seqlens=None) == "torch"
    with pytest.raises(ValueError, match="cu_seqlens"):
        rule(torch.zeros(1), cu_seqlens=torch.tensor([0, 1]))
