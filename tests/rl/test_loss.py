"""ClippedPG loss against hand-computed values on 2x2 batches, plus the DP-split identity."""

import math

import pytest
import torch

from rl.algorithms.kl import gen_kl_error, k1, k2, k3, masked_mean, ref_kl, token_mult_prob_error
from rl.algorithms.loss import LossConfig, clipped_pg_loss
from rl.config import parse_config

LN2 = math.log(2.0)

# ratios r = exp(curr - prev) with prev = 0: row 0 [1.5, 0.9], row 1 [0.5, 1.1].
RATIOS = torch.tensor([[1.5, 0.9], [0.5, 1.1]], dtype=torch.float64)
ADV = torch.tensor([1.0, -2.0], dtype=torch.float64)
ONES = torch.ones(2, 2, dtype=torch.float64)


def _loss(cfg, *, gen=None, ref=None, token_mask=ONES, sample_mask=None, num_tokens=None):
    curr = RATIOS.log().clone().requires_grad_(True)
    prev = torch.zeros(2, 2, dtype=torch.float64)
    loss, metrics = clipped_pg_loss(
        curr_logprobs=curr,
        prev_logprobs=prev,
        gen_logprobs=prev if gen is None else gen,
        ref_logprobs=ref,
        advantages=ADV,
        token_mask=token_mask,
        sample_mask=torch.ones(2, dtype=torch.float64) if sample_mask is None else sample_mask,
        cfg=cfg,
        num_tokens=num_tokens,
    )
    loss.backward()
    return loss, metrics, curr.grad


def test_clipped_loss_hand_computed():
    loss, m, grad = _loss(LossConfig(clip_low=0.2, clip_high=0.2))
    # Row 0, A = 1:  r=1.5 -> max(-1.5, -1.2) = -1.2 (clipped); r=0.9 -> max(-0.9, -0.9) = -0.9.
    # Row 1, A = -2: r=0.5 -> max(1.0, 1.6) = 1.6 (clipped);  r=1.1 -> max(2.2, 2.2) = 2.2.
    # Mean over 4 tokens: (-1.2 - 0.9 + 1.6 + 2.2) / 4 = 0.425.
    assert loss.item() == pytest.approx(0.425)
    assert m["loss"] == pytest.approx(0.425) and m["pg_loss"] == pytest.approx(0.425)
    assert m["clip_fraction"] == pytest.approx(0.5)
    # d/dcurr of -A*r is -A*r on unclipped tokens, 0 on clipped ones; divided by N = 4.
    assert grad.flatten().tolist() == pytest.approx([0.0, -0.9 / 4, 0.0, 2.2 / 4])
    # approx KL = mean (r - 1 - ln r).
    expect = sum(r - 1 - math.log(r) for r in [1.5, 0.9, 0.5, 1.1]) / 4
    assert m["approx_kl"] == pytest.approx(expect)
    assert m["ratio_mean"] == pytest.approx((1.5 + 0.9 + 0.5 + 1.1) / 4)
    assert m["is_weight_mean"] == 1.0 and m["token_mult_prob_error"] == 1.0
    assert m["gen_kl_error"] == 0.0 and m["kl_penalty"] == 0.0
    assert m["num_tokens"] == 4 and m["num_valid_samples"] == 2


def test_asymmetric_clip():
    loss, m, _ = _loss(LossConfig(clip_low=0.6, clip_high=0.2))
    # Row 1 token 0 now stays inside [0.4, 1.2]: 2 * 0.5 = 1.0 instead of 1.6.
    assert loss.item() == pytest.approx((-1.2 - 0.9 + 1.0 + 2.2) / 4)
    assert m["clip_fraction"] == pytest.approx(0.25)


# IS weights w = exp(prev - gen) = [[2, 0.5], [1, 4]], so gen = -ln w.
W = torch.tensor([[2.0, 0.5], [1.0, 4.0]], dtype=torch.float64)
GEN = -W.log()
PG = [[-1.2, -0.9], [1.6, 2.2]]  # the per-token clipped terms computed above


@pytest.mark.parametrize(
    ("cfg", "weights", "truncated"),
    [
        (LossConfig(is_correction=False), [[1, 1], [1, 1]], 0.0),
        (LossConfig(is_correction=True), [[2, 0.5], [1, 4]], 0.0),
        # tis clamps to [0, 2]: the 4 becomes 2.
        (LossConfig(truncation="tis", tis_cap=2.0), [[2, 0.5], [1, 2]], 0.25),
        # icepop zeroes weights outside [0.5, 2]: the 4 becomes 0 (bounds are inclusive).
        (LossConfig(truncation="icepop", icepop_low=0.5, icepop_high=2.0), [[2, 0.5], [1, 0]], 0.25),
        (LossConfig(truncation="icepop", icepop_low=0.6, icepop_high=3.0), [[2, 0], [1, 0]], 0.5),
    ],
)
def test_importance_weights_and_truncation(cfg, weights, truncated):
    loss, m, _ = _loss(cfg, gen=GEN)
    expect = sum(weights[b][t] * PG[b][t] for b in range(2) for t in range(2)) / 4
    assert loss.item() == pytest.approx(expect)
    assert m["is_truncated_fraction"] == pytest.approx(truncated)
    # The mismatch metrics do not depend on the correction settings.
    # exp(|gen - prev|) = max(w, 1/w): (2 + 2 + 1 + 4) / 4.
    assert m["token_mult_prob_error"] == pytest.approx(9 / 4)
    # k3(gen, prev) = w - 1 - ln w per token.
    k3_sum = (1 - LN2) + (-0.5 + LN2) + 0.0 + (3 - 2 * LN2)
    assert m["gen_kl_error"] == pytest.approx(k3_sum / 4)


def test_reference_kl_penalty_value_and_gradient():
    ref = RATIOS.log() + LN2  # ref - curr = ln 2 on every token
    loss, m, grad = _loss(LossConfig(kl_beta=0.1), ref=ref)
    # k3 = exp(ln 2) - 1 - ln 2 = 1 - ln 2 per token; d k3 / d curr = 1 - exp(ref - curr) = -1.
    assert m["kl_penalty"] == pytest.approx(1 - LN2)
    assert loss.item() == pytest.approx(0.425 + 0.1 * (1 - LN2))
    assert grad.flatten().tolist() == pytest.approx(
        [0.1 * -1 / 4, (-0.9 + 0.1 * -1) / 4, 0.1 * -1 / 4, (2.2 + 0.1 * -1) / 4]
    )


def test_kl_beta_needs_reference_logprobs():
    with pytest.raises(ValueError, match="kl_beta"):
        _loss(LossConfig(kl_beta=0.1))


def test_overlong_sample_mask_zero_drops_the_row():
    loss, m, grad = _loss(LossConfig(), sample_mask=torch.tensor([1.0, 0.0], dtype=torch.float64))
    # Only row 0 counts, N = 2: (-1.2 - 0.9) / 2.
    assert loss.item() == pytest.approx(-1.05)
    assert grad[1].tolist() == [0.0, 0.0]
    assert grad[0].tolist() == pytest.approx([0.0, -0.9 / 2])
    assert m["num_tokens"] == 2 and m["num_valid_samples"] == 1


def test_masked_tokens_with_infinite_logprobs_do_not_leak():
    gen = GEN.clone()
    gen[1, 1] = -math.inf
    ref = RATIOS.log().clone()
    ref[1, 1] = math.nan
    token_mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    loss, m, grad = _loss(LossConfig(kl_beta=0.5), gen=gen, ref=ref, token_mask=token_mask)
    # Tokens (0,0), (0,1), (1,0) with weights 2, 0.5, 1; ref == curr there so KL is 0.
    assert loss.item() == pytest.approx((2 * -1.2 + 0.5 * -0.9 + 1.6) / 3)
    assert torch.isfinite(grad).all() and grad[1, 1] == 0
    assert all(math.isfinite(v) for v in m.values())


def test_dp_split_with_global_token_count_sums_to_full_batch():
    g = torch.Generator().manual_seed(0)
    b, t = 6, 5
    curr = (-torch.rand(b, t, generator=g, dtype=torch.float64)).requires_grad_(True)
    prev = curr.detach() + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)
    gen = prev + 0.2 * torch.randn(b, t, generator=g, dtype=torch.float64)
    ref = prev + 0.1 * torch.randn(b, t, generator=g, dtype=torch.float64)
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    token_mask = (torch.rand(b, t, generator=g) > 0.3).double()
    sample_mask = torch.tensor([1, 1, 0, 1, 1, 1], dtype=torch.float64)
    cfg = LossConfig(kl_beta=0.05, truncation="tis", tis_cap=1.5)

    def run(rows, num_tokens=None):
        return clipped_pg_loss(
            curr_logprobs=curr[rows], prev_logprobs=prev[rows], gen_logprobs=gen[rows],
            ref_logprobs=ref[rows], advantages=adv[rows], token_mask=token_mask[rows],
            sample_mask=sample_mask[rows], cfg=cfg, num_tokens=num_tokens,
        )

    full, full_m = run(slice(0, b))
    (full_grad,) = torch.autograd.grad(full, curr)
    global_tokens = int((token_mask * sample_mask[:, None]).sum())
    parts = [run(slice(0, 3), global_tokens), run(slice(3, b), global_tokens)]
    total = parts[0][0] + parts[1][0]
    (split_grad,) = torch.autograd.grad(total, curr)
    assert total.item() == pytest.approx(full.item(), rel=1e-12)
    assert torch.allclose(split_grad, full_grad, rtol=1e-12, atol=1e-15)
    for key in full_m:
        assert parts[0][1][key] + parts[1][1][key] == pytest.approx(full_m[key], rel=1e-9), key
    # Without the global count each half averages over its own tokens: not the same loss.
    local = run(slice(0, 3))[0] + run(slice(3, b))[0]
    assert local.item() != pytest.approx(full.item(), rel=1e-6)


def test_loss_config_validation_names_the_field():
    with pytest.raises(ValueError, match="truncation: .clip. is not one of"):
        LossConfig(truncation="clip")
    with pytest.raises(ValueError, match="is_correction"):
        LossConfig(truncation="tis", is_correction=False)
    with pytest.raises(ValueError, match="icepop_low"):
        LossConfig(icepop_low=2.0, icepop_high=1.0)
    with pytest.raises(ValueError, match="clip_low"):
        LossConfig(clip_low=1.0)
    with pytest.raises(ValueError, match=r"unknown recipe key 'algorithm\.loss\.beta'"):
        parse_config({"name": "t", "algorithm": {"loss": {"beta": 0.1}}})
    recipe = parse_config({"name": "t", "algorithm": {"loss": {"kl_beta": 0.1, "truncation": "icepop"}}})
    assert recipe.algorithm.loss.kl_beta == 0.1


def test_kl_estimators_hand_computed():
    p = torch.tensor([0.0])
    q = torch.tensor([LN2])  # log ratio q - p = ln 2
    assert k1(p, q).item() == pytest.approx(-LN2)
    assert k2(p, q).item() == pytest.approx(LN2**2 / 2)
    assert k3(p, q).item() == pytest.approx(2 - 1 - LN2)
    mask = torch.tensor([[1.0, 0.0]])
    gen = torch.tensor([[-LN2, 5.0]])
    prev = torch.tensor([[0.0, 0.0]])
    # Only the first token counts: exp(|-ln2|) = 2; k3(gen, prev) = 2 - 1 - ln 2.
    assert token_mult_prob_error(gen, prev, mask).item() == pytest.approx(2.0)
    assert gen_kl_error(gen, prev, mask).item() == pytest.approx(1 - LN2)
    assert gen_kl_error(gen, prev, mask, num_tokens=4).item() == pytest.approx((1 - LN2) / 4)
    # ref_kl(p = policy, q = reference): exp(-ln 2) - 1 + ln 2 on the one token in the mask
    assert ref_kl(prev, gen, mask).item() == pytest.approx(LN2 - 0.5)
    assert ref_kl(prev, gen, mask, num_tokens=4).item() == pytest.approx((LN2 - 0.5) / 4)
    assert masked_mean(torch.tensor([3.0]), torch.tensor([0.0])).item() == 0.0


def test_bf16_policy_logprobs_give_fp32_loss_and_bf16_grad():
    curr = RATIOS.log().to(torch.bfloat16).requires_grad_(True)
    prev = torch.zeros(2, 2, dtype=torch.bfloat16)
    loss, m = clipped_pg_loss(
        curr_logprobs=curr, prev_logprobs=prev, gen_logprobs=prev, ref_logprobs=None,
        advantages=ADV, token_mask=ONES, sample_mask=torch.ones(2), cfg=LossConfig(),
    )
    loss.backward()
    assert loss.dtype == torch.float32 and curr.grad.dtype == torch.bfloat16
    assert m["loss"] == pytest.approx(0.425, abs=1e-2)


def test_the_reference_pass_runs_only_for_a_kl_term():
    from rl.algorithms.loss import needs_reference
    from rl.backends.train_step import TRAIN_FIELDS, train_fields

    assert not needs_reference(LossConfig(kl_beta=0.0)) and needs_reference(LossConfig(kl_beta=0.01))
    assert train_fields(LossConfig(kl_beta=0.01)) == TRAIN_FIELDS
    assert train_fields(LossConfig(kl_beta=0.0)) == tuple(f for f in TRAIN_FIELDS if f != "ref_logprobs")
