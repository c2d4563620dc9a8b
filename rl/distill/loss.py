"""The cross-tokenizer distillation loss: projected KL over aligned chunks plus the student's CE.

Per row, chunk c pairs some student positions with some teacher positions (rl/distill/align.py;
the ids given here are already shifted to the logit that predicts each token). With
temperature tau, K_c the `vocab_topk` teacher ids of the chunk:

    student   q_c = mean over its positions of softmax(z_s / tau), projected by W, taken on K_c
              and renormalised over K_c; log(q_c + eps)
    teacher   t_c = log_softmax over K_c of the mean over its positions of log_softmax(z_t / tau)
    kd        = sum over valid chunks of KL(t_c || q_c) / (global valid chunks) * tau**2
    ce        = -sum(mask * log p_s(next token)) / (global valid tokens), mask = token x sample mask
    loss      = kl_weight * kd + ce_weight * ce

A chunk is valid when both its sides are non-empty, the pair is valid (same text, inside the
response) and its row's sample mask is 1: the reference's seed forgot the sample mask here, so
masked rows still reached the loss and every metric (planted as `xtoken_sample_mask_ignored`).
Logits are sliced to the projection's vocabularies, so a padded LM head adds nothing. The divisors
are global counts (all-reduced by the caller), so every value returned is a rank's share of a
global mean and shares add up over ranks; zero valid chunks gives kd = 0.
"""

from __future__ import annotations

import torch

from rl.distill.config import RESPONSES, DistillConfig
from rl.distill.projection import Projection

EPS = 1e-10

__all__ = ["DistillConfig", "RESPONSES", "chunk_mask", "chunk_means", "xtoken_loss"]

def chunk_means(values: torch.Tensor, chunk_ids: torch.Tensor, num_chunks: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of `values` [B, T, V] over each chunk's positions -> ([B, C, V], counts [B, C]).

    `chunk_ids` [B, T] holds a chunk index per position, -1 for none; an empty chunk's mean is 0.
    """
    rows, width = chunk_ids.shape
    inside = chunk_ids >= 0
    slot = (torch.arange(rows, device=chunk_ids.device)[:, None] * num_chunks + chunk_ids)[inside]
    flat = values[inside]
    sums = torch.zeros(rows * num_chunks, values.shape[-1], dtype=values.dtype, device=values.device)
    sums = sums.index_add(0, slot, flat)
    counts = torch.zeros(rows * num_chunks, dtype=values.dtype, device=values.device)
    counts = counts.index_add(0, slot, torch.ones_like(slot, dtype=values.dtype))
    means = sums / counts.clamp(min=1)[:, None]
    return means.view(rows, num_chunks, -1), counts.view(rows, num_chunks)


def _counts(chunk_ids: torch.Tensor, num_chunks: int) -> torch.Tensor:
    """Positions per chunk [B, C] of `chunk_ids` [B, T] (-1 = none)."""
    one_hot = torch.nn.functional.one_hot((chunk_ids + 1).clamp(min=0), num_chunks + 1)
    return one_hot[..., 1:].sum(dim=1)


def chunk_mask(*, student_chunks: torch.Tensor, teacher_chunks: torch.Tensor, chunk_valid: torch.Tensor,
               sample_mask: torch.Tensor, fold_sample_mask: bool = True) -> torch.Tensor:
    """[B, C] float: 1 where a chunk counts (both sides non-empty, pair valid, sample mask 1).

    `fold_sample_mask=False` is the reference's bug (the fault `xtoken_sample_mask_ignored`).
    """
    num_chunks = chunk_valid.shape[1]
    both = (_counts(student_chunks, num_chunks) > 0) & (_counts(teacher_chunks, num_chunks) > 0)
    mask = both.to(torch.float32) * (chunk_valid != 0).to(torch.float32)
    return mask * (sample_mask != 0).to(torch.float32)[:, None] if fold_sample_mask else mask


def _student_ce(logits: torch.Tensor, input_ids: torch.Tensor, token_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token (position t predicts token t+1): log-prob of the next token, top-1 hit; [B, T-1]."""
    logp = torch.log_softmax(logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    nxt = input_ids[:, 1:]
    lp = logp.gather(-1, nxt[..., None]).squeeze(-1)
    hit = (logits[:, :-1].argmax(dim=-1) == nxt).to(lp.dtype)
    return lp, hit


def xtoken_loss(*, student_logits: torch.Tensor, teacher_logits: torch.Tensor, input_ids: torch.Tensor,
                token_mask: torch.Tensor, student_chunks: torch.Tensor, teacher_chunks: torch.Tensor,
                chunk_valid: torch.Tensor, sample_mask: torch.Tensor, projection: Projection, cfg: DistillConfig,
                num_valid_chunks: int, num_tokens: int, fold_sample_mask: bool = True
                ) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one micro-batch (module docstring) and its metrics (shares of global means).

    Args:
        student_logits [B, Ts, >= V_s], teacher_logits [B, Tt, >= V_t]: raw logits; columns past
            the projection's vocabularies (a padded LM head) are dropped.
        input_ids [B, Ts], token_mask [B, Ts]: student tokens and the ones the CE counts.
        student_chunks [B, Ts], teacher_chunks [B, Tt]: chunk id of the token each logit predicts.
        chunk_valid [B, C], sample_mask [B]: pair validity and each row's loss multiplier.
        num_valid_chunks, num_tokens: the global (all ranks) divisors.
    """
    tau, num_chunks = cfg.temperature, chunk_valid.shape[1]
    rows, cols = projection.shape
    dtype = torch.promote_types(student_logits.dtype, torch.float32)  # loss math in at least fp32
    z_s = student_logits[..., :rows].to(dtype) / tau
    z_t = teacher_logits[..., :cols].to(dtype) / tau
    mask_c = chunk_mask(student_chunks=student_chunks, teacher_chunks=teacher_chunks, chunk_valid=chunk_valid,
                        sample_mask=sample_mask, fold_sample_mask=fold_sample_mask).to(z_s)
    p_s, _ = chunk_means(torch.softmax(z_s, dim=-1), student_chunks, num_chunks)
    with torch.no_grad():
        lt, _ = chunk_means(torch.log_softmax(z_t, dim=-1), teacher_chunks, num_chunks)
        top = lt.topk(min(cfg.vocab_topk, cols), dim=-1).indices
        t_logp = torch.log_softmax(lt.gather(-1, top), dim=-1)
    q = projection.apply(p_s.reshape(-1, rows)).view(*p_s.shape[:2], cols).gather(-1, top)
    log_q = torch.log(q / q.sum(dim=-1, keepdim=True).clamp(min=EPS) + EPS)
    kl = (t_logp.exp() * (t_logp - log_q)).sum(dim=-1)
    kd = (mask_c * kl).sum() / max(num_valid_chunks, 1) * tau**2

    lp, hit = _student_ce(student_logits, input_ids, token_mask)
    mask_t = token_mask[:, 1:].to(lp) * sample_mask.to(lp)[:, None]
    ce = -(mask_t * lp).sum() / max(num_tokens, 1)
    loss = cfg.kl_weight * kd + cfg.ce_weight * ce
    with torch.no_grad():
        agree = (q.argmax(dim=-1) == t_logp.argmax(dim=-1)).to(mask_c)
        tensors = {"loss": loss, "kl_loss": kd, "ce_loss": ce,
                   "accuracy": (mask_t * hit).sum() / max(num_tokens, 1),
                   "proj_accuracy": (mask_c * agree).sum() / max(num_valid_chunks, 1),
                   "num_valid_chunks": mask_c.sum(), "num_tokens": mask_t.sum(),
                   "num_valid_samples": (sample_mask != 0).sum()}
        values = torch.stack([t.detach().to(torch.float64) for t in tensors.values()]).tolist()
    return loss, dict(zip(tensors, values))
