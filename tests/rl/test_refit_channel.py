"""The refit channel (rl/refit/channel.py) over gloo: two spawned processes, policy rank 0's end
and the generator's, as on a GPU machine with NCCL."""

from __future__ import annotations

import pytest
import torch
from rank_processes import run_ranks

from rl.refit import buckets
from rl.refit.channel import RECEIVER, SENDER, RefitChannel


def _weights(scale: float) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"embed.weight": torch.randn(7, 5, generator=g) * scale,
            "norm.weight": (torch.randn(5, generator=g) * scale).bfloat16(),
            "head.weight": torch.randn(3, 5, generator=g) * scale,
            "steps": torch.tensor([3], dtype=torch.int64)}


def _end(rank: int, port: int) -> list:
    layout = buckets.layout_of(_weights(1.0))
    channel = RefitChannel.open(("127.0.0.1", port), rank=SENDER if rank == 0 else RECEIVER, layout=layout,
                                device="cpu")
    received = []
    for scale in (1.0, -2.5):  # two refits through the same buffers
        if rank == 0:
            channel.send(buckets.pack(_weights(scale)))
        else:
            received.append({k: v.clone() for k, v in channel.receive().items()})
    if rank == 0:
        changed = dict(_weights(1.0), extra=torch.zeros(2))
        try:
            channel.send(buckets.pack(changed))
        except RuntimeError as exc:
            received.append(str(exc))
    return received


@pytest.fixture(scope="module")
def ends() -> list:
    return run_ranks(_end, nprocs=2)


def test_the_generator_receives_every_weight_bit_for_bit_each_refit(ends: list) -> None:
    received = ends[1]
    assert len(received) == 2
    for got, scale in zip(received, (1.0, -2.5)):
        want = _weights(scale)
        assert list(got) == list(want)
        for name in want:
            assert got[name].dtype == want[name].dtype and torch.equal(got[name], want[name]), name


def test_a_changed_layout_is_refused_by_the_sender(ends: list) -> None:
    (message,) = ends[0]
    assert "layout changed" in message and "extra" in message


def test_each_end_refuses_the_other_ends_call() -> None:
    layout = buckets.layout_of(_weights(1.0))
    receiver = RefitChannel(group=None, rank=RECEIVER, layout=layout, device=torch.device("cpu"), store=None)
    with pytest.raises(RuntimeError, match="only the sender"):
        receiver.send(buckets.pack(_weights(1.0)))
    sender = RefitChannel(group=None, rank=SENDER, layout=layout, device=torch.device("cpu"), store=None)
    with pytest.raises(RuntimeError, match="only the receiver"):
        sender.receive()
