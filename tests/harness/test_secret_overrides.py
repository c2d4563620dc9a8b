"""A secret's override never shows its value, and YAML never cuts a value at a comment (issue 32, item 6).

`'++env.MY_PASSWORD=*zzsecret4'` (`*`, `@`, `%`, `!`, a backquote, an all-digit PIN) was echoed
in the error, and `++env.MY_PASSWORD='pw #tail'` reached the engine as `pw`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.recipe import RecipeError, load_recipe

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "arith_grpo_cpu.yaml"


@pytest.mark.parametrize("value", ["*zzsecret4", "@zzsecret4", "%zzsecret4", "!zzsecret4", "`zzsecret4",
                                   "[zzsecret4", "{zzsecret4", "zzsecret4 #tail", "12344321", "{zzsecret4: 1}"])
def test_a_secret_override_is_taken_as_written_and_never_shown(value, capsys):
    override = f"++env.MY_PASSWORD={value}"
    assert load_recipe(RECIPE, [override]).data["env"]["MY_PASSWORD"] == value
    assert main(["show", str(RECIPE), override, "--provenance"]) == 0
    out = capsys.readouterr()
    assert "zzsecret4" not in out.out + out.err and "12344321" not in out.out + out.err


@pytest.mark.parametrize("override", ["++env.MY_PASSWORD={from_env: 12344321}", "++env={MY_PASSWORD: 12344321}",
                                      "++env={MY_PASSWORD: *zzsecret4}", "++env={MY_PASSWORD: zzsecret4 #x}"])
def test_a_refused_secret_override_does_not_show_its_value(override, capsys):
    assert main(["show", str(RECIPE), override]) == 2
    err = capsys.readouterr().err
    assert "<redacted>" in err and "12344321" not in err and "zzsecret4" not in err


def test_a_quoted_secret_is_read_as_yaml_text():
    assert load_recipe(RECIPE, ["++env.MY_PASSWORD='pw #tail'"]).data["env"]["MY_PASSWORD"] == "pw #tail"


@pytest.mark.parametrize("override", ["algorithm.name=grpo #distill", "++env.NCCL_DEBUG=INFO # WARN",
                                      "algorithm.num_steps=#3"])
def test_a_value_yaml_would_cut_at_a_comment_is_refused(override):
    with pytest.raises(RecipeError, match="only up to a comment"):
        load_recipe(RECIPE, [override])


def test_a_hash_inside_a_word_is_no_comment():
    assert load_recipe(RECIPE, ["++env.NCCL_DEBUG=a#b"]).data["env"]["NCCL_DEBUG"] == "a#b"


def test_a_whole_env_mapping_override_is_still_a_mapping():
    env = load_recipe(RECIPE, ["++env={NCCL_DEBUG: INFO, MY_PASSWORD: pw}"]).data["env"]
    assert env["NCCL_DEBUG"] == "INFO" and env["MY_PASSWORD"] == "pw"
