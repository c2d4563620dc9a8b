"""KVBatchMeta: validation names the bad field; every transform is pure and row-consistent."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from rl.data import KVBatchMeta, make_key


def _meta(n: int = 4, partition: str = "p", prefix: str = "u") -> KVBatchMeta:
    return KVBatchMeta(
        partition_id=partition,
        keys=[make_key(prefix, i) for i in range(n)],
        sequence_lengths=[3 + i for i in range(n)],
        fields=["input_ids"],
        tags=[{"i": i} for i in range(n)],
        extra_info={"step": 7},
    )


def test_make_key_format() -> None:
    assert make_key("abc", 3) == "abc_g3"


def test_post_init_normalizes_to_tuples_and_defaults_tags() -> None:
    meta = KVBatchMeta(partition_id="p", keys=["a", "b"], sequence_lengths=[1, 2])
    assert meta.keys == ("a", "b") and meta.sequence_lengths == (1, 2)
    assert meta.tags == ({}, {}) and meta.fields == () and len(meta) == 2


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"sequence_lengths": [1]}, "sequence_lengths"),
        ({"sequence_lengths": [1, -1]}, "sequence_lengths"),
        ({"sequence_lengths": [1, 2.5]}, "sequence_lengths"),
        ({"tags": [{}]}, "tags"),
        ({"keys": ["a", "a"]}, "unique"),
        ({"partition_id": ""}, "partition_id"),
        ({"fields": ["x", "x"]}, "fields"),
    ],
)
def test_validation_names_the_field(kwargs: dict, needle: str) -> None:
    base = {"partition_id": "p", "keys": ["a", "b"], "sequence_lengths": [1, 2]}
    with pytest.raises(ValueError, match=needle):
        KVBatchMeta(**{**base, **kwargs})


def test_subset_and_slice_keep_rows_aligned() -> None:
    meta = _meta(5)
    sub = meta.subset([4, 0, 2])
    assert sub.keys == ("u_g4", "u_g0", "u_g2")
    assert sub.sequence_lengths == (7, 3, 5)
    assert [t["i"] for t in sub.tags] == [4, 0, 2]
    assert sub.fields == meta.fields and sub.extra_info == {"step": 7}
    assert meta.slice(1, 3).keys == ("u_g1", "u_g2")
    assert meta.slice(-2, 99).keys == ("u_g3", "u_g4")
    with pytest.raises(ValueError, match="out of range"):
        meta.subset([5])
    with pytest.raises(ValueError, match="unique"):
        meta.subset([1, 1])


def test_transforms_do_not_touch_the_original() -> None:
    meta = _meta(3)
    assert meta.with_fields("logprobs", "input_ids").fields == ("input_ids", "logprobs")
    assert meta.fields == ("input_ids",)
    meta.subset([0]).tags[0]["i"] = 99
    assert meta.tags[0]["i"] == 0


def with_extra(meta: KVBatchMeta, **values: Any) -> KVBatchMeta:
    """`meta` with `extra_info` updated (the driver stamps it when it builds a batch)."""
    return KVBatchMeta(partition_id=meta.partition_id, keys=list(meta.keys),
                       sequence_lengths=list(meta.sequence_lengths), fields=list(meta.fields),
                       tags=[dict(t) for t in meta.tags], extra_info={**meta.extra_info, **values})


def test_concat_same_partition_only() -> None:
    a, b = _meta(2, prefix="a"), _meta(3, prefix="b").with_fields("logprobs")
    both = KVBatchMeta.concat(a, b)
    assert both.keys == a.keys + b.keys
    assert both.sequence_lengths == a.sequence_lengths + b.sequence_lengths
    assert both.fields == ("input_ids",)  # only fields every row has
    assert KVBatchMeta.concat([a, b]) == both
    with pytest.raises(ValueError, match="different partitions"):
        KVBatchMeta.concat(a, _meta(2, partition="q", prefix="c"))
    with pytest.raises(ValueError, match="unique"):
        KVBatchMeta.concat(a, a)
    with pytest.raises(ValueError, match=r"extra_info\['step'\]"):
        KVBatchMeta.concat(a, with_extra(b, step=8))


def test_row_aligned_extra_info_is_dropped_by_row_transforms() -> None:
    meta = with_extra(_meta(4), _dp_original_indices=(3, 2, 1, 0))
    assert "_dp_original_indices" not in meta.subset([0, 1]).extra_info
    assert "_dp_original_indices" not in KVBatchMeta.concat(meta.slice(0, 2)).extra_info
    assert meta.subset([0]).extra_info == {"step": 7}


def test_pickles_for_ray() -> None:
    meta = _meta(3)
    assert pickle.loads(pickle.dumps(meta)) == meta


# --- validate once: transforms skip the per-row re-checks, so prove they need none ----------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _rebuilt(meta: KVBatchMeta) -> KVBatchMeta:
    """The same parts through the validating constructor (raises if any part is invalid)."""
    return KVBatchMeta(partition_id=meta.partition_id, keys=list(meta.keys),
                       sequence_lengths=list(meta.sequence_lengths), fields=list(meta.fields),
                       tags=[dict(t) for t in meta.tags], extra_info=dict(meta.extra_info))


@st.composite
def transformed(draw: st.DrawFn) -> tuple[KVBatchMeta, KVBatchMeta]:
    n = draw(st.integers(1, 12))
    meta = with_extra(_meta(n), _dp_original_indices=tuple(range(n)))
    op = draw(st.sampled_from(["subset", "slice", "concat", "fields"]))
    if op == "subset":
        picked = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
        negate = draw(st.lists(st.booleans(), min_size=len(picked), max_size=len(picked)))
        out = meta.subset([i - n if neg else i for i, neg in zip(picked, negate, strict=True)])
    elif op == "slice":
        out = meta.slice(draw(st.integers(-n - 2, n + 2)), draw(st.integers(-n - 2, n + 2)))
    elif op == "concat":
        cut = draw(st.integers(0, n))
        out = KVBatchMeta.concat(meta.slice(cut, n), meta.slice(0, cut))
    else:
        out = meta.with_fields(*draw(st.lists(st.sampled_from(["input_ids", "lp", "adv"]))))
    return meta, out


@settings(max_examples=200, deadline=None)
@given(transformed())
def test_every_transform_builds_what_the_constructor_accepts(case: tuple) -> None:
    meta, out = case
    assert _rebuilt(out) == out  # every constructor check passes and nothing is lost
    assert all(isinstance(n, int) for n in out.sequence_lengths)
    assert isinstance(out.keys, tuple) and isinstance(out.tags, tuple)
    parent_tags = {id(t) for t in meta.tags}
    assert not any(id(t) in parent_tags for t in out.tags)  # no shared mutable state
    assert out.extra_info is not meta.extra_info


def test_subset_refuses_an_index_given_twice_through_a_negative_alias() -> None:
    with pytest.raises(ValueError, match=r"unique; duplicated: \['u_g1'\]"):
        _meta(5).subset([1, -4])
    with pytest.raises(ValueError, match="index -6 out of range for 5 rows"):
        _meta(5).subset([0, -6])


def test_with_fields_refuses_a_name_that_is_not_a_str() -> None:
    with pytest.raises(ValueError, match="fields must be unique str names"):
        _meta(2).with_fields("lp", 3)  # type: ignore[arg-type]


def test_concat_names_the_repeated_keys() -> None:
    a = _meta(3)
    with pytest.raises(ValueError, match=r"duplicated: \['u_g1', 'u_g2'\]"):
        KVBatchMeta.concat(a, a.slice(1, 3))
