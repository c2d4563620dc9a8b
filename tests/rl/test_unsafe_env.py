"""A recipe's env may not set names that change every process of the run unless it opts in
(issue 32: LD_PRELOAD ran its constructor in 15 processes, PYTHONPATH a sitecustomize.py in 13,
RAY_ADDRESS made the engine leave its private Ray, RL_FAULTS and PYTHONOPTIMIZE passed)."""

from __future__ import annotations

import pytest

from rl.config import parse_config
from rl.preflight import static_refusals

BASE = {"name": "t", "cluster": {"devices_per_node": 2},
        "algorithm": {"prompts_per_step": 4, "generations_per_prompt": 4}}


@pytest.mark.parametrize(("scope", "name", "way"), [
    ("env", "LD_PRELOAD", "env_unsafe_allow"),
    ("env", "PYTHONPATH", "env_unsafe_allow"),
    ("policy.env", "PYTHONOPTIMIZE", "env_unsafe_allow"),
    ("env", "RAY_ADDRESS", "--ray-address"),
    ("generation.env", "RAY_AUTH_MODE", "env_unsafe_allow"),
    ("env", "RL_FAULTS", "recipes/suites/faults.yaml"),
])
def test_a_guarded_name_is_refused_in_one_line_naming_the_key_and_the_way_in(scope, name, way):
    data = {**BASE}
    if scope == "env":
        data["env"] = {name: "x"}
    else:
        data[scope.split(".")[0]] = {"env": {name: "x"}}
    (line,) = static_refusals(data)
    assert line.startswith(f"{scope}.{name}: not settable from a recipe's env") and way in line
    assert "\n" not in line


def test_env_unsafe_allow_lets_the_named_ones_through_and_only_guarded_names_may_be_listed():
    cfg = parse_config({**BASE, "env": {"LD_PRELOAD": "x.so", "RL_FAULTS": "nan_loss"},
                        "env_unsafe_allow": ["LD_PRELOAD", "RL_FAULTS", "PYTHONPATH"]})
    assert cfg.env["LD_PRELOAD"] == "x.so"  # PYTHONPATH is granted and unused: a permission
    with pytest.raises(ValueError, match=r"env_unsafe_allow\[0\]: 'HF_HOME' is not a guarded name"):
        parse_config({**BASE, "env_unsafe_allow": ["HF_HOME"]})
    with pytest.raises(ValueError, match="env.PYTHONPATH"):
        parse_config({**BASE, "env": {"LD_PRELOAD": "x.so", "PYTHONPATH": "d"}, "env_unsafe_allow": ["LD_PRELOAD"]})


def test_names_that_only_look_alike_pass():
    cfg = parse_config({**BASE, "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "MY_RAY_X": "1",
                                        "RL_FAULTS_NOTE": "1", "OLD_LD_PATH": "1"}})
    assert len(cfg.env) == 4
