"""The cross-tokenizer loss against hand-computed values: KL, chunk averaging, CE, masks, padding."""

from __future__ import annotations

import math

import pytest
import torch

from rl.distill.loss import DistillConfig, chunk_mask, chunk_means, xtoken_loss
from rl.distill.projection import Projection

IDENTITY = Projection(indices=torch.arange(2)[:, None], weights=torch.ones(2, 1), num_teacher=2)


def _probs_logits(p: list[float]) -> list[float]:
    return [math.log(x) for x in p]


def _loss(student, teacher, s_chunks, t_chunks, *, valid=None, sample_mask=None, ids=None, token_mask=None,
          cfg=DistillConfig(vocab_topk=2), projection=IDENTITY, fold=True, counts=None):
    s = torch.tensor(student, dtype=torch.float64, requires_grad=True)
    t = torch.tensor(teacher, dtype=torch.float64)
    rows = s.shape[0]
    s_chunks, t_chunks = torch.tensor(s_chunks), torch.tensor(t_chunks)
    valid = torch.ones(rows, 1) if valid is None else torch.tensor(valid)
    sample_mask = torch.ones(rows) if sample_mask is None else torch.tensor(sample_mask)
    ids = torch.zeros(s.shape[:2], dtype=torch.long) if ids is None else torch.tensor(ids)
    token_mask = torch.zeros(s.shape[:2]) if token_mask is None else torch.tensor(token_mask)
    mask = chunk_mask(student_chunks=s_chunks, teacher_chunks=t_chunks, chunk_valid=valid,
                      sample_mask=sample_mask, fold_sample_mask=fold)
    n_chunks, n_tokens = counts or (int(mask.sum()), int((token_mask[:, 1:] * sample_mask[:, None]).sum()))
    loss, metrics = xtoken_loss(student_logits=s, teacher_logits=t, input_ids=ids, token_mask=token_mask,
                                student_chunks=s_chunks, teacher_chunks=t_chunks, chunk_valid=valid,
                                sample_mask=sample_mask, projection=projection, cfg=cfg,
                                num_valid_chunks=n_chunks, num_tokens=n_tokens, fold_sample_mask=fold)
    loss.backward()
    return loss, metrics, s.grad


def test_one_chunk_kl_by_hand():
    # student [.5, .5], teacher [.75, .25]: KL = .75 ln(.75/.5) + .25 ln(.25/.5)
    loss, m, _ = _loss([[[0.0, 0.0]]], [[_probs_logits([0.75, 0.25])]], [[0]], [[0]])
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert loss.item() == pytest.approx(expected, abs=1e-9) and m["kl_loss"] == pytest.approx(expected, abs=1e-9)
    assert m["num_valid_chunks"] == 1 and m["proj_accuracy"] == 1.0


def test_chunk_averages_student_probs_and_teacher_logprobs():
    # student positions [.8,.2] and [.4,.6] average to [.6,.4];
    # teacher log-probs of [.9,.1] and [.5,.5] average, then renormalise over K.
    student = [[_probs_logits([0.8, 0.2]), _probs_logits([0.4, 0.6])]]
    teacher = [[_probs_logits([0.9, 0.1]), _probs_logits([0.5, 0.5])]]
    loss, m, _ = _loss(student, teacher, [[0, 0]], [[0, 0]])
    a, b = (math.log(0.9) + math.log(0.5)) / 2, (math.log(0.1) + math.log(0.5)) / 2
    z = math.log(math.exp(a) + math.exp(b))
    pt = [math.exp(a - z), math.exp(b - z)]
    expected = pt[0] * math.log(pt[0] / 0.6) + pt[1] * math.log(pt[1] / 0.4)
    assert loss.item() == pytest.approx(expected, abs=1e-9)
    means, counts = chunk_means(torch.tensor([[[1.0], [3.0], [5.0]]]), torch.tensor([[0, 0, -1]]), 2)
    assert means.view(-1).tolist() == [2.0, 0.0] and counts.view(-1).tolist() == [2.0, 0.0]


def test_temperature_scales_logits_and_multiplies_by_tau_squared():
    cfg = DistillConfig(vocab_topk=2, temperature=2.0)
    loss, _, _ = _loss([[[0.0, 0.0]]], [[[2 * math.log(3.0), 0.0]]], [[0]], [[0]], cfg=cfg)
    expected = 4 * (0.75 * math.log(1.5) + 0.25 * math.log(0.5))  # teacher / 2 = [ln 3, 0]
    assert loss.item() == pytest.approx(expected, abs=1e-9)


def test_student_ce_and_accuracy_by_hand():
    # position 0 predicts token 1 (id 0): p = .8 -> CE = -ln .8, top-1 right.
    cfg = DistillConfig(vocab_topk=2, kl_weight=0.0, ce_weight=1.0)
    loss, m, _ = _loss([[_probs_logits([0.8, 0.2]), [0.0, 0.0]]], [[[0.0, 0.0], [0.0, 0.0]]], [[-1, -1]], [[-1, -1]],
                       ids=[[1, 0]], token_mask=[[0.0, 1.0]], cfg=cfg)
    assert loss.item() == pytest.approx(-math.log(0.8)) and m["ce_loss"] == pytest.approx(-math.log(0.8))
    assert m["accuracy"] == 1.0 and m["kl_loss"] == 0.0 and m["num_valid_chunks"] == 0


def test_masked_sample_changes_nothing():
    good = [_probs_logits([0.7, 0.3]), [0.0, 0.0]]
    kwargs = dict(s_chunks=[[0, -1], [0, -1]], t_chunks=[[0, -1], [0, -1]], valid=[[1.0], [1.0]],
                  sample_mask=[1.0, 0.0], ids=[[0, 1], [0, 0]], token_mask=[[0.0, 1.0], [0.0, 1.0]],
                  cfg=DistillConfig(vocab_topk=2, ce_weight=0.5))
    teacher = [[_probs_logits([0.2, 0.8]), [0.0, 0.0]], [[5.0, -5.0], [1.0, 2.0]]]
    a = _loss([good, [[9.0, -9.0], [3.0, 1.0]]], teacher, **kwargs)
    b = _loss([good, [[-4.0, 4.0], [0.0, 7.0]]], [teacher[0], [[-3.0, 3.0], [0.0, 0.0]]], **kwargs)
    assert a[0].item() == b[0].item() and a[1] == b[1]
    assert torch.equal(a[2][0], b[2][0]) and a[2][1].abs().sum() == 0
    alone = _loss([good], [teacher[0]], [[0, -1]], [[0, -1]], ids=[[0, 1]], token_mask=[[0.0, 1.0]],
                  cfg=DistillConfig(vocab_topk=2, ce_weight=0.5))
    assert a[0].item() == pytest.approx(alone[0].item(), abs=1e-12) and a[1]["num_valid_chunks"] == 1
    # the reference's bug (the fault xtoken_sample_mask_ignored): the masked row counts again
    broken = _loss([good, [[9.0, -9.0], [3.0, 1.0]]], teacher, **kwargs, fold=False)
    assert broken[1]["num_valid_chunks"] == 2 and broken[0].item() != a[0].item()


def test_invalid_or_one_sided_chunks_do_not_count():
    loss, m, _ = _loss([[[0.0, 1.0]]], [[[1.0, 0.0]]], [[0]], [[0]], valid=[[0.0]])
    assert loss.item() == 0.0 and m["num_valid_chunks"] == 0
    mask = chunk_mask(student_chunks=torch.tensor([[0, -1]]), teacher_chunks=torch.tensor([[1, -1]]),
                      chunk_valid=torch.ones(1, 2), sample_mask=torch.ones(1))
    assert mask.tolist() == [[0.0, 0.0]]


def test_padded_teacher_head_is_sliced_to_the_tokenizer_vocab():
    base = _loss([[[0.0, 0.0]]], [[_probs_logits([0.75, 0.25])]], [[0]], [[0]])
    padded = _loss([[[0.0, 0.0]]], [[[*_probs_logits([0.75, 0.25]), 50.0, 50.0]]], [[0]], [[0]])
    assert padded[0].item() == base[0].item()


def test_rank_shares_add_up_to_the_global_loss():
    student = [[_probs_logits([0.8, 0.2])], [_probs_logits([0.3, 0.7])]]
    teacher = [[_probs_logits([0.6, 0.4])], [_probs_logits([0.1, 0.9])]]
    whole = _loss(student, teacher, [[0], [0]], [[0], [0]], valid=[[1.0], [1.0]])
    halves = [_loss([student[i]], [teacher[i]], [[0]], [[0]], counts=(2, 0)) for i in range(2)]
    assert whole[0].item() == pytest.approx(halves[0][0].item() + halves[1][0].item(), abs=1e-12)
