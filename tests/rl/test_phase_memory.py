"""Each phase's peak device memory per GPU: a rank's process plus the replica on its GPU, bracketed
by the GRPO driver around decoding (after the training state left) and around training."""

from __future__ import annotations

import pytest

from rl.config import GenerationConfig, RunConfig
from rl.loops.grpo import GRPODriver
from rl.metrics import Timer
from rl.metrics.phase_memory import PhaseMemory, gpu_peaks


def test_a_replica_adds_to_the_gpu_it_shares_with_its_rank() -> None:
    ranks, gens = [(1.0, 10.0), (1.0, 12.0)], [(5.0, 20.0), (5.0, 7.0)]
    assert gpu_peaks(ranks, gens, colocated=True) == 30.0  # GPU 0: 10 + 20 (GPU 1: 12 + 7)
    assert gpu_peaks(ranks, gens, colocated=False) == 20.0  # each process a GPU of its own
    assert gpu_peaks(ranks[:1], gens, colocated=True) == 30.0  # replica 1 alone on its GPU: 7
    assert gpu_peaks([], [], colocated=True) == 0.0


class Workers:
    """Fake workers: a phase's peak per process, set by the test; records resets."""

    def __init__(self, log: list[str]) -> None:
        self.log, self.peaks = log, {"policy-0": 0.0, "generation-0": 0.0}

    def call(self, handles: list[str], reset: bool) -> list[tuple[float, float]]:
        if reset:
            self.log.append("start")
            return [(0.0, 0.0) for _ in handles]
        self.log.append("peak")
        return [(0.0, self.peaks[h]) for h in handles]


class Policy:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def offload(self) -> int:
        self.log.append("offload")
        return 0

    def reload(self) -> int:
        self.log.append("reload")
        return 0


@pytest.mark.parametrize("offload", [True, False])
def test_generation_is_measured_while_the_state_is_away(offload: bool) -> None:
    log: list[str] = []
    workers = Workers(log)
    memory = PhaseMemory(workers.call, ["policy-0"], ["generation-0"], colocated=True)
    cfg = RunConfig(name="t", generation=GenerationConfig(offload_training=offload))
    d = GRPODriver(cfg=cfg, policy=Policy(log), generate=None, refit=lambda _: 0.0, tokenizer=None, env=None,
                   store=None, record_invariant=lambda _: None, memory=memory)
    with d._decoding(Timer(prefix="timing/train")):
        log.append("generate")
        workers.peaks.update({"policy-0": 0.5, "generation-0": 9.0})
    expected = ["start", "generate", "peak", "start"]
    assert log == (["offload", *expected[:3], "reload", "start"] if offload else expected)
    assert d.peaks == {"generation": 9.5}
