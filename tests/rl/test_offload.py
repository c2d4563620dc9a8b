"""rl/backends/offload.py: the training state's trip to host memory and back, bit for bit.

On the CPU the host copy is other memory and the originals are freed, so the round trip is a real
one. Per backend (torch; megatron-core, whose grads live in DDP's contiguous buffer), in one
spawned gloo rank: after a training step, offload frees every storage of the state, reload gives
every parameter, grad and optimizer-state tensor its bits back with the same objects in place,
and the next step equals a twin's that never left the device. On a GPU the same file runs on
CUDA, megatron in bf16 with and without the distributed optimizer too, and checks that the
device memory was given up (`pytest tests/rl/test_offload.py` on a GPU machine).
"""

from __future__ import annotations

import importlib.util
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_processes import one_rank, run_ranks
from train_batches import train_batch

from rl.backends.offload import ALIGN, HostArena, HostOffload, state_tensors
from rl.config import ModelConfig, OptimizerConfig, PolicyConfig

VOCAB = 32
MODEL = ModelConfig(family="qwen3_5",
                    config={"layer_types": ["full_attention", "linear_attention"], "num_hidden_layers": 2})
OPT = OptimizerConfig(lr=1e-3, weight_decay=0.01, betas=[0.9, 0.999], eps=1e-8, grad_clip=1.0)
MEGATRON = importlib.util.find_spec("megatron") is not None


def test_views_and_shared_storages_come_back_bit_for_bit_and_still_alias() -> None:
    buffer = torch.randn(64)
    view = buffer[8:24].view(4, 4)
    param = torch.nn.Parameter(torch.randn(3, 5))
    param.grad = torch.randn(3, 5)
    before = [t.clone() for t in (buffer, view, param, param.grad)]
    host = HostOffload("cpu")
    moved = host.offload([buffer, view, param, param.grad, view])  # a view and a repeat: one storage each
    assert moved == (64 + 15 + 15) * 4 and host.offloaded
    assert all(t.untyped_storage().nbytes() == 0 for t in (buffer, view, param, param.grad))
    assert host.reload() == moved and not host.offloaded
    assert all(torch.equal(a, b) for a, b in zip((buffer, view, param, param.grad), before))
    buffer[8] = 7.0  # the view still reads the buffer
    assert view[0, 0] == 7.0


@settings(max_examples=60, deadline=None)
@given(first=st.lists(st.integers(0, 3 * ALIGN), max_size=8), more=st.lists(st.integers(0, 3 * ALIGN), max_size=4))
def test_the_arena_is_exact_stable_and_grows_only_for_new_bytes(first: list[int], more: list[int]) -> None:
    arena = HostArena(pin=False)
    places = arena.places(first)
    size = arena.nbytes
    assert size == sum(-(-n // ALIGN) * ALIGN for n in first)  # exact: no power-of-two rounding
    assert [p.numel() for p in places] == first
    starts = [p.data_ptr() for p in places]
    ends = sorted((p.data_ptr(), p.data_ptr() + p.numel()) for p in places if p.numel())
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))  # places never overlap
    assert [p.data_ptr() for p in arena.places(first)] == starts and arena.nbytes == size  # same state, same places
    grown = arena.places(first + more)  # the state grew (an optimizer's moments after step 1)
    assert [p.data_ptr() for p in grown[:len(first)]] == starts  # what was placed stays put
    assert size <= arena.nbytes <= size + sum(-(-n // ALIGN) * ALIGN for n in more)


def test_the_arena_is_kept_between_trips() -> None:
    host = HostOffload("cpu")
    state = [torch.randn(100), torch.randn(7)]
    host.offload(state)
    kept = host.host_bytes
    host.reload()
    assert host.host_bytes == kept == 2 * ALIGN
    host.offload(state)
    assert host.host_bytes == kept
    host.reload()


def test_release_gives_the_arena_back_and_refuses_while_offloaded() -> None:
    host = HostOffload("cpu")
    state = [torch.randn(100)]
    before = state[0].clone()
    host.offload(state)
    with pytest.raises(RuntimeError, match="reload it first"):
        host.release()
    host.reload()
    host.release()
    assert host.host_bytes == 0
    host.offload(state)  # a new arena
    host.reload()
    assert host.host_bytes == ALIGN and torch.equal(state[0], before)


def test_offload_and_reload_come_in_pairs() -> None:
    host = HostOffload("cpu")
    with pytest.raises(RuntimeError, match="nothing is offloaded"):
        host.reload()
    host.offload([torch.ones(2)])
    with pytest.raises(RuntimeError, match="already in host memory"):
        host.offload([torch.ones(2)])


def test_the_state_is_every_parameter_grad_buffer_and_optimizer_tensor() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 2)).sum().backward()
    optimizer.step()
    got = {id(t) for t in state_tensors(modules=[model], optimizers=[optimizer])}
    want = [*model.parameters(), *(p.grad for p in model.parameters()), *model.buffers(),
            *(v for s in optimizer.state.values() for v in s.values())]
    assert {id(t) for t in want} <= got


def test_a_policy_worker_refuses_to_read_its_state_while_it_is_in_host_memory() -> None:
    from rl.workers.policy import PolicyWorker

    weights = torch.nn.Linear(2, 2)
    worker = PolicyWorker.__new__(PolicyWorker)
    worker.name, worker._host = "policy-0", HostOffload("cpu")
    worker.backend = types.SimpleNamespace(training_state=lambda: state_tensors(modules=[weights]),
                                           state_dict=lambda: {"w": weights.weight.detach().clone()})
    worker.rank = 0
    assert worker.offload() == 6 * 4
    for call in (worker.state_dict, worker.save_checkpoint, worker.refit_chunks, worker.refit_layout):
        with pytest.raises(RuntimeError, match=rf"policy-0.{call.__name__}: the training state is in host memory"):
            call()
    worker.reload()
    assert torch.equal(worker.state_dict()["w"], weights.weight)


def _backend(case: dict, weights: dict[str, torch.Tensor]):
    from rl.backends import get_backend

    extra = {"device": case["device"]} if case["backend"] == "torch" else {}
    policy = PolicyConfig(micro_batch_size=2, optimizer=OPT, precision=case["precision"],
                          distributed_optimizer=case["distributed_optimizer"])
    return get_backend(case["backend"])(model=MODEL, policy=policy, vocab_size=VOCAB, seed=0,
                                        weights=weights, **extra)


def _train(backend, step: int) -> dict[str, float]:
    from rl.algorithms.loss import LossConfig

    batch = train_batch(vocab=VOCAB, seed=step)
    out = backend.train_step(batch, num_tokens=int(batch["response_mask"].sum()), loss_cfg=LossConfig(kl_beta=0.01),
                             step=step)
    return {k: v for k, v in out.items() if isinstance(v, float)}


def _allocated(device: str) -> int:
    return torch.cuda.memory_allocated() if device == "cuda" else 0


def _round_trip(case: dict) -> dict:
    """One step, a snapshot of the state, offload, reload; then a second step beside a twin's."""
    from rl.models import build_model

    initial = build_model(MODEL, vocab_size=VOCAB, seed=0).state_dict()
    backend = _backend(case, initial)
    _train(backend, 1)
    state = list(backend.training_state())
    snapshot = [t.detach().clone() for t in state]
    objects = [id(t) for t in state]
    host = HostOffload(case["device"])
    held = _allocated(case["device"])
    moved = host.offload(backend.training_state())
    freed = all(t.untyped_storage().nbytes() == 0 for t in state if t.device.type == case["device"])
    left = _allocated(case["device"])
    host.reload()
    after = list(backend.training_state())
    out = {
        "moved": moved, "freed": freed, "tensors": len(state), "device_bytes": (held, left),
        "same_objects": [id(t) for t in after] == objects,
        "bitwise": [torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(after, snapshot)],
    }
    del snapshot, state, after
    twin = _backend(case, initial)
    _train(twin, 1)
    batch = train_batch(vocab=VOCAB, seed=9)
    out.update(step2=(_train(backend, 2), _train(twin, 2)), weights=(backend.state_dict(), twin.state_dict()),
               logprobs=(backend.logprobs(batch["input_ids"], batch["attention_mask"], reference=True),
                         twin.logprobs(batch["input_ids"], batch["attention_mask"], reference=True)))
    return out


# On the CPU: the torch backend and megatron-core in fp32 (its bf16 optimizer and distributed
# optimizer take CUDA tensors only). On a GPU: the same cases on CUDA, and megatron in bf16 (fp32
# main copies in the optimizer) with and without the distributed optimizer (contiguous param buffers).
GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
CASES = {
    "torch": {"backend": "torch", "precision": "fp32", "distributed_optimizer": False, "device": DEVICE},
    "megatron-fp32": {"backend": "megatron", "precision": "fp32", "distributed_optimizer": False, "device": DEVICE},
    "megatron-bf16": {"backend": "megatron", "precision": "bf16", "distributed_optimizer": False, "device": DEVICE},
    "megatron-bf16-distopt": {"backend": "megatron", "precision": "bf16", "distributed_optimizer": True,
                              "device": DEVICE},
}
RUNNABLE = [name for name, case in CASES.items()
            if (case["backend"] == "torch" or MEGATRON) and (GPU or case["precision"] == "fp32")]


def _all(rank: int, port: int) -> dict:
    one_rank(port)
    if MEGATRON:
        import rl.backends.megatron.backend  # noqa: F401 - registers the backend and applies the CPU shims
    return {name: _round_trip(CASES[name]) for name in RUNNABLE}


@pytest.fixture(scope="module")
def results() -> dict:
    return run_ranks(_all)[0]


PARAMS = [pytest.param(name, marks=pytest.mark.skipif(name not in RUNNABLE, reason="needs megatron-core or a GPU"))
          for name in CASES]


@pytest.mark.integration
@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("case", PARAMS)
def test_a_backends_training_state_round_trips_bit_for_bit(results: dict, case: str) -> None:
    out = results[case]
    assert out["freed"] and out["moved"] > 0 and out["tensors"] > 0
    assert out["same_objects"], "reload must keep every tensor object the optimizer and hooks hold"
    assert all(out["bitwise"]), f"{out['bitwise'].count(False)} of {out['tensors']} tensors differ after the trip"
    held, left = out["device_bytes"]
    if GPU:  # every moved byte was an allocation of torch's caching allocator (rounded up to blocks)
        assert held - left >= out["moved"], f"offload freed {held - left} of the {out['moved']} bytes it moved"


@pytest.mark.integration
@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("case", PARAMS)
def test_training_after_the_trip_equals_training_that_never_left(results: dict, case: str) -> None:
    out = results[case]
    assert out["step2"][0] == out["step2"][1]
    mine, twin = out["weights"]
    assert all(torch.equal(mine[k], twin[k]) for k in twin)
    assert torch.equal(*out["logprobs"])  # the reference copy too
