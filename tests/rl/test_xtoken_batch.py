"""A distillation batch by hand: both tokenizations, shifted chunk ids, validity, truncation."""

from __future__ import annotations

import pytest

from rl.distill.align import canonical_tokens
from rl.distill.batch import Side, build_batch
from rl.envs.registry import Problem
from rl.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def sides():
    bpe, chars = load_tokenizer("arith_bpe"), load_tokenizer("arith")
    return Side(tokenizer=bpe, texts=canonical_tokens(bpe)), Side(tokenizer=chars, texts=canonical_tokens(chars))


def test_chunk_ids_sit_on_the_logit_that_predicts_each_token(sides):
    student, teacher = sides
    batch = build_batch([Problem(prompt="12+9=", answer="21")], student=student, teacher=teacher, max_new_tokens=4)
    cols = batch.columns
    # student: 12 + 9 = | 21 <eos>; teacher: 1 2 + 9 = | 2 1 <eos>
    assert batch.lengths == [6] and batch.teacher_lengths == [8] and not batch.truncated[0]
    assert cols["response_mask"][0].tolist() == [0, 0, 0, 0, 1, 1]
    # chunk 0 = "21" (student token 4, teacher tokens 5-6), chunk 1 = eos; each id moves one left
    assert cols["student_chunks"][0].tolist() == [-1, -1, -1, 0, 1, -1]
    assert cols["teacher_chunks"][0].tolist() == [-1, -1, -1, -1, 0, 0, 1, -1]
    assert cols["chunk_valid"][0].tolist() == [1, 1]
    assert cols["teacher_input_ids"][0, -1].item() == teacher.tokenizer.eos_token_id


def test_a_cut_response_loses_its_eos_on_both_sides(sides):
    student, teacher = sides
    batch = build_batch([Problem(prompt="99+99=", answer="198"), Problem(prompt="1+2=", answer="3")],
                        student=student, teacher=teacher, max_new_tokens=2)
    assert batch.truncated.tolist() == [True, False]  # "198" is two student tokens, then no room for eos
    cut = batch.columns["teacher_input_ids"][0, :batch.teacher_lengths[0]].tolist()
    response = batch.columns["input_ids"][0][batch.columns["response_mask"][0].bool()].tolist()
    assert len(response) == 2 and student.tokenizer.eos_token_id not in response
    assert teacher.tokenizer.eos_token_id not in cut
    assert teacher.tokenizer.decode(cut) == "99+99=" + student.tokenizer.decode(response) == "99+99=198"
    # rows are right-padded to the batch's widths; padding has no chunk
    assert batch.columns["student_chunks"][1, batch.lengths[1]:].eq(-1).all()
