"""Chunk alignment of two tokenizations against hand-worked pairings."""

from __future__ import annotations

from rl.distill.align import Chunk, _dp, align, canonical_tokens
from rl.tokenizer import load_tokenizer


def test_student_splits_finer_than_teacher():
    # "12+3": the teacher has "12" as one token, the student two.
    assert align(["1", "2", "+", "3"], ["12", "+", "3"]) == [
        Chunk(0, 2, 0, 1, True), Chunk(2, 3, 1, 2, True), Chunk(3, 4, 2, 3, True)]


def test_teacher_splits_finer_than_student():
    assert align(["ab", "c"], ["a", "b", "c"]) == [Chunk(0, 1, 0, 2, True), Chunk(1, 2, 2, 3, True)]


def test_different_text_pairs_one_to_one_as_incorrect():
    # MATCH + MISMATCH (2 - 1) beats two gaps on either side.
    assert align(["a", "b"], ["a", "c"]) == [Chunk(0, 1, 0, 1, True), Chunk(1, 2, 1, 2, False)]


def test_an_extra_token_is_a_gap():
    # a:a (2) + gap x (-1) + b:b (2) = 3 beats a:a + x:b mismatch + gap (0).
    assert align(["a", "x", "b"], ["a", "b"]) == [Chunk(0, 1, 0, 1, True), Chunk(2, 3, 1, 2, True)]


def test_span_longer_than_four_is_not_one_chunk():
    chunks = align(["abcde"], ["a", "b", "c", "d", "e"])
    assert not any(c.s1 - c.s0 == 1 and c.t1 - c.t0 == 5 for c in chunks)


def test_anchored_alignment_equals_the_full_programme():
    student = ["4", "5", "*", "3", "=", "13", "5", "\x00eos\x00"]
    teacher = ["45", "*", "3", "=", "1", "3", "5", "\x00eos\x00"]
    assert align(student, teacher) == _dp(student, teacher, 0, 0) == [
        Chunk(0, 2, 0, 1, True), Chunk(2, 3, 1, 2, True), Chunk(3, 4, 2, 3, True), Chunk(4, 5, 3, 4, True),
        Chunk(5, 6, 4, 6, True), Chunk(6, 7, 6, 7, True), Chunk(7, 8, 7, 8, True)]


def test_shipped_tokenizers_split_differently_and_pair_their_eos():
    bpe, chars = load_tokenizer("arith_bpe"), load_tokenizer("arith")
    s_text, t_text = canonical_tokens(bpe), canonical_tokens(chars)
    s_ids = bpe.encode("12+9=21") + [bpe.eos_token_id]
    t_ids = chars.encode("12+9=21") + [chars.eos_token_id]
    s, t = [s_text[i] for i in s_ids], [t_text[i] for i in t_ids]
    assert s == ["12", "+", "9", "=", "21", "\x00eos\x00"]
    assert t == ["1", "2", "+", "9", "=", "2", "1", "\x00eos\x00"]
    assert bpe.convert_ids_to_tokens(bpe.eos_token_id) != chars.convert_ids_to_tokens(chars.eos_token_id)
    assert align(s, t) == [Chunk(0, 1, 0, 2, True), Chunk(1, 2, 2, 3, True), Chunk(2, 3, 3, 4, True),
                           Chunk(3, 4, 4, 5, True), Chunk(4, 5, 5, 7, True), Chunk(5, 6, 7, 8, True)]
