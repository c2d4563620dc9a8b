"""The resource plan: each megatron-core start-up rule is caught before launch, naming its keys."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from harness.cli import main
from harness.commands.plan import format_plan
from harness.plan import PlanError, make_plan, model_size

QWEN35_35B = {
    "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "vocab_size": 248320, "tie_word_embeddings": False, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "num_experts": 256, "num_experts_per_tok": 8,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
}


def recipe(**changes) -> dict:
    base = {
        "name": "r",
        "model": {"family": "qwen3_5_moe", "config": copy.deepcopy(QWEN35_35B)},
        "cluster": {"nodes": 2, "devices_per_node": 8, "device": "h200"},
        "policy": {"backend": "megatron", "parallel": {"tp": 2, "pp": 1, "cp": 2, "ep": 16, "etp": 1, "sp": True},
                   "micro_batch_size": 1, "max_seq_len": 8192, "precision": "bf16", "distributed_optimizer": True},
        "generation": {"backend": "vllm", "tp": 4, "colocated": True, "max_new_tokens": 4096, "decode": "auto",
                       "decode_slots": 1},
        "algorithm": {"prompts_per_step": 32, "generations_per_prompt": 16},
        "limits": {"timeout_s": 3600, "gpu_hours": 0},
    }
    for dotted, value in changes.items():
        node = base
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return base


def test_qwen3_5_35b_a3b_counts_match_its_name():
    size = model_size(QWEN35_35B, family="qwen3_5_moe")
    assert 34e9 < size.total_params < 36e9  # "35B"
    assert 3e9 < size.active_params < 4e9  # "A3B"


def test_production_plan_is_sound():
    plan = make_plan(recipe())
    assert (plan.world, plan.policy["dp"], plan.policy["expert_dp"]) == (16, 4, 1)
    assert plan.generation["replicas"] == 4
    assert make_plan(recipe(generation__replicas=3)).generation["replicas"] == 3
    assert plan.memory is not None and plan.memory.total < plan.memory.capacity
    assert plan.gpu_hours_max == pytest.approx(16.0)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"policy__parallel": {"tp": 2, "pp": 1, "cp": 3, "ep": 16, "etp": 1, "sp": True}},
         "policy.parallel.tp x pp x cp"),
        ({"policy__parallel": {"tp": 2, "pp": 1, "cp": 2, "ep": 12, "etp": 1, "sp": True}}, "model.config.num_experts"),
        ({"policy__parallel": {"tp": 2, "pp": 1, "cp": 2, "ep": 16, "etp": 2, "sp": True}},
         "policy.parallel.etp x ep x pp"),
        ({"policy__parallel": {"tp": 2, "pp": 1, "cp": 2, "ep": 16, "etp": 1, "sp": False}},
         "policy.parallel.sp must be true"),
        ({"policy__parallel": {"tp": 2, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": False}},
         "policy.parallel.sp must be true"),
        ({"policy__parallel": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": True}},
         "needs policy.parallel.tp > 1"),
        ({"policy__parallel": {"tp": 1, "pp": 16, "cp": 1, "ep": 1, "etp": 1, "sp": False}}, "num_hidden_layers"),
        ({"generation__tp": 3}, "generation.tp = 3 does not divide the 16 devices"),
        ({"algorithm__prompts_per_step": 33, "algorithm__generations_per_prompt": 3},
         "not divisible by DP x policy.micro_batch_size"),
        ({"policy__distributed_optimizer": False, "policy__precision": "fp32",
          "policy__parallel": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": False}}, "exceeds its"),
        ({"limits__gpu_hours": 10}, "over limits.gpu_hours"),
    ],
)
def test_each_bad_plan_is_rejected_naming_its_keys(changes, named):
    with pytest.raises(PlanError) as info:
        make_plan(recipe(**changes))
    assert named in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("changes", [
    {"policy__parallel": {"tp": 16, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": True}},
    {"policy__parallel": {"tp": 1, "pp": 2, "cp": 1, "ep": 8, "etp": 1, "sp": False},
     "model__config__tie_word_embeddings": True},
    {"policy__parallel": {"tp": 2, "pp": 1, "cp": 4, "ep": 16, "etp": 1, "sp": True},
     "model__config__linear_num_key_heads": 4},
    {"policy__backend": "torch"},
])
def test_a_training_backends_own_rules_are_left_to_the_engine(changes):
    """megatron's kv and gated-delta-net heads over tp/cp, its untied embeddings under pp, the torch
    backend's data parallel only: the engine's preflight refuses them from the backend's rules
    (tests/rl/test_backend_rules.py), and `harness plan` / `run` print its lines; the plan does not
    restate them (a layout may still overflow the memory: that is the plan's)."""
    try:
        problems = make_plan(recipe(**changes)).warnings
    except PlanError as error:
        problems = error.problems
    named = ("num_key_value_heads", "tie_word_embeddings", "linear_num_key_heads", "policy.backend")
    assert not [p for p in problems if any(key in p for key in named)]


def test_a_packed_row_budget_sizes_the_activation_estimate():
    plain = make_plan(recipe()).memory
    unset = make_plan(recipe(policy__sequence_packing={"enabled": True})).memory  # null: an unpacked row's
    packed = make_plan(recipe(policy__sequence_packing={"enabled": True, "max_tokens_per_row": 4096})).memory
    assert (plain.seq_len, unset.seq_len, packed.seq_len) == (8192, 8192, 4096)
    assert packed.activations < unset.activations == plain.activations


def test_dense_model_with_expert_parallel_is_rejected():
    r = recipe(model={"family": "qwen3_5", "config": {k: v for k, v in QWEN35_35B.items() if "expert" not in k}})
    with pytest.raises(PlanError, match="has no experts"):
        make_plan(r)


def test_cpu_run_without_head_counts_plans_with_a_warning():
    r = recipe(cluster={"nodes": 1, "devices_per_node": 2, "device": "cpu"}, policy__backend="torch",
               policy__parallel={"tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": False},
               generation__tp=1, model={"family": "qwen3_5", "config": {"hidden_size": 64}})
    plan = make_plan(r)
    assert plan.memory is None and plan.gpu_hours_max == 0.0
    assert any("num_hidden_layers" in w for w in plan.warnings)


def test_gpu_run_without_head_counts_is_rejected():
    r = recipe(model={"family": "qwen3_5", "config": {"hidden_size": 64}})
    with pytest.raises(PlanError, match="is needed to plan"):
        make_plan(r)


def test_the_log_prob_pass_is_sized_by_its_own_micro_batch():
    """No layer activations are kept in the log-prob pass, but its logits are: a large
    policy.logprob_batch_size can be the larger term, and the refusal then names it."""
    plain = make_plan(recipe()).memory
    same = make_plan(recipe(policy__logprob_batch_size=1)).memory
    # its replica on a GPU of its own: no training state beside it, only the training phase at stake
    larger = make_plan(recipe(policy__logprob_batch_size=16, generation__colocated=False)).memory
    assert same.activations == plain.activations and not plain.logprob_pass
    assert larger.logprob_pass and larger.activations > plain.activations
    assert plain.to_json()["activations_from"] == "training" and larger.to_json()["activations_from"] == "logprob_pass"
    with pytest.raises(PlanError) as info:
        make_plan(recipe(policy__logprob_batch_size=64))
    assert "the log-prob pass's activations" in str(info.value) and "policy.logprob_batch_size" in str(info.value)


def test_a_step_without_a_log_prob_pass_is_sized_by_training_alone():
    """prev_logprobs: training with no KL term: the engine runs no log-prob pass, so a large
    policy.logprob_batch_size sizes nothing; a KL term (a reference pass) brings the pass back."""
    alone = {"name": "grpo", "prompts_per_step": 32, "generations_per_prompt": 16,
             "loss": {"prev_logprobs": "training", "kl_beta": 0.0}}
    plain = make_plan(recipe()).memory
    skipped = make_plan(recipe(policy__logprob_batch_size=64, generation__colocated=False, algorithm=alone)).memory
    assert skipped.activations == plain.activations and not skipped.logprob_pass
    with_kl = dict(alone, loss={"prev_logprobs": "training", "kl_beta": 0.01})
    with pytest.raises(PlanError, match="the log-prob pass's activations"):
        make_plan(recipe(policy__logprob_batch_size=64, generation__colocated=False, algorithm=with_kl))


def test_an_external_engine_over_our_memory_model_plans_with_a_warning():
    """The memory estimate is our engine's; an external engine (TRL) keeps its own."""
    over = {"policy__distributed_optimizer": False, "policy__precision": "fp32",
            "policy__parallel": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "etp": 1, "sp": False}}
    plan = make_plan(recipe(**over, engine={"command": ["peer"], "metrics": "jsonl"}))
    assert any("not checked for an external engine" in w for w in plan.warnings)
    with pytest.raises(PlanError, match="exceeds its"):
        make_plan(recipe(**over))


def test_replicas_follow_the_engines_rule_when_the_recipe_leaves_them_null():
    """One per GPU when colocated on GPUs, else one (rl/cluster/placement.py `generation_replicas`)."""
    assert (make_plan(recipe(generation__tp=1, policy__max_seq_len=4096, policy__activation_checkpointing=True))
            .generation["replicas"] == 16)
    one_replica = recipe(generation__tp=1, generation__colocated=False, generation__max_new_tokens=2048)
    assert make_plan(one_replica).generation["replicas"] == 1


def test_the_plan_states_both_phases():
    plan = make_plan(recipe())
    phases = plan.to_json()["memory_gib"]
    assert set(phases) == {"training", "generation"}
    gen = phases["generation"]
    assert (gen["rows"], gen["seq_len"]) == (128, 256 + 4096)  # 512 rows over 4 replicas
    assert gen["resident_from_training"]["optimizer"] == phases["training"]["optimizer"]
    printed = format_plan(plan)
    assert "memory     training " in printed and "memory     generation " in printed


def test_a_generation_phase_over_the_device_is_refused_naming_the_phase_and_the_overflow():
    r = recipe(generation__tp=1, generation__max_new_tokens=8192)
    training = make_plan(recipe(generation__tp=1, generation__max_new_tokens=8192,
                                generation__colocated=False, generation__replicas=16)).memory
    assert training.total < training.capacity  # training alone fits; with the replica beside it, not
    with pytest.raises(PlanError) as info:
        make_plan(r)
    (line,) = [p for p in info.value.problems if "generation phase" in p]
    estimated = float(line.split("estimated ")[1].split(" GiB")[0])
    over = float(line.split("GiB by ")[1].split(" ")[0])
    assert line.startswith("generation phase: estimated ") and "\n" not in line
    assert "set generation.offload_training: true" in line
    assert over == pytest.approx(estimated - 139.8, abs=0.051) and over > 0


def test_a_colocated_replica_counts_in_the_training_phase():
    """The replica beside a rank keeps its weights and cache while the rank trains."""
    apart = make_plan(recipe(generation__colocated=False, generation__replicas=16))
    beside = make_plan(recipe())
    g = beside.generation_memory
    assert apart.memory.replica == 0
    assert beside.memory.replica == pytest.approx(g.replica + g.kv_cache + g.gdn_state)
    assert beside.memory.total == pytest.approx(apart.memory.total + beside.memory.replica)
    assert "generation replica beside it" in format_plan(beside)


def test_a_generation_phase_that_fits_once_training_waits_in_host_memory_is_planned():
    """The same rollouts as above, the training state offloaded: no training term stays beside the replica."""
    resident = make_plan(recipe(generation__tp=1, generation__max_new_tokens=8192, generation__colocated=False,
                                generation__replicas=16)).generation_memory
    plan = make_plan(recipe(generation__tp=1, generation__max_new_tokens=8192, generation__offload_training=True,
                            policy__activation_checkpointing=True))  # so training fits beside the replica
    gen = plan.generation_memory
    assert gen.resident == {} and gen.offloaded and gen.total == pytest.approx(resident.total)
    assert gen.total < gen.capacity
    assert plan.to_json()["memory_gib"]["generation"]["training_offloaded"] is True
    assert "training state in host memory (generation.offload_training)" in format_plan(plan)


@pytest.mark.parametrize("command", [["plan"], ["run", "--dry-run"]])
def test_the_flagship_with_longer_rollouts_is_refused_before_launch(command, tmp_path, capsys):
    """Rollouts of 64K new tokens: the replica's KV cache, which stays beside the rank while it
    trains, no longer fits (the training state itself waits in host memory while it decodes)."""
    flagship = str(Path(__file__).resolve().parents[2] / "recipes" / "qwen3_5_35b.yaml")
    assert main([command[0], flagship, "generation.max_new_tokens=65536", *command[1:],
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: qwen3_5_35b: training phase: estimated ") and err.count("\n") == 1
    assert "generation replica" in err
    assert not (tmp_path / "out").exists()


def test_each_kept_decode_shape_counts_its_cache():
    """generation.decode_slots caches on the replica's GPU (one for the eager loop), in both phases."""
    short = {"generation__max_new_tokens": 1024}
    one, four = make_plan(recipe(**short)), make_plan(recipe(generation__decode_slots=4, **short))
    eager = make_plan(recipe(generation__decode_slots=4, generation__decode="eager", **short))
    g1, g4 = one.generation_memory, four.generation_memory
    assert (g1.slots, g4.slots, eager.generation_memory.slots) == (1, 4, 1)
    assert g4.kv_cache == pytest.approx(4 * g1.kv_cache) and g4.gdn_state == pytest.approx(4 * g1.gdn_state)
    assert four.memory.replica - one.memory.replica == pytest.approx(3 * (g1.kv_cache + g1.gdn_state))
    assert "4 decode slot(s)" in format_plan(four)


PERF_8K = ["generation.max_new_tokens=8192", "policy.micro_batch_size=1", "policy.activation_checkpointing=true",
           "generation.offload_training=true", "generation.decode_slots=1"]


def test_the_perf_recipe_scales_to_8k_responses_with_the_overrides_its_comment_names(capsys):
    """Issue 31's "scales up to 8k-token responses": the plan takes the recipe with the overrides its
    comment names, and refuses 8k responses alone (the activations and four decode slots' caches)."""
    path = Path(__file__).resolve().parents[2] / "recipes" / "perf_grpo_dense_1b.yaml"
    assert " ".join(PERF_8K) in " ".join(line.lstrip("# ") for line in path.read_text().splitlines())
    assert main(["plan", str(path), *PERF_8K]) == 0
    assert "seq 8448" in capsys.readouterr().out
    assert main(["plan", str(path), PERF_8K[0]]) == 2
