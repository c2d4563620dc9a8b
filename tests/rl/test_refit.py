"""rl.refit.buckets: weights packed per dtype into flat buckets and back, exactly."""

import torch

from rl.refit import buckets


def _weights():
    g = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(3, 4, generator=g), "a.bias": torch.randn(4, generator=g),
            "b.weight": torch.randn(2, 2, generator=g).to(torch.bfloat16), "c": torch.randn(5, generator=g)}


def test_pack_unpack_round_trip_exact_and_ordered():
    w = _weights()
    packed = buckets.pack(w)
    assert sorted(packed.buckets) == ["bfloat16", "float32"]
    assert packed.buckets["float32"].numel() == 12 + 4 + 5
    back = buckets.unpack(packed)
    assert list(back) == list(w)
    for name in w:
        assert back[name].dtype == w[name].dtype and torch.equal(back[name], w[name])


def test_pack_copies_so_later_training_does_not_leak_in():
    w = _weights()
    packed = buckets.pack(w)
    w["a.weight"].add_(1.0)
    assert not torch.equal(buckets.unpack(packed)["a.weight"], w["a.weight"])


def test_share_open_round_trip_on_cpu():
    w = _weights()
    opened = buckets.open_shared(buckets.share(buckets.pack(w)))
    for name, tensor in buckets.unpack(opened).items():
        assert torch.equal(tensor, w[name])
    assert opened.nbytes == 21 * 4 + 4 * 2


def test_to_cpu_walks_containers():
    state = {"state": {0: {"exp_avg": torch.ones(2)}}, "param_groups": [{"lr": 1e-3, "params": [0]}],
             "pair": (torch.zeros(1), 3)}
    out = buckets.to_cpu(state)
    assert out["param_groups"] == state["param_groups"]
    assert torch.equal(out["state"][0]["exp_avg"], torch.ones(2))
    assert isinstance(out["pair"], tuple) and out["pair"][1] == 3
