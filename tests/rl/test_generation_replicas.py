"""`generation.replicas`: a call's prompt groups spread over replicas by expected tokens, whole
groups on one replica, rows back in the caller's order with one replica's tokens, and a row-order
record that a scrambled restore fails (rl/generation/replicas.py)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.config import ModelConfig
from rl.data.errors import DataIntegrityError
from rl.generation import generate, row_seeds
from rl.generation.generation import FIELDS
from rl.generation.replicas import (
    BALANCE_METRIC,
    ReplicaSpread,
    expected_tokens,
    prompt_groups,
    replica_rows,
    spread_groups,
)
from rl.generation.row_order import INVARIANT
from rl.models import build_model

torch.set_num_threads(1)
VOCAB, PAD, EOS, NEW = 52, 0, 1, 6


def batch(group_lengths: list[int], group_size: int, *, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded prompts laid out as the driver lays them: each prompt repeated `group_size` times in a row."""
    g = torch.Generator().manual_seed(seed)
    width = max(group_lengths)
    prompts = torch.full((len(group_lengths), width), PAD)
    for i, n in enumerate(group_lengths):
        prompts[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
    lengths = torch.tensor(group_lengths)
    return prompts.repeat_interleave(group_size, dim=0), lengths.repeat_interleave(group_size)


def fake_generate(prompt_ids: torch.Tensor, *, seeds: torch.Tensor, prompt_lengths: torch.Tensor,
                  max_new_tokens: int = NEW, **_: object) -> dict[str, torch.Tensor]:
    """Generation columns that are a function of each row's own inputs only (as the sampler's are)."""
    rows, width = prompt_ids.shape
    steps = torch.arange(max_new_tokens)
    response = 2 + (seeds[:, None] * 7 + steps[None, :]) % (VOCAB - 2)
    ids = torch.full((rows, width + max_new_tokens), PAD)
    for r in range(rows):
        n = int(prompt_lengths[r])
        ids[r, :n] = prompt_ids[r, :n]
        ids[r, n:n + max_new_tokens] = response[r]
    mask = (ids != PAD).long()
    return {"input_ids": ids, "attention_mask": mask, "response_mask": mask, "gen_logprobs": -seeds[:, None] * mask,
            "lengths": prompt_lengths + max_new_tokens, "truncated": seeds % 2 == 0,
            "prompt_lengths": prompt_lengths, "version": torch.tensor(3)}


def sequential(generate_one):
    """A `submit` that runs each share on its own in turn, noting which replica got which seeds."""
    seen: dict[int, list[int]] = {}

    def submit(shares):
        outs = []
        for replica, share in shares:
            seen.setdefault(replica, []).extend(share["seeds"].tolist())
            outs.append(generate_one(**share))
        return outs

    return submit, seen


def two_replicas(generate_one, records: list[dict] | None = None) -> ReplicaSpread:
    """A spread over two in-process replicas, each running `generate_one`."""
    return ReplicaSpread(sequential(generate_one)[0], num_replicas=2, new_tokens=NEW, pad_token_id=PAD,
                         record_invariant=(records if records is not None else []).append)


def test_groups_are_runs_of_equal_prompts() -> None:
    prompts, lengths = batch([3, 5, 2], 4)
    assert [g.tolist() for g in prompt_groups(prompts, lengths)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    prompts[5, 4] += 1  # a prompt differing in one token starts a run of its own
    assert [len(g) for g in prompt_groups(prompts, lengths)] == [4, 1, 1, 2, 4]
    assert prompt_groups(prompts[:0], lengths[:0]) == []


def test_the_largest_groups_go_first_to_the_least_loaded_replica() -> None:
    assert spread_groups([5, 9, 2, 7, 3], 2) == [[1, 2, 4], [0, 3]]  # 9 | 7 | 5->r1 | 3->r0 | 2->r0: 14 and 12
    assert spread_groups([4, 4, 4, 4], 2) == [[0, 2], [1, 3]]  # ties: the lower replica, then alternate
    assert spread_groups([1], 3) == [[0], [], []]
    with pytest.raises(ValueError, match="generation.replicas must be >= 1"):
        spread_groups([1], 0)


@st.composite
def calls(draw) -> tuple[list[int], int, int]:
    lengths = draw(st.lists(st.integers(1, 12), min_size=1, max_size=24))
    return lengths, draw(st.integers(1, 5)), draw(st.integers(1, 6))


@settings(max_examples=150, deadline=None)
@given(calls(), st.integers(0, 32))
def test_shares_are_whole_groups_every_row_once_within_one_group_of_the_mean(call, new_tokens) -> None:
    group_lengths, group_size, num_replicas = call
    prompts, lengths = batch(group_lengths, group_size)
    shares = replica_rows(prompts, lengths, num_replicas=num_replicas, new_tokens=new_tokens)
    assert len(shares) == num_replicas
    every = torch.cat(shares)
    assert sorted(every.tolist()) == list(range(len(lengths)))  # a partition of the rows
    assert all(torch.equal(s, s.sort().values) for s in shares)  # the caller's relative order kept
    groups = prompt_groups(prompts, lengths)
    owner = {int(row): r for r, share in enumerate(shares) for row in share}
    assert all(len({owner[int(row)] for row in g}) == 1 for g in groups)  # whole groups on one replica
    loads = [expected_tokens(lengths, s, new_tokens) for s in shares]
    largest = max(expected_tokens(lengths, g, new_tokens) for g in groups)
    assert max(loads) <= sum(loads) / num_replicas + largest  # the greedy's bound
    if len(groups) >= num_replicas:
        assert all(len(s) for s in shares)  # no replica idle while another holds two groups


@settings(max_examples=100, deadline=None)
@given(calls())
def test_rows_come_back_in_the_callers_order_as_one_replica_decodes_them(call) -> None:
    group_lengths, group_size, num_replicas = call
    prompts, lengths = batch(group_lengths, group_size)
    seeds = row_seeds(11, len(lengths))
    whole = fake_generate(prompts, seeds=seeds, prompt_lengths=lengths)
    submit, seen = sequential(fake_generate)
    records: list[dict] = []
    spread = ReplicaSpread(submit, num_replicas=num_replicas, new_tokens=NEW, pad_token_id=PAD,
                           record_invariant=records.append)
    out = spread(prompts, seeds=seeds, prompt_lengths=lengths)
    for name in FIELDS:
        assert torch.equal(out[name], whole[name]), name
    assert int(out["version"]) == 3
    assert sorted(s for got in seen.values() for s in got) == sorted(seeds.tolist())  # every row's own seed
    if num_replicas == 1:
        assert records == []  # nothing reordered, nothing to record
    else:
        [record] = records
        assert record["check"] == INVARIANT and record["ok"] and record["replicas"] == num_replicas
        assert record["replica_rows"] == [len(seen.get(r, [])) for r in range(num_replicas)]


def test_a_scrambled_restore_fails_the_row_order_record(monkeypatch) -> None:
    monkeypatch.setenv("RL_FAULTS", "generation_replica_order_kept")
    prompts, lengths = batch([3, 5, 2, 4], 2)
    records: list[dict] = []
    spread = two_replicas(fake_generate, records)
    with pytest.raises(DataIntegrityError, match="generation_row_order: .* rows out of place"):
        spread(prompts, seeds=row_seeds(5, len(lengths)), prompt_lengths=lengths)
    [record] = records
    assert record["ok"] is False and "out of place" in record["detail"] and record["replicas"] == 2


def test_a_replica_that_hands_its_rows_back_swapped_fails_the_record() -> None:
    """The check reads each row's prompt and length, not the restore's arithmetic: a share of two
    prompts returned reversed fails."""
    def swapped(**share):
        return {k: v.flip(0) if v.dim() else v for k, v in fake_generate(**share).items()}

    prompts, lengths = batch([3, 5, 2, 4], 1)
    records: list[dict] = []
    spread = two_replicas(swapped, records)
    with pytest.raises(DataIntegrityError, match="out of place"):
        spread(prompts, seeds=row_seeds(5, len(lengths)), prompt_lengths=lengths)
    assert records[0]["ok"] is False


def test_replicas_on_different_weight_versions_are_an_error() -> None:
    calls_seen = []

    def stale(**share):
        calls_seen.append(1)
        return {**fake_generate(**share), "version": torch.tensor(len(calls_seen))}

    prompts, lengths = batch([3, 5], 2)
    spread = two_replicas(stale)
    with pytest.raises(RuntimeError, match=r"different weight versions \[1, 2\]"):
        spread(prompts, seeds=row_seeds(5, len(lengths)), prompt_lengths=lengths)


def test_options_reach_every_replica_and_row_columns_go_with_their_rows() -> None:
    got = []

    def noting(*, image_rows, temperature, **share):
        got.append((image_rows.tolist(), share["seeds"].tolist(), temperature))
        return fake_generate(**share)

    prompts, lengths = batch([3, 5, 2], 2)
    seeds = row_seeds(5, len(lengths))
    spread = two_replicas(noting)
    spread(prompts, seeds=seeds, prompt_lengths=lengths, image_rows=torch.arange(len(lengths)) * 10, temperature=0.0)
    for image_rows, row_seed_list, temperature in got:
        assert temperature == 0.0
        assert [seeds.tolist().index(s) * 10 for s in row_seed_list] == image_rows


def test_balance_is_the_busiest_replicas_decoded_tokens_over_the_mean() -> None:
    prompts, lengths = batch([3, 3, 3, 3], 2)  # four equal groups: two each
    spread = two_replicas(fake_generate)
    spread(prompts, seeds=row_seeds(5, len(lengths)), prompt_lengths=lengths)
    assert spread.take_balance() == {BALANCE_METRIC: 1.0}
    assert spread.take_balance() == {}  # taken: starts over
    one_group = batch([3], 2)
    spread(one_group[0], seeds=row_seeds(5, 2), prompt_lengths=one_group[1])  # one group: one replica idle
    assert spread.take_balance() == {BALANCE_METRIC: 2.0}


def test_a_real_model_gives_the_same_tokens_on_one_two_and_three_replicas() -> None:
    m = build_model(ModelConfig(family="qwen3_5"), vocab_size=VOCAB, seed=0)
    with torch.no_grad():  # a louder eos logit: rows end at different steps
        m.lm_head.weight[EOS] *= 25

    def run(prompt_ids, **kwargs):
        return generate(m, prompt_ids, **{"max_new_tokens": 10, "temperature": 1.0, "eos_token_id": EOS,
                                          "pad_token_id": PAD, **kwargs}).columns()

    prompts, lengths = batch([9, 3, 6, 1, 7], 3)
    seeds = row_seeds(5, len(lengths))
    whole = run(prompts, seeds=seeds, prompt_lengths=lengths)
    assert whole["truncated"].any() and (~whole["truncated"]).any(), "rows should end at different steps"
    for num_replicas in (2, 3):
        spread = ReplicaSpread(sequential(lambda **share: run(**share))[0], num_replicas=num_replicas,
                               new_tokens=10, pad_token_id=PAD, record_invariant=lambda _: None)
        out = spread(prompts, seeds=seeds, prompt_lengths=lengths)
        for name in ("input_ids", "attention_mask", "response_mask", "lengths", "truncated", "prompt_lengths"):
            assert torch.equal(out[name], whole[name]), (num_replicas, name)
        torch.testing.assert_close(out["gen_logprobs"], whole["gen_logprobs"], atol=1e-5, rtol=0)
