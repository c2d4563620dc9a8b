"""One distillation batch: each text tokenized by both sides, aligned, packed into fixed columns.

Off-policy, from a dataset: a row's text is a problem's prompt and its reference answer. The
student's response (answer tokens then eos) is cut at `max_new_tokens`; a cut row lost its eos,
and with `algorithm.overlong_filtering` its loss multiplier is 0, as an overlong generation's is
in GRPO. The teacher tokenizes the same text (the cut response decoded back to text), ending
with its own eos only when the student's row kept one.

Columns (right-padded; chunk ids -1 where none):
    input_ids, attention_mask, response_mask          [B, Ts]  the student's tokens
    teacher_input_ids, teacher_attention_mask         [B, Tt]  the teacher's tokens
    student_chunks [B, Ts], teacher_chunks [B, Tt]    chunk id of the token each logit predicts
    chunk_valid [B, C]                                1 for a same-text pair inside the response

Only response chunks get ids (prompt chunks carry no loss); a chunk is valid when its texts
are equal and all its student tokens are response tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl.distill.align import Chunk, align
from rl.envs.registry import Problem

__all__ = ["DistillBatch", "build_batch"]


@dataclass(kw_only=True)
class Side:
    """A tokenizer and its canonical token texts (`canonical_tokens`)."""

    tokenizer: Any
    texts: list[str]


@dataclass(kw_only=True)
class DistillBatch:
    columns: dict[str, torch.Tensor]
    lengths: list[int]
    teacher_lengths: list[int]
    truncated: torch.Tensor  # [B] bool


@dataclass
class _Row:
    student: list[int]
    prompt_len: int
    teacher: list[int]
    chunks: list[Chunk]
    truncated: bool


def _row(problem: Problem, student: Side, teacher: Side, max_new_tokens: int) -> _Row:
    s_tok, t_tok = student.tokenizer, teacher.tokenizer
    prompt = s_tok.encode(problem.prompt, add_special_tokens=False)
    response = (s_tok.encode(problem.answer, add_special_tokens=False) + [s_tok.eos_token_id])[:max_new_tokens]
    ended = response[-1] == s_tok.eos_token_id
    text = s_tok.decode(response[:-1] if ended else response, clean_up_tokenization_spaces=False)
    t_ids = t_tok.encode(problem.prompt + text, add_special_tokens=False) + ([t_tok.eos_token_id] if ended else [])
    s_ids = prompt + response
    chunks = align([student.texts[i] for i in s_ids], [teacher.texts[i] for i in t_ids])
    in_response = [c for c in chunks if c.s1 > len(prompt)]
    return _Row(s_ids, len(prompt), t_ids, in_response, not ended)


def _shifted(chunk_of_token: list[int]) -> list[int]:
    """Logit p predicts token p + 1: the chunk id moves one position left."""
    return chunk_of_token[1:] + [-1]


def build_batch(problems: list[Problem], *, student: Side, teacher: Side, max_new_tokens: int) -> DistillBatch:
    rows = [_row(p, student, teacher, max_new_tokens) for p in problems]
    ts, tt = max(len(r.student) for r in rows), max(len(r.teacher) for r in rows)
    num_chunks = max(1, max(len(r.chunks) for r in rows))
    b = len(rows)
    cols = {
        "input_ids": torch.full((b, ts), student.tokenizer.pad_token_id, dtype=torch.long),
        "attention_mask": torch.zeros(b, ts, dtype=torch.long),
        "response_mask": torch.zeros(b, ts, dtype=torch.long),
        "teacher_input_ids": torch.full((b, tt), teacher.tokenizer.pad_token_id, dtype=torch.long),
        "teacher_attention_mask": torch.zeros(b, tt, dtype=torch.long),
        "student_chunks": torch.full((b, ts), -1, dtype=torch.long),
        "teacher_chunks": torch.full((b, tt), -1, dtype=torch.long),
        "chunk_valid": torch.zeros(b, num_chunks, dtype=torch.long),
    }
    for i, r in enumerate(rows):
        s_chunk, t_chunk = [-1] * len(r.student), [-1] * len(r.teacher)
        for c, chunk in enumerate(r.chunks):
            s_chunk[chunk.s0:chunk.s1] = [c] * (chunk.s1 - chunk.s0)
            t_chunk[chunk.t0:chunk.t1] = [c] * (chunk.t1 - chunk.t0)
            cols["chunk_valid"][i, c] = int(chunk.is_correct and chunk.s0 >= r.prompt_len)
        cols["input_ids"][i, :len(r.student)] = torch.tensor(r.student)
        cols["attention_mask"][i, :len(r.student)] = 1
        cols["response_mask"][i, r.prompt_len:len(r.student)] = 1
        cols["teacher_input_ids"][i, :len(r.teacher)] = torch.tensor(r.teacher)
        cols["teacher_attention_mask"][i, :len(r.teacher)] = 1
        cols["student_chunks"][i, :len(r.student)] = torch.tensor(_shifted(s_chunk))
        cols["teacher_chunks"][i, :len(r.teacher)] = torch.tensor(_shifted(t_chunk))
    return DistillBatch(columns=cols, lengths=[len(r.student) for r in rows],
                        teacher_lengths=[len(r.teacher) for r in rows],
                        truncated=torch.tensor([r.truncated for r in rows]))
