"""harness/plan/checkpoint_size.py: the disk a run's checkpoints take, planned and checked before launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cli import main
from harness.plan import checkpoint_size
from harness.plan.checkpoint_size import CheckpointSize, disk_refusal, save_steps

REPO = Path(__file__).resolve().parents[2]
GIB = 1024**3


@pytest.mark.parametrize("steps,every,at_end,want", [
    (10, 0, True, (10,)), (10, 0, False, ()), (100, 10, True, tuple(range(10, 101, 10))),
    (25, 10, True, (10, 20, 25)), (25, 10, False, (10, 20)), (0, 5, True, ()),
])
def test_save_steps_are_the_engines(steps: int, every: int, at_end: bool, want: tuple) -> None:
    assert save_steps(steps, every, at_end) == want


@given(steps=st.integers(0, 500), every=st.integers(0, 60), at_end=st.booleans())
def test_save_steps_are_in_range_sorted_and_end_with_the_last_when_asked(steps: int, every: int, at_end: bool) -> None:
    got = save_steps(steps, every, at_end)
    assert list(got) == sorted(set(got)) and all(1 <= s <= steps for s in got)
    assert (steps in got) == (steps > 0 and (at_end or (every > 0 and steps % every == 0)))


def test_the_full_width_cut_plans_what_its_state_weighs(capsys) -> None:
    """4.38 B parameters in bf16: fp32 weights and reference (8 bytes each parameter), Adam's two fp32
    moments and the fp32 main copy (12): 20 bytes a parameter, the 81.6 GiB one H200 offloaded."""
    cut = ("model.config={layer_types: [linear_attention, linear_attention, linear_attention, full_attention], "
           "hidden_size: 2048, num_hidden_layers: 4, num_attention_heads: 16, num_key_value_heads: 2, head_dim: 256, "
           "vocab_size: 248320, tie_word_embeddings: false, linear_num_key_heads: 16, linear_num_value_heads: 32, "
           "linear_key_head_dim: 128, linear_value_head_dim: 128, linear_conv_kernel_dim: 4, num_experts: 256, "
           "num_experts_per_tok: 8, moe_intermediate_size: 512, shared_expert_intermediate_size: 512}")
    assert main(["plan", str(REPO / "recipes" / "qwen3_5_35b.yaml"), "--scale", "h200x1", cut,
                 "algorithm.num_steps=10"]) == 0
    assert ("checkpoint 1 save(s) of 81.6 GiB (weights and reference 32.6 GiB, optimizer state 49.0 GiB), "
            "81.6 GiB in all") in capsys.readouterr().out


def test_a_refusal_counts_only_the_saves_to_come(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    size = CheckpointSize(weights=3.0, optimizer=7.0, steps=(10, 20, 30))
    monkeypatch.setattr(checkpoint_size, "free_bytes", lambda path: 25 * GIB)
    line = disk_refusal(size, tmp_path / "not" / "yet")
    assert line == (f"checkpoint: 3 save(s) of 10.0 GiB (30.0 GiB) do not fit the 25.0 GiB free at {tmp_path}/not/yet; "
                    "save less often (checkpoint.every_steps, checkpoint.at_end: false) or elsewhere (checkpoint.dir)")
    assert disk_refusal(size, tmp_path, after_step=10) is None  # a resume from step 10 adds two


def test_free_bytes_reads_the_nearest_existing_folder(tmp_path: Path) -> None:
    assert checkpoint_size.free_bytes(tmp_path / "a" / "b" / "c") == checkpoint_size.free_bytes(tmp_path) > 0


def test_a_run_whose_checkpoints_cannot_fit_is_refused_before_any_run_dir(tmp_path: Path, capsys,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_size, "free_bytes", lambda path: 1024)
    out = tmp_path / "never"
    code = main(["run", str(REPO / "recipes" / "qwen3_5_35b.yaml"), "--scale", "tiny", "--no-progress",
                 "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "checkpoint: 1 save(s) of 4.8 MiB" in err and f"free at {out}/checkpoints" in err and err.count("\n") == 1
    assert not out.exists()
