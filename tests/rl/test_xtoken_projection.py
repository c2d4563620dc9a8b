"""The teacher-to-student projection against hand-computed rows, and its configured shape."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from rl.distill.projection import Projection, build_projection, vocab_size
from rl.tokenizer import load_tokenizer


def dense(proj: Projection) -> torch.Tensor:
    """W as a dense [V_student, V_teacher] matrix, to check the sparse one against."""
    return torch.zeros(proj.shape, dtype=proj.weights.dtype).scatter_add_(1, proj.indices, proj.weights)


def _fast(model: models.Model, eos: str, pad: str) -> PreTrainedTokenizerFast:
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=pad)


@pytest.fixture(scope="module")
def pair():
    # student: whole words; teacher: BPE over a, b, c with the one merge "ab".
    student = _fast(models.WordLevel({"<pad>": 0, "<eos>": 1, "a": 2, "abc": 3, "ca": 4, "cab": 5},
                                     unk_token="<pad>"), "<eos>", "<pad>")
    teacher = _fast(models.BPE({"[pad]": 0, "</s>": 1, "a": 2, "b": 3, "c": 4, "ab": 5}, [("a", "b")]),
                    "</s>", "[pad]")
    return student, teacher


def test_rows_by_hand(pair):
    student, teacher = pair
    w = dense(build_projection(student, teacher, topk=4))
    assert w.shape == (6, 6)
    assert w[0].tolist() == [1, 0, 0, 0, 0, 0]        # pad -> pad (same role, other name)
    assert w[1].tolist() == [0, 1, 0, 0, 0, 0]        # <eos> -> </s>
    assert w[2].tolist() == [0, 0, 1, 0, 0, 0]        # "a" has a twin: pinned to 1
    # "abc" -> pieces ab, c: 0.9 and 0.09, normalised 0.909 / 0.091
    assert w[3].tolist() == pytest.approx([0, 0, 0, 0, 0.09 / 0.99, 0.9 / 0.99])
    # "ca" -> c, a
    assert w[4].tolist() == pytest.approx([0, 0, 0.09 / 0.99, 0, 0.9 / 0.99, 0])
    # "cab" -> c, ab: 0.9, 0.09
    assert w[5].tolist() == pytest.approx([0, 0, 0, 0, 0.9 / 0.99, 0.09 / 0.99])
    assert w.sum(dim=1).tolist() == pytest.approx([1.0] * 6)


def test_top_k_keeps_the_largest_and_renormalises(pair):
    student, teacher = pair
    w = dense(build_projection(student, teacher, topk=1))
    assert w[3].tolist() == [0, 0, 0, 0, 0, 1.0]      # "abc": only "ab" kept
    assert w[4].tolist() == [0, 0, 0, 0, 1.0, 0]      # "ca": only "c"


def test_apply_is_the_dense_product(pair):
    student, teacher = pair
    proj = build_projection(student, teacher, topk=4)
    probs = torch.softmax(torch.randn(3, 6, generator=torch.Generator().manual_seed(0)), dim=-1)
    assert torch.allclose(proj.apply(probs), probs @ dense(proj))


def test_shape_is_the_configured_vocabularies_not_the_ids_seen():
    student, teacher = load_tokenizer("arith_bpe"), load_tokenizer("arith")
    proj = build_projection(student, teacher, topk=4)
    assert proj.shape == (vocab_size(student), vocab_size(teacher)) == (128, 52)
    # the planted fault's projection: cut to the largest ids of a batch
    assert proj.cropped(20, 14).shape == (20, 14)
    twelve = student.convert_tokens_to_ids("12")
    one, two = teacher.convert_tokens_to_ids("1"), teacher.convert_tokens_to_ids("2")
    row = dense(proj)[twelve]
    assert row[one].item() == pytest.approx(0.9 / 0.99) and row[two].item() == pytest.approx(0.09 / 0.99)
