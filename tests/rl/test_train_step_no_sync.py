"""Between a train step's first forward and its last backward nothing reads a tensor back to the
host or copies one to the device: on a GPU each such call waits for the stream to drain.

Why it matters: the megatron step prepared each micro-batch's inputs from device columns
(`.cpu()`), copied its mask to the device inside the loss and read the loss's metrics after each
forward, so the host waited for the GPU before queueing every backward and every forward, and the
GPU idled while it queued them. Proven on the CPU by recording every tensor call of that kind the
loop makes (a TorchFunctionMode sees `.cpu()`, `.to(device)`, `.item()`, `.tolist()`, `float()` and
the like whatever the device), plus the sums' bits against Python's float sums.
"""

from __future__ import annotations

import functools
import importlib.util
import traceback
import warnings
from pathlib import Path

import pytest
import torch
from rank_processes import one_rank, run_ranks
from torch.overrides import TorchFunctionMode
from train_batches import padded_train_batch

from rl.algorithms.loss import LOSS_METRICS, LossConfig, clipped_pg_loss
from rl.backends.train_step import DeviceSums, add_metrics
from rl.config import ModelConfig, OptimizerConfig, PolicyConfig, SequencePackingConfig

VOCAB, ROWS, LENGTH, PROMPT = 64, 12, 14, 4
OPT = OptimizerConfig(lr=1e-2, weight_decay=0.0, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)
RL = Path(importlib.util.find_spec("rl").origin).resolve().parent
WARNINGS_PY = Path(warnings.__file__).resolve()
READS = {"cpu", "cuda", "item", "tolist", "numpy", "__float__", "__int__", "__bool__", "__index__", "nonzero"}
# a tensor moved, or a host value made a tensor, on a named device: a copy from the host on a GPU
COPIES = {"to", "as_tensor", "tensor"}


class HostTraffic(TorchFunctionMode):
    """Records each tensor call that copies between host and device, or reads a value, while on:
    (call, who made it: "rl" or the library whose code made it)."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False
        self.calls: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if self.on and (name in READS or (name in COPIES and _names_a_device(args[1:], kwargs))):
            self.calls.append((name, _caller()))
        return func(*args, **kwargs)


def _caller() -> str:
    """Who made the call: "rl", "gdn_torch" (the CPU's stand-in for fla's kernels) or the top
    package of the innermost frame outside torch and this file."""
    frame = _innermost_outside_torch()
    if frame is None:
        return "?"
    path = Path(frame.filename).resolve()
    if path.is_relative_to(RL):
        return "gdn_torch" if path == RL / "backends" / "megatron" / "gdn_torch.py" else "rl"
    return next((part for part in path.parts if part in ("megatron", "transformers", "fla")), str(path))


def _innermost_outside_torch() -> traceback.FrameSummary | None:
    """The innermost frame of the current stack outside torch, the warnings machinery and this file
    (HostTraffic's frame wraps every torch call, so it is where each warning of torch's points)."""
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename).resolve()
        if "torch" in path.parts or path in (Path(__file__).resolve(), WARNINGS_PY):
            continue
        return frame
    return None


class SyncLog:
    """While on: each synchronising CUDA call torch warned of (`set_sync_debug_mode("warn")`) as
    "file:line" of the code that made it, not of the warning's own location; not torch's one
    notice that the debug mode is a prototype. A `warnings.showwarning` hook, since it runs inside
    the warning's call, where the stack still holds the caller."""

    def __enter__(self) -> list[str]:
        self.where: list[str] = []
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = self._show
        return self.where

    def _show(self, message, category, filename, lineno, file=None, line=None) -> None:
        if "called a synchronizing CUDA operation" in str(message):
            frame = _innermost_outside_torch()
            self.where.append(f"{Path(frame.filename).name}:{frame.lineno}" if frame else f"?:{lineno}")

    def __exit__(self, *exc) -> None:
        self._catch.__exit__(*exc)


def _names_a_device(args: tuple, kwargs: dict) -> bool:
    return "device" in kwargs or any(isinstance(a, (str, torch.device)) for a in args)


def _batch() -> dict[str, torch.Tensor]:
    batch = padded_train_batch(rows=ROWS, length=LENGTH, prompt=PROMPT, vocab=VOCAB, seed=5)
    prev = -torch.rand(ROWS, LENGTH, generator=torch.Generator().manual_seed(6)) * batch["response_mask"]
    return {**batch, "prev_logprobs": prev}


def _megatron_loop(layers: list[str], packed: bool, rank: int, port: int) -> dict[str, object]:
    """In a spawned rank: what a train step's micro-batch loop (after staging, before the gradients'
    finish) and a log-prob pass (after staging) called of HostTraffic's kind, and what they gave. On
    a GPU also the synchronising CUDA calls torch saw in those windows (`set_sync_debug_mode`)."""
    import rl.backends.megatron.backend as mb
    from rl.backends import get_backend
    from rl.backends.megatron import shims
    from rl.models import build_model

    shims.apply()
    one_rank(port)
    cuda = torch.cuda.is_available()
    cfg = ModelConfig(family="qwen3_5", config={"layer_types": layers, "num_hidden_layers": len(layers)})
    weights = build_model(cfg, vocab_size=VOCAB, seed=0).state_dict()
    packing = SequencePackingConfig(enabled=packed, max_tokens_per_row=2 * LENGTH)
    backend = get_backend("megatron")(model=cfg, vocab_size=VOCAB, weights=weights, seed=0, policy=PolicyConfig(
        optimizer=OPT, micro_batch_size=4, logprob_batch_size=4, sequence_packing=packing))
    traffic = HostTraffic()
    staged, finish = mb.MegatronBackend._staged, mb.grad_sync.start_remaining

    def staged_then_record(self, *args, **kwargs):
        stop_recording()  # a pass's staging is before its window, whatever the pass before left on
        out = staged(self, *args, **kwargs)
        traffic.on = True
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
        return out

    def stop_recording(ddp=None):
        traffic.on = False
        if cuda:
            torch.cuda.set_sync_debug_mode(0)
        return finish(ddp) if ddp is not None else None

    batch = _batch()
    out: dict[str, object] = {"num_tokens": int(batch["response_mask"].sum())}
    if cuda:  # first calls compile megatron's `jit_fuser` functions and autotune their kernels, which
        # synchronises once; the windows below are a warm step's
        backend.logprobs(batch["input_ids"], batch["attention_mask"])
        backend.train_step(batch, num_tokens=out["num_tokens"], step=1, loss_cfg=LossConfig(is_correction=True))
    mb.MegatronBackend._staged = staged_then_record
    mb.grad_sync.start_remaining = stop_recording
    with traffic, SyncLog() as syncs:
        out["lp"] = backend.logprobs(batch["input_ids"], batch["attention_mask"])
        stop_recording()
    out["logprob_calls"], out["logprob_syncs"], traffic.calls = traffic.calls, syncs, []
    out["rows_alone"] = torch.cat([backend.logprobs(batch["input_ids"][i:i + 1], batch["attention_mask"][i:i + 1])
                                   for i in range(ROWS)])
    for way in ("pass", "training"):
        traffic.on = False  # the passes above turned it on
        with traffic, SyncLog() as syncs:
            out[way] = backend.train_step(batch, num_tokens=out["num_tokens"], step=1,
                                          loss_cfg=LossConfig(is_correction=True, prev_logprobs=way))
        out[f"{way}_open"], out[f"{way}_calls"], traffic.calls = traffic.on, traffic.calls, []
        out[f"{way}_syncs"] = syncs
    return out


@pytest.mark.skipif(importlib.util.find_spec("megatron") is None, reason="megatron-core not installed")
@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("layers", [["full_attention"] * 2, ["linear_attention", "full_attention"]],
                         ids=["attention", "hybrid"])
def test_the_megatron_passes_neither_read_nor_copy_between_their_forwards(layers: list[str], packed: bool) -> None:
    got = run_ranks(functools.partial(_megatron_loop, layers, packed))[0]
    # Packed rows: megatron-core's THD rotary and gated-delta-net read each sequence's length in every
    # layer (its own code), as the CPU's torch stand-in for fla's kernels does; ours, and everything on
    # padded rows, neither reads nor copies.
    theirs = {"megatron", "gdn_torch"} if packed else set()
    assert [c for c in got["logprob_calls"] if c[1] not in theirs] == [("cpu", "rl")]  # 3 forwards, one copy back
    torch.testing.assert_close(got["lp"], got["rows_alone"], rtol=0, atol=2e-5)  # each row back in its place
    for way in ("pass", "training"):
        assert not got[f"{way}_open"], f"{way}: the loop never reached the gradients' finish"
        assert [c for c in got[f"{way}_calls"] if c[1] not in theirs] == [], way
        assert got[way]["num_valid_samples"] == ROWS and got[way]["num_tokens"] == got["num_tokens"]
    if torch.cuda.is_available() and not packed:  # what the stream saw (packed rows: megatron's reads, above)
        syncs = got["logprob_syncs"]
        assert len(syncs) == 1 and syncs[0].startswith("backend.py:"), syncs  # the one copy back
        assert got["pass_syncs"] == [] and got["training_syncs"] == [], (got["pass_syncs"], got["training_syncs"])
    if packed:
        assert {name for name, who in got["pass_calls"]} >= {"item", "tolist"}  # the recorder sees theirs


def test_device_sums_keep_the_bits_of_python_float_sums() -> None:
    g = torch.Generator().manual_seed(11)
    sums, totals = DeviceSums(), {}
    for _ in range(7):
        values = torch.randn(len(LOSS_METRICS), generator=g) * 10 ** torch.randint(-8, 8, (1,), generator=g)
        sums.add(values)
        add_metrics(totals, dict(zip(LOSS_METRICS, values.tolist())))
    assert sums.floats() == totals  # float64 in the same order from 0: equal bits
    assert DeviceSums().floats() == {}
    with pytest.raises(ValueError, match="for 12 names"):
        sums.add(torch.zeros(3))


def test_the_loss_returns_its_metrics_on_the_device_in_their_named_order() -> None:
    from rl.algorithms.loss import clipped_pg_loss_on_device

    batch = _batch()
    kwargs = dict(curr_logprobs=batch["prev_logprobs"] + 0.01, prev_logprobs=batch["prev_logprobs"],
                  gen_logprobs=batch["gen_logprobs"], ref_logprobs=None, advantages=batch["advantages"],
                  token_mask=batch["response_mask"], sample_mask=batch["sample_mask"], cfg=LossConfig())
    loss, values = clipped_pg_loss_on_device(**kwargs)
    _, floats = clipped_pg_loss(**kwargs)
    assert values.shape == (len(LOSS_METRICS),) and values.dtype == torch.float32
    assert dict(zip(LOSS_METRICS, values.tolist())) == floats
    assert floats["num_tokens"] == int(batch["response_mask"].sum()) and floats["loss"] == float(loss)


def _warn_as_torch_does() -> None:
    """Stands in for HostTraffic's frame: torch's sync warnings point at the innermost Python frame."""
    warnings.warn("called a synchronizing CUDA operation", UserWarning)


def test_the_sync_log_names_the_code_that_made_the_call_not_the_warnings_frame() -> None:
    caller = {"warn": _warn_as_torch_does}
    exec(compile("\n\ndef copy_back():\n    warn()\n", "backend.py", "exec"), caller)
    with SyncLog() as syncs:
        caller["copy_back"]()
        warnings.warn("CUDA sync debug mode is a prototype", UserWarning)  # not a sync: not logged
    assert syncs == ["backend.py:4"]
