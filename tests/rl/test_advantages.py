"""GRPO advantages against hand-computed values and a loop-by-loop oracle."""

import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.algorithms.advantages import dynamic_sampling_keep, grpo_advantages

EPS = 1e-6


def test_leave_one_out_hand_computed():
    adv, base, std = grpo_advantages(
        torch.tensor([1.0, 0.0, 0.0, 0.0]), group_size=4, baseline="leave_one_out", normalize=True
    )
    # Row 0: others [0, 0, 0] -> baseline 0, std 0 -> advantage 1 - 0, not divided.
    # Rows 1-3: others [1, 0, 0] -> baseline 1/3; sample std: squares of deviations
    # (2/3)^2 + (1/3)^2 + (1/3)^2 = 6/9, over (3 - 1) = 1/3, std = sqrt(1/3).
    s = math.sqrt(1 / 3)
    assert base.tolist() == pytest.approx([0.0, 1 / 3, 1 / 3, 1 / 3])
    assert std.tolist() == pytest.approx([0.0, s, s, s])
    assert adv.tolist() == pytest.approx([1.0] + [(-1 / 3) / (s + EPS)] * 3)


def test_mean_baseline_hand_computed_and_unnormalized():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0])
    adv, base, std = grpo_advantages(rewards, group_size=4, baseline="mean", normalize=True)
    # Group 0: mean 1/4; deviations .75, -.25 x3 -> squares .5625 + 3*.0625 = .75; /3 -> std .5.
    # Group 1: constant -> std 0, advantage 0.
    assert base.tolist() == pytest.approx([0.25] * 4 + [2.0] * 4)
    assert std.tolist() == pytest.approx([0.5] * 4 + [0.0] * 4)
    assert adv.tolist() == pytest.approx([0.75 / 0.500001] + [-0.25 / 0.500001] * 3 + [0.0] * 4)
    raw, _, _ = grpo_advantages(rewards, group_size=4, baseline="mean", normalize=False)
    assert raw.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0])


def test_leave_one_out_with_two_generations_has_zero_std():
    adv, base, std = grpo_advantages(torch.tensor([1.0, 3.0]), group_size=2, normalize=True)
    # One peer each: baseline is the peer's reward; a single value has no sample std.
    assert base.tolist() == [3.0, 1.0]
    assert std.tolist() == [0.0, 0.0]
    assert adv.tolist() == [-2.0, 2.0]


def test_valid_mask_excludes_rows_and_degenerate_groups():
    rewards = torch.tensor([1.0, 0.0, 5.0, 4.0, 7.0, 9.0])
    mask = torch.tensor([1, 1, 0, 1, 0, 0])
    adv, base, std = grpo_advantages(
        rewards, group_size=3, baseline="mean", normalize=True, valid_mask=mask
    )
    # Group 0 averages [1, 0]: mean .5, sample std sqrt(.5). Row 2 (invalid) is scored against it.
    # Group 1 has one valid row: baseline = reward, std 0, advantage 0.
    s = math.sqrt(0.5)
    assert base.tolist() == pytest.approx([0.5, 0.5, 0.5, 4.0, 7.0, 9.0])
    assert std.tolist() == pytest.approx([s, s, s, 0, 0, 0])
    assert adv[:2].tolist() == pytest.approx([0.5 / (s + EPS), -0.5 / (s + EPS)])
    assert adv[3:].tolist() == [0.0, 0.0, 0.0]


def test_bad_arguments_raise_value_error_naming_the_field():
    with pytest.raises(ValueError, match="algorithm.baseline"):
        grpo_advantages(torch.zeros(4), group_size=2, baseline="median")
    with pytest.raises(ValueError, match="generations_per_prompt"):
        grpo_advantages(torch.zeros(5), group_size=2)


def test_dynamic_sampling_keeps_groups_with_spread():
    keep = dynamic_sampling_keep(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]), group_size=2)
    assert keep.tolist() == [False, True, False]


def _oracle(rewards: list[float], g: int, loo: bool) -> list[float]:
    out = []
    for start in range(0, len(rewards), g):
        group = rewards[start : start + g]
        for i, r in enumerate(group):
            peers = group[:i] + group[i + 1 :] if loo else group
            b = statistics.fmean(peers) if peers else r
            s = statistics.stdev(peers) if len(peers) > 1 else 0.0
            out.append((r - b) / (s + EPS) if s > 0 else r - b)
    return out


@settings(max_examples=80, deadline=None)
@given(
    g=st.integers(2, 6),
    groups=st.integers(1, 3),
    loo=st.booleans(),
    data=st.data(),
)
def test_matches_loop_oracle(g, groups, loo, data):
    values = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=g * groups, max_size=g * groups))
    adv, _, _ = grpo_advantages(
        torch.tensor(values, dtype=torch.float64),
        group_size=g,
        baseline="leave_one_out" if loo else "mean",
        normalize=True,
    )
    assert adv.tolist() == pytest.approx(_oracle(values, g, loo), rel=1e-4, abs=1e-4)
