"""What `generation.decode: graphs` adds to the static loop, checked on the CPU with prompts of mixed lengths.

The graphs mode is the static loop (rl/generation/static_decode.py) plus three things: rows padded
up to a batch bucket (copies of row 0 with seeds of their own), the decode forward under
`torch.compile`, and the iteration captured in a CUDA graph. The first two run here: the bucket
rows change no real row's tokens, and the decode step, padding mask and per-row positions
included, traces as one graph (dynamo, `fullgraph=True`, its eager backend: no graph break, so
no host sync in the step, which a capture would refuse). The capture itself needs a GPU
(tests/rl/test_generation_mixed_lengths.py runs its graphs cases there).
"""

from __future__ import annotations

import decode_models
import pytest
import torch
from decode_models import EOS, PAD, VOCAB

from rl.generation import row_seeds
from rl.generation.static_decode import StaticDecoder, batch_bucket

pytestmark = pytest.mark.slow(seconds=120)  # the file: dynamo traces three models, measured on 2 loaded cores

torch.set_num_threads(1)
LENGTHS = [9, 3, 6, 1, 7]  # 5 rows: a bucket of 8


def text_model(family: str) -> tuple[torch.nn.Module, int, int, int]:
    return decode_models.text_model(family), VOCAB, PAD, EOS


def vision_model() -> tuple[torch.nn.Module, int, int, int]:
    """The VL class with text prompts: its decode step takes [3, B, 1] multimodal positions."""
    m, tok = decode_models.vision_model()
    return m, 40, tok.pad_token_id, tok.eos_token_id


MODELS = {"qwen3_5": lambda: text_model("qwen3_5"), "qwen3_5_moe": lambda: text_model("qwen3_5_moe"),
          "vision": vision_model}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bucket_rows_and_a_whole_graph_decode_step_keep_every_rows_tokens(name: str) -> None:
    model, top, pad, eos = MODELS[name]()
    ids = torch.randint(10, top, (len(LENGTHS), max(LENGTHS)), generator=torch.Generator().manual_seed(1))
    args = dict(max_new_tokens=10, temperature=1.0, eos_token_id=eos, pad_token_id=pad,
                seeds=row_seeds(7, len(LENGTHS)), prompt_lengths=torch.tensor(LENGTHS))
    static = StaticDecoder(model, use_graphs=False).generate(ids, **args)
    graphs_layout = StaticDecoder(model, use_graphs=False)
    graphs_layout.bucket_rows = True
    graphs_layout.decode_model = torch.compile(model, dynamic=False, fullgraph=True, backend="eager")
    got = graphs_layout.generate(ids, **args)
    assert batch_bucket(len(LENGTHS)) == 8  # three bucket rows decoded with the five
    for field in ("input_ids", "attention_mask", "response_mask", "lengths", "truncated", "prompt_lengths"):
        assert torch.equal(getattr(got, field), getattr(static, field)), field
    torch.testing.assert_close(got.gen_logprobs, static.gen_logprobs, atol=1e-5, rtol=0)
