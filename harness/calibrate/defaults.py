"""The checks calibrate proposes for a recipe whose thresholds file has none for the hardware.

Each is a statistic with a direction; a `placed` check's constant is a placeholder that the runs
replace (harness/calibrate/margin.py), the others are written as they stand once proven. The
window is the last W steps against the first W, W = min(10, half the run), as the shipped CPU
thresholds read them. A default whose metric no run logged does not apply to the engine and is
left out with a note; tokens/s floors are for GPUs only (on the shared CPU box load decides them).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from harness.thresholds import ThresholdCheck, parse

WINDOW = 10


@dataclass(frozen=True)
class Default:
    name: str
    expr: str  # {w}: the window; {w1}: the step after the first window
    why: str  # the intent; calibrate adds the evidence
    placed: bool
    gpu_only: bool = False


DEFAULTS = (
    Default("reward_final", "mean(train/reward, -{w}) > 0.5",
            "The policy must end the run scoring as the seeds did.", placed=True),
    Default("reward_improves", "mean(train/reward, -{w}) - mean(train/reward, 1, {w1}) > 0.1",
            "GRPO must improve on the policy it started from.", placed=True),
    Default("loss_finite", "all_finite(train/loss) and all_finite(train/grad_norm)",
            "A NaN or inf anywhere in training is a failure whatever the reward does.", placed=False),
    Default("grad_norm_bounded", "max(train/grad_norm) < 50",
            "A grad-norm spike means the run diverged.", placed=True),
    Default("generator_in_sync", "max(train/gen_kl_error) < 1e-6",
            "After every refit the generator holds the policy's weights; a missed refit shows here.", placed=True),
    Default("flops_recorded", "min(total_flops) > 0 and min(theoretical_tflops) > 0",
            "The FLOPs fields must be present and positive on every step.", placed=False),
    Default("throughput_floor", "mean(performance/tokens_per_sec_per_gpu) > 1",
            "A throughput regression of the engine.", placed=True, gpu_only=True),
)


def window(num_steps: int) -> int:
    return max(1, min(WINDOW, num_steps // 2))


def default_checks(*, num_steps: int, hardware: str, today: dt.date) -> list[tuple[ThresholdCheck, bool]]:
    """(check, placed) for each default that applies to the hardware class."""
    w = window(num_steps)
    out = []
    for default in DEFAULTS:
        if default.gpu_only and hardware == "cpu":
            continue
        expr = default.expr.format(w=w, w1=w + 1)
        out.append((ThresholdCheck(name=default.name, expr=expr, tree=parse(expr), why=default.why, since=today,
                                   hardware=(hardware,), path="<default>", line=0), default.placed))
    return out
