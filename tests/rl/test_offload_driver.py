"""The GRPO driver's side of `generation.offload_training`: the training state leaves the devices
just before the replicas decode and is back just after, for a step's rollouts and for validation
alike, and each trip is timed as its own phase."""

from __future__ import annotations

import types

import pytest
import torch

from rl.config import GenerationConfig, RunConfig
from rl.loops import grpo
from rl.loops.grpo import GRPODriver
from rl.metrics import Timer


class Policy:
    """Records the calls; answers an offload with the bytes one rank moved."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def offload(self) -> int:
        self.log.append("offload")
        return 3 * 2**30

    def reload(self) -> int:
        self.log.append("reload")
        return 3 * 2**30


def driver(offload: bool, log: list[str]) -> GRPODriver:
    cfg = RunConfig(name="t", generation=GenerationConfig(offload_training=offload))
    return GRPODriver(cfg=cfg, policy=Policy(log), generate=None, refit=lambda _: 0.0, tokenizer=None, env=None,
                      store=None, record_invariant=lambda _: None)


@pytest.mark.parametrize("offload", [True, False])
def test_the_state_is_away_exactly_while_the_replicas_decode(offload: bool) -> None:
    log: list[str] = []
    d, timer = driver(offload, log), Timer(prefix="timing/train")
    with d._decoding(timer):
        log.append("generate")
    assert log == (["offload", "generate", "reload"] if offload else ["generate"])
    assert set(timer.metrics()) == ({"timing/train/offload", "timing/train/reload"} if offload else set())
    assert d.offloaded_bytes == (3 * 2**30 if offload else 0)


def test_validation_decodes_with_the_state_away_too(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    d = driver(True, log)
    d.env = types.SimpleNamespace(validation_problems=lambda: ["a", "b"], score=lambda problem, text: 1.0)
    prompts = types.SimpleNamespace(input_ids=torch.zeros(2, 1, dtype=torch.long), lengths=torch.ones(2),
                                    columns=lambda: {})
    monkeypatch.setattr(grpo, "encode_prompts", lambda tokenizer, problems, layout: prompts)
    monkeypatch.setattr(grpo.Generation, "of", staticmethod(lambda out: out))
    monkeypatch.setattr(grpo, "decode_responses", lambda tokenizer, gen: ["", ""])

    def decode(*args: object, **kwargs: object) -> tuple[None, None]:
        log.append("generate")
        return None, None

    monkeypatch.setattr(d, "_decode", decode)
    assert d.validate(1) == {"val/accuracy": 1.0, "val/num_samples": 2}
    assert log == ["offload", "generate", "reload"]
