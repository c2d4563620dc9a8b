"""The split-K decode attention equals plain masked attention, and the decoder samples the same with it.

Against an fp32 reference (softmax over the live keys, each query head against its key/value
head i // G): mixed live lengths, left padding (holes at the start of a row), rows whose live
length is shorter than one split, several splits, groups of 1, 4 and 8 query heads, head sizes
64/128/256, fp32/bf16/fp16 inputs. Dead cache columns hold NaN, so a kernel that let a masked key
into its sum would fail. Needs Triton: it runs on a GPU, or on the CPU under TRITON_INTERPRET=1;
elsewhere (CI) it skips.
"""

from __future__ import annotations

import copy

import pytest
import torch
from decode_models import static_sample, text_model

from rl.generation.decode_attention import (
    FLASH_DECODE,
    flash_decode_attention,
    grouped_decode_attention,
    launch_by_batch,
)
from rl.generation.decode_attention import use_grouped_decode_attention as use_grouped
from rl.generation.flash_decode import (
    BLOCK_N,
    FEW_PROGRAMS,
    LAUNCH,
    Launch,
    flash_decode,
    launch_flash_decode,
    launch_for,
    num_splits,
)


@pytest.fixture
def device(triton_device: str) -> str:
    return triton_device


def _reference(q, k, v, mask, scale):
    groups = q.shape[1] // k.shape[1]
    k, v = k.float().repeat_interleave(groups, 1), v.float().repeat_interleave(groups, 1)
    live = mask[..., : k.shape[2]] if mask is not None else torch.ones(1, 1, 1, k.shape[2], dtype=torch.bool,
                                                                                 device=k.device)
    k, v = torch.where(live.transpose(-1, -2), k, 0.0), torch.where(live.transpose(-1, -2), v, 0.0)  # NaN-free
    scores = (q.float() @ k.transpose(-1, -2) * scale).masked_fill(~live, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2)


def _case(rows: int, kv_heads: int, groups: int, length: int, dim: int, dtype, device, live: list[tuple[int, int]]):
    """q [rows, Hq, 1, D], the cache [rows, Hkv, length, D] with NaN in every dead column, row r
    live on columns live[r] = (first, end): left padding before `first`, unwritten after `end`."""
    g = torch.Generator().manual_seed(rows * 100 + groups * 10 + dim)
    q = torch.randn(rows, kv_heads * groups, 1, dim, generator=g)
    k, v = (torch.randn(rows, kv_heads, length, dim, generator=g) for _ in range(2))
    cols = torch.arange(length)
    mask = torch.stack([(cols >= a) & (cols < b) for a, b in live]).view(rows, 1, 1, length)
    k, v = (torch.where(mask.transpose(-1, -2), x, float("nan")) for x in (k, v))
    return (x.to(device, dtype) for x in (q, k, v)), mask.to(device)


TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 3e-2, torch.float16: 4e-3}


@pytest.mark.parametrize("groups", [1, 4, 8])
@pytest.mark.parametrize("dim", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_equals_masked_attention_over_the_live_keys(device: str, groups: int, dim: int, dtype) -> None:
    length = 5 * BLOCK_N + 17  # a partial last block
    live = [(0, length), (40, 300), (0, 9), (200, 203), (130, 131)]  # full; holes; shorter than a block; one key
    (q, k, v), mask = _case(len(live), 2, groups, length, dim, dtype, device, live)
    assert num_splits(len(live) * 2, length, 132) > 1
    got = flash_decode(q, k, v, mask, dim ** -0.5)
    assert got.shape == (len(live), 1, 2 * groups, dim) and got.dtype == dtype
    want = _reference(q, k, v, mask, dim ** -0.5)
    torch.testing.assert_close(got.float(), want.to(got.device), rtol=0, atol=TOLERANCE[dtype])


@pytest.mark.parametrize("launch", [Launch(skip_dead=True), Launch(block_n=32, programs_per_sm=4),
                                    Launch(block_n=128, skip_dead=False, split_warps=8, merge_warps=1),
                                    Launch(block_n=128, programs_per_sm=2, split_stages=2)],
                         ids=["skip-dead", "small-blocks", "big-blocks", "long-splits"])
def test_every_launch_equals_masked_attention(device: str, launch: Launch) -> None:
    """The launches bench/decode_kernels.py times give the same attention: dead blocks branched over
    (the default loads them under the mask, their NaN keys never read), splits of several blocks, a
    row with no live key in a split."""
    length = 7 * 64 + 5
    live = [(0, length), (40, 300), (0, 9), (200, 203), (430, 431), (64, 256)]
    (q, k, v), mask = _case(len(live), 2, 4, length, 64, torch.bfloat16, device, live)
    got = launch_flash_decode(q, k, v, mask, 0.125, launch)
    torch.testing.assert_close(got.float(), _reference(q, k, v, mask, 0.125).to(got.device), rtol=0,
                               atol=TOLERANCE[torch.bfloat16])


def test_one_split_and_no_mask(device: str) -> None:
    """A cache of one block of keys gets one split; no mask attends to every key."""
    (q, k, v), _ = _case(4, 2, 4, BLOCK_N - 4, 64, torch.float32, device, [(0, BLOCK_N - 4)] * 4)
    assert num_splits(4 * 2, BLOCK_N - 4, 132) == 1
    torch.testing.assert_close(flash_decode(q, k, v, None, 0.2), _reference(q, k, v, None, 0.2).to(device),
                               rtol=0, atol=2e-5)


def test_a_mask_of_one_row_serves_every_row(device: str) -> None:
    (q, k, v), mask = _case(3, 1, 4, 150, 64, torch.float32, device, [(10, 120)] * 3)
    one = mask[:1]
    torch.testing.assert_close(flash_decode(q, k, v, one, 0.125), _reference(q, k, v, mask, 0.125).to(device),
                               rtol=0, atol=2e-5)


def test_the_attention_function_routes_one_token_only(device: str) -> None:
    class Heads(torch.nn.Module):
        num_key_value_groups = 4
        is_causal = True

    (q, k, v), mask = _case(2, 2, 4, 90, 64, torch.float32, device, [(0, 90), (30, 70)])
    got, weights = flash_decode_attention(Heads(), q, k, v, mask, scaling=0.125)
    assert weights is None
    torch.testing.assert_close(got, _reference(q, k, v, mask, 0.125).to(device), rtol=0, atol=2e-5)
    k, v = torch.nan_to_num(k), torch.nan_to_num(v)  # sdpa's reference reads every column
    prompt = torch.randn(2, 8, 5, 64, device=device)
    full = mask.expand(2, 1, 5, 90)
    assert torch.equal(flash_decode_attention(Heads(), prompt, k, v, full)[0],
                       grouped_decode_attention(Heads(), prompt, k, v, full)[0])


def test_the_static_decoder_samples_the_same_tokens_with_it(device: str) -> None:
    """The tiny model (head size 16, two query heads a key/value head) in the static loop, counter draw."""
    model = text_model("qwen3_5").to(device)
    sdpa, flash = copy.deepcopy(model), copy.deepcopy(model)
    use_grouped(sdpa)
    assert use_grouped(flash, flash=True) and flash.config.get_text_config()._attn_implementation == FLASH_DECODE
    want, got = static_sample(sdpa), static_sample(flash)
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


def test_the_op_traces_for_torch_compile(device: str) -> None:
    """The decode step is compiled: the op's schema and fake output must hold up under tracing."""
    (q, k, v), mask = _case(2, 2, 4, 70, 64, torch.float32, device, [(0, 70), (5, 50)])
    torch.library.opcheck(flash_decode, (q, k, v, mask, 0.125), test_utils=("test_schema", "test_faketensor"))


def test_splits_fill_what_the_multiprocessors_hold() -> None:
    """dense_1b at batch 64 and 256 (4 key/value heads), Qwen3.5 full size (2), 384 cache columns
    (6 blocks), 132 SMs of 8 programs each: 1,056 programs."""
    assert num_splits(64 * 4, 384, 132) == 5  # 1,280 programs (the op makes it 3 splits of 2 blocks)
    assert num_splits(64 * 2, 384, 132) == 6  # a block a program
    assert num_splits(256 * 4, 384, 132) == 2  # 2,048
    assert num_splits(256 * 4, 8192, 132) == 2  # long caches: more blocks a program, not more programs
    assert num_splits(1, 100, 132) == 2  # never more splits than blocks of keys
    assert num_splits(256 * 4, 384, 132, Launch(programs_per_sm=16)) == 3


def test_the_batch_launch_rule_and_its_attention(device: str) -> None:
    """`launch_for`: the sweep's few-programs launch up to 2 programs an SM (dense_1b's batch 64),
    the default above (batch 256); `by_batch` attention equals masked attention either way."""
    assert launch_for(64 * 4, 132) == FEW_PROGRAMS and launch_for(256 * 4, 132) == LAUNCH
    live = [(0, 200), (40, 130), (0, 9)]
    (q, k, v), mask = _case(len(live), 2, 4, 200, 64, torch.bfloat16, device, live)
    torch.testing.assert_close(flash_decode(q, k, v, mask, 0.125, by_batch=True).float(),
                               _reference(q, k, v, mask, 0.125).to(device), rtol=0, atol=TOLERANCE[torch.bfloat16])


def test_a_model_launched_by_batch_samples_the_same_tokens(device: str) -> None:
    model = text_model("qwen3_5").to(device)
    use_grouped(model, flash=True)
    by_batch = copy.deepcopy(model)
    assert launch_by_batch(by_batch) == sum(t == "full_attention" for t in model.config.layer_types)
    want, got = static_sample(model), static_sample(by_batch)
    assert torch.equal(got.input_ids, want.input_ids)
    assert (got.gen_logprobs - want.gen_logprobs).abs().max() <= 1e-5


@pytest.mark.parametrize("launch", [LAUNCH, FEW_PROGRAMS, Launch(block_n=32, programs_per_sm=4)],
                         ids=["default", "few-programs", "small-blocks"])
@pytest.mark.parametrize("written, offset", [(300, 0), (299, 1), (9, 0), (200, 1), (7 * 64 + 5, 0)])
def test_a_write_bound_equals_masked_attention(device: str, launch: Launch, written: int, offset: int) -> None:
    """`written`: the kernel loads keys under written[0] + offset alone; the mask's holes (left
    padding, NaN in the cache here) still count for nothing, and a split past the end gives no
    key. Every row is written to the same end, as a static cache's rows are."""
    length = 7 * 64 + 5
    end = written + offset
    live = [(min(first, end - 1), end) for first in (0, 40, end - 1, 64, 3)]  # holes of every size
    (q, k, v), mask = _case(len(live), 2, 4, length, 64, torch.bfloat16, device, live)
    position = torch.tensor([written], dtype=torch.long, device=device)
    got = launch_flash_decode(q, k, v, mask, 0.125, launch, written=position, written_offset=offset)
    torch.testing.assert_close(got.float(), _reference(q, k, v, mask, 0.125).to(got.device), rtol=0,
                               atol=TOLERANCE[torch.bfloat16])
    assert torch.equal(got, flash_decode(q, k, v, mask, 0.125, by_batch=launch is FEW_PROGRAMS, written=position,
                                         written_offset=offset)) or launch not in (LAUNCH, FEW_PROGRAMS)


def test_the_bounded_op_traces_for_torch_compile(device: str) -> None:
    (q, k, v), mask = _case(2, 2, 4, 70, 64, torch.float32, device, [(0, 50), (5, 50)])
    position = torch.tensor([49], dtype=torch.long, device=device)
    torch.library.opcheck(flash_decode, (q, k, v, mask, 0.125, None, False, position, 1),
                          test_utils=("test_schema", "test_faketensor"))
