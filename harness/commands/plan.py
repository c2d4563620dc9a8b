"""`harness plan RECIPE`: derive and check the resource plan, ask the engine whether it can run it
(a refusal on any machine is exit 2; this machine's refusals are printed). It prints the plan and writes
plan.json only to `--out FILE`: a default file in the working directory ends up committed by accident."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.plan import Plan, make_plan
from harness.plan.checkpoint_size import gib_text
from harness.preflight import ask_before_launch, format_answer
from harness.recipe import load_recipe


def _count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return str(n)


def format_plan(plan: Plan) -> str:
    pol, gen = plan.policy, plan.generation
    lines = [
        f"recipe     {plan.recipe}",
        f"cluster    {plan.nodes} node(s) x {plan.devices_per_node} {plan.device} = world {plan.world}",
        f"policy     {pol['backend']}: TP {pol['tp']} x PP {pol['pp']} x CP {pol['cp']} x DP {pol['dp']}"
        f"  EP {pol['ep']} ETP {pol['etp']} (expert DP {pol['expert_dp']})  SP {'on' if pol['sp'] else 'off'}",
        f"batch      global {pol['global_batch']} = DP {pol['dp']} x micro {pol['micro_batch_size']}"
        f" x accumulation {pol['grad_accumulation']}",
        f"generation {gen['backend']}: TP {gen['tp']} x {gen['replicas']} replicas",
    ]
    if "params" in plan.model:
        lines.append(f"model      {plan.model['family']}: {_count(plan.model['params'])} params,"
                     f" {_count(plan.model['active_params'])} active, {plan.model['num_experts']} experts")
    if "config_file" in plan.model:
        lines.append(f"config     {plan.model['config_file']} (the checkpoint's, model.config on top)")
    if plan.memory is not None:
        m = plan.memory
        lines.append(f"memory     training {m.total:.1f} of {m.capacity:g} GiB per GPU (weights {m.weights:.1f}, "
                     f"reference {m.reference:.1f}, grads {m.grads:.1f}, optimizer {m.optimizer:.1f}, activations "
                     f"{m.activations:.1f}{' in the log-prob pass' if m.logprob_pass else ''}"
                     f"{f', generation replica beside it {m.replica:.1f}' if m.replica else ''}; seq {m.seq_len})")
    if plan.generation_memory is not None:
        g = plan.generation_memory
        resident = (f", training resident {sum(g.resident.values()):.1f}: {', '.join(g.resident)} (not offloaded)"
                    if g.resident else ", training state in host memory (generation.offload_training)"
                    if g.offloaded else ", no training state (a GPU of its own)")
        lines.append(f"memory     generation {g.total:.1f} of {g.capacity:g} GiB per GPU (replica {g.replica:.1f}, "
                     f"KV cache {g.kv_cache:.1f}, gated-delta-net state {g.gdn_state:.1f}, draw {g.draw:.1f}"
                     f"{resident}; "
                     f"{g.rows} rows x {g.seq_len} tokens a replica, {g.slots} decode slot(s))")
    if plan.checkpoints is not None and plan.checkpoints.steps:
        c = plan.checkpoints
        lines.append(f"checkpoint {len(c.steps)} save(s) of {gib_text(c.per_save)} (weights and reference "
                     f"{gib_text(c.weights)}, optimizer state {gib_text(c.optimizer)}), {gib_text(c.after(0))} in all")
    budget = f" (budget {plan.gpu_hours_budget:g})" if plan.gpu_hours_budget else ""
    lines.append(f"gpu-hours  at most {plan.gpu_hours_max:.2f}{budget}")
    lines.extend(f"warning    {w}" for w in plan.warnings)
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    resolved = load_recipe(args.recipe, args.overrides, scale=args.scale)
    plan = make_plan(resolved.data)
    needs: list[str] = []
    machine = ask_before_launch(resolved.data, launching=False, needs=needs)
    print(format_plan(plan), end="")
    print("".join(f"needs      {line}\n" for line in needs), end="")
    print(format_answer(machine), end="")
    if args.out:
        out = Path(args.out)
        out.write_text(json.dumps(plan.to_json(), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0
