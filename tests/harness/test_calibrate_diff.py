"""`harness calibrate --diff`: the proposed file against the current one, check by check."""

from __future__ import annotations

from calibrate_runs import check, write_recipe, write_runs

from harness.calibrate.bounds import HIGH, LOW, parts_of
from harness.calibrate.render import render
from harness.cli import main
from harness.thresholds import load_thresholds, parse


def diff_of(tmp_path, capsys, checks):
    recipe = write_recipe(tmp_path / "recipe", thresholds={"recipe": "r", "checks": checks})
    runs = write_runs(tmp_path / "runs")
    code = main(["calibrate", str(recipe), "--runs", *runs, "--out", str(tmp_path / "p.yaml"), "--diff"])
    out = capsys.readouterr().out
    return code, out[out.index("--- "):].splitlines()


def test_diff_prints_each_moved_bound_with_its_evidence(tmp_path, capsys):
    code, lines = diff_of(tmp_path, capsys, [
        check("reward_final", "mean(train/reward, -10) > 0.6", hardware=["cpu"]),
        check("loss_finite", "all_finite(train/loss)"),
        check("ranks", "max(num_ranks) < 10", hardware=["cpu"]),
        check("kl_nonnegative", "min(train/gen_kl_error) >= 0", hardware=["cpu"])])
    assert code == 1  # kl_nonnegative cannot fail, so it is not written
    assert lines[0].endswith("thresholds.yaml") and lines[1].endswith("p.yaml")
    at = lines.index("moved     reward_final")
    assert lines[at + 1].strip() == "mean(train/reward, -10) > 0.339: bound 0.6 -> 0.339 (-0.261, -43.5%)"
    assert lines[at + 2].strip().startswith(
        "evidence: mean(train/reward, -10) per run: 0.61 (seed 42), 0.69 (seed 7), 0.55 (seed 123)")
    assert "same      loss_finite: all_finite(train/loss)" in lines
    at = lines.index("moved     ranks")
    assert lines[at + 1].strip() == "max(num_ranks) < 10  ->  max(num_ranks) == 2 (exact, tolerance 0)"
    at = lines.index("removed   kl_nonnegative: min(train/gen_kl_error) >= 0")
    assert lines[at + 1].strip().startswith("why not: self-test on seed 42: cannot fail")


def test_diff_against_no_checks_lists_the_defaults_as_new(tmp_path, capsys):
    code, lines = diff_of(tmp_path, capsys, [check("gpu", "max(train/loss) < 9", hardware=["h200x2"])])
    assert code == 0
    assert lines[0].endswith("thresholds.yaml (no checks for this hardware: the default set is proposed)")
    assert "new       reward_final: mean(train/reward, -10) > 0.339" in lines
    assert not any("throughput_floor" in line for line in lines)  # a GPU default; this is cpu


def test_a_two_sided_bound_has_a_side_per_constant():
    (part,) = parts_of(parse("0.2 < mean(x) <= 0.8"))
    assert [(b.side, b.value) for b in part.bounds] == [(LOW, 0.2), (HIGH, 0.8)]
    for text in ("mean(x) > mean(y)", "all_finite(x)", "mean(x) != 1", "1 < 2 < mean(x)", "mean(x) > 1 or max(x) < 2"):
        assert all(p.statistic is None for p in parts_of(parse(text))), text


def test_render_reads_back_the_same_checks(tmp_path):
    original = tmp_path / "t.yaml"
    original.write_text(
        'recipe: "true"\nchecks:\n'
        '  - {name: "1e3", expr: "max(\\"val/pass@1\\") > 0.5", why: "a: b # c\\n\\n  d", since: 2026-11-30,'
        ' hardware: ["null", cpu]}\n')
    checks = load_thresholds(original, hardware=None)
    (tmp_path / "r.yaml").write_text(render("true", checks, header=["made\nby a test"]))
    again = load_thresholds(tmp_path / "r.yaml", hardware=None, recipe="true")
    assert [(c.name, c.expr, c.since, c.hardware) for c in again] == [("1e3", 'max("val/pass@1") > 0.5',
                                                                       checks[0].since, ("null", "cpu"))]
    assert again[0].why == "a: b # c d"


def test_an_everywhere_check_whose_bounds_did_not_move_keeps_its_scope(tmp_path, capsys):
    # the parentheses nest the `and`s otherwise than calibrate joins them: the text moves, no bound does
    expr = "all_finite(train/loss) and (min(total_flops) > 0 and max(num_ranks) == 2)"
    code, lines = diff_of(tmp_path, capsys, [check("sound", expr)])
    assert code == 0
    assert f"same      sound: {expr}" in lines
    (kept,) = load_thresholds(tmp_path / "p.yaml", hardware=None, recipe="r")
    assert (kept.expr, kept.hardware, kept.why) == (expr, None, "set by hand")


def test_an_everywhere_check_whose_bound_moved_says_its_new_scope(tmp_path, capsys):
    code, lines = diff_of(tmp_path, capsys, [check("reward_final", "mean(train/reward, -10) > 0.6"),
                                             check("gpu", "max(train/loss) < 9", hardware=["h200x2"])])
    assert code == 0
    at = lines.index("moved     reward_final")
    assert lines[at + 2].strip() == ("scope: every hardware class -> cpu, whose runs moved its bound; "
                                     "the current check stays for h200x2")


def test_an_everywhere_check_of_a_file_that_names_no_other_class_says_it_now_applies_to_one(tmp_path, capsys):
    code, lines = diff_of(tmp_path, capsys, [check("reward_final", "mean(train/reward, -10) > 0.6")])
    assert code == 0
    at = lines.index("moved     reward_final")
    assert lines[at + 2].strip() == ("scope: every hardware class -> cpu, whose runs moved its bound; "
                                     "the file names no other class to keep the current check for")
