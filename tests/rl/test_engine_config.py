"""Recipe parsing: typed sections, unknown keys rejected by dotted path, cross-field rules."""

from pathlib import Path

import pytest

from rl.config import load_config, parse_config

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "arith_grpo_cpu.yaml"


def _base():
    return {"name": "t", "cluster": {"devices_per_node": 2},
            "algorithm": {"prompts_per_step": 4, "generations_per_prompt": 4}}


def test_defaults_and_types():
    cfg = parse_config({**_base(), "policy": {"optimizer": {"lr": 1}}})
    assert cfg.dp_size == 2 and cfg.batch_rows == 16
    assert isinstance(cfg.policy.optimizer.lr, float)
    assert cfg.algorithm.loss.truncation is None


@pytest.mark.parametrize("data, field", [
    ({"algorithm": {"los": {}}}, "algorithm.los"),
    ({"policy": {"parallel": {"dp": 2}}}, "policy.parallel.dp"),
    ({"bogus": 1}, "bogus"),
])
def test_unknown_keys_name_the_path(data, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        parse_config({**_base(), **data})


@pytest.mark.parametrize("data, field", [
    ({"algorithm": {"prompts_per_step": 3, "generations_per_prompt": 3}}, "prompts_per_step"),
    ({"data_plane": {"backend": "kafka"}}, "data_plane.backend"),
    ({"algorithm": {"loss": {"truncation": "clip"}}}, "truncation"),
    ({"cluster": {"devices_per_node": "two"}}, "cluster.devices_per_node"),
    ({"defaults": ["base"]}, "defaults"),
    ({"policy": {"sequence_packing": {"enabled": True, "max_tokens_per_row": 0}}}, "max_tokens_per_row: must be >= 1"),
    ({"policy": {"sequence_packing": {"max_tokens_per_row": 64}}}, "max_tokens_per_row: read only with"),
])
def test_bad_values_name_the_field(data, field):
    with pytest.raises(ValueError, match=field):
        parse_config({**_base(), **data})


def test_shipped_recipe_parses():
    cfg = load_config(RECIPE)
    assert cfg.name == "arith_grpo_cpu" and cfg.dp_size == 2


@pytest.mark.parametrize("data, message", [
    ({"algorithm": {"num_steps": 2.0}}, "algorithm.num_steps: expected int, got 2.0"),
    ({"algorithm": {"num_steps": True}}, "algorithm.num_steps: expected int, got True"),
    ({"policy": {"optimizer": {"lr": float("nan")}}}, "policy.optimizer.lr: expected a finite float, got nan"),
    ({"generation": {"temperature": float("inf")}}, "generation.temperature: expected a finite float, got inf"),
    ({"policy": {"optimizer": {"betas": [0.9, float("-inf")]}}}, r"betas\[1\]: expected a finite float, got -inf"),
    ({"policy": {"optimizer": {"betas": [0.9, "x"]}}}, r"betas\[1\]: expected float, got 'x'"),
])
def test_numbers_are_taken_as_the_harness_validates_them(data, message):
    """Integers are ints (not floats, not bools) and floats finite, as `harness validate` says."""
    base = _base()
    with pytest.raises(ValueError, match=message):
        parse_config({**base, **data, "algorithm": {**base["algorithm"], **data.get("algorithm", {})}})


def test_betas_given_as_ints_become_floats():
    cfg = parse_config({**_base(), "policy": {"optimizer": {"betas": [0, 1]}}})
    assert cfg.policy.optimizer.betas == [0.0, 1.0] and all(type(b) is float for b in cfg.policy.optimizer.betas)
