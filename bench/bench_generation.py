"""Generation tokens/s: our decoders against Hugging Face `generate`, same model, batch and call.

    python3 bench/bench_generation.py --model twin --batch 64 --prompt 32 --new 256 --out gen.jsonl

Models: `twin` is the h200x2 twin of recipes/qwen3_5_35b.yaml (its model block, resolved by the
harness), `vlm_twin` that of recipes/qwen3_5_35b_vlm.yaml (each prompt: text, one random
`--image`-pixel square image, text), `dense_1b` / `moe_1b` are bench/megatron_gpu.py's
(`--layers full|hybrid`). Weights are
random (seeded) in bf16 on the GPU; every variant samples at temperature 1 with no eos (each row
makes exactly `--new` tokens), so tokens/s = batch x new / seconds, the median of `--repeats`
timed calls after one untimed call (which pays HF's `torch.compile` or our graph capture: its
seconds are reported as `first_s`). Our variants run a copy of the model whose decode attention
is grouped by key/value head, as the generation worker's is on CUDA (`--attention sdpa`: HF's, as
the hf_* variants always are). Variants:

  ours_graphs  rl.generation.static_decode.StaticDecoder, decode step replayed from a CUDA graph,
               with the projections fused (rl.generation.fused_projections), the decode
               attention's split-K Triton kernel (rl.generation.flash_decode: reads only the cache's
               live keys; sdpa where Triton is missing, which the `decode_kernel` field says), the
               gated-delta-net layers' one-token step (rl.generation.gdn_decode: one input product,
               the delta rule as one Triton kernel on the cache's state; the `gdn_step` field), the
               full-attention layers' norms, rotary and cache write as one kernel with the output
               gate in the attention's merge (rl.generation.attention_step), the
               logit statistics from one Triton pass (`fused_stats`), the draw's counter
               generator as one kernel (`fused_draw`) and its second level as another
               (`draw_kernel`), the output projection writing the logits into the decoder's buffer
               (`direct_head`), the split-K attention launched for the batch (`launch_by_batch`),
               the cache positions advanced in one add a step: what the generation worker runs on
               CUDA
  ours_graphs_hf_gdn  the same with transformers' gated-delta-net forward in the decode step
  ours_graphs_conv_torch  ours_graphs with the gated-delta-net conv window in torch arithmetic
               (`use_gdn_decode(conv_kernel=False)`: three inductor kernels where ours_graphs has one)
  ours_graphs_torch_stats  ours_graphs with the step's logit statistics (log-sum-exp, row max, the
               draw's block weights) as compiled torch arithmetic, where ours_graphs reads them from
               one Triton pass (rl.generation.logit_stats)
  ours_graphs_attention_torch  ours_graphs with transformers' norms, rotary, cache writes and output
               gate around the attention in the decode step (compiled by inductor into ~7 kernels
               a layer), where ours_graphs runs rl.generation.attention_step's one kernel and gates
               in the attention's merge
  ours_graphs_head_copy  ours_graphs with the step's logits from the compiled model's own output
               projection, copied into the decoder's buffer (`StaticDecoder(direct_head=False)`),
               where ours_graphs writes them there in the product
  ours_graphs_grid_launch  ours_graphs with the split-K attention launched as
               rl.generation.flash_decode.LAUNCH at every batch, where ours_graphs launches as
               `launch_for` says for the batch (at up to 2 (row, key/value head) programs an SM,
               one block a split and dead blocks branched over)
  ours_graphs_layer_increments  ours_graphs with each attention layer advancing its own cache
               position (`use_attention_step(one_increment=False)`: a one-element add a layer)
  ours_graphs_bounded  ours_graphs with the split-K attention told the cache's write position
               (`bound_by_write_position`): it loads keys under the written end, beside the mask's
               bytes, where ours_graphs loads them after (a candidate)
  ours_graphs_draw_torch  ours_graphs with the draw's second level in torch (~8 small kernels),
               where ours_graphs runs rl.generation.draw_kernel's one
  ours_graphs_autotune  ours_graphs with the step compiled in "max-autotune-no-cudagraphs" mode
               (inductor times its own matrix products against cuBLAS's for each shape; minutes
               of compilation on its first call)
  ours_graphs_sdpa  the same with sdpa's kernel for the grouped decode attention and the draw's
               hash in small kernels (the engine's decode before the Triton kernel)
  ours_graphs_unfused  ours_graphs without the fused projections (nor the gated-delta-net step)
  ours_static  the same loop without the graph
  ours_eager   rl.generation.sampler.generate (the model's growing cache, one host sync a token)
  hf_static    model.generate(cache_implementation="static"): HF compiles the decode forward
  hf_dynamic   model.generate() with its default cache

One JSON line per variant (and, on ours_graphs, `ratio_vs_hf_static` and the fraction of the
decode step's roofline it reaches, bench/decode_roofline.py). Our variants also split a call into
the prompt's forward (`prefill_s`) and the decode steps (`decode_s`, `decode_tokens_per_sec`),
timed by CUDA events (`StaticDecoder.phase_seconds`): `decode_roofline_fraction` sets the steps
alone against the step's roofline, `roofline_fraction` the whole call. `--profile FILE` also writes
torch.profiler's kernel table of one call of `--profile-variant` (ours_graphs: the kernels its
replayed graphs run, which CUPTI reports one by one; ours_static: the same step launched from
Python) by self device time, with the device time a decode step takes, to find what a step spends
beyond its weight reads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

# ours_graphs and its one-part variants
OURS_GRAPHS = ("ours_graphs", "ours_graphs_autotune", "ours_graphs_draw_torch", "ours_graphs_torch_stats",
               "ours_graphs_conv_torch", "ours_graphs_attention_torch", "ours_graphs_head_copy",
               "ours_graphs_grid_launch", "ours_graphs_layer_increments", "ours_graphs_bounded")
VARIANTS = (*OURS_GRAPHS, "ours_graphs_hf_gdn", "ours_graphs_sdpa", "ours_graphs_unfused", "ours_static", "ours_eager",
            "hf_static", "hf_dynamic")
# the variants whose model runs the Triton decode kernel (the decode step; the prompt is sdpa's)
FLASH_VARIANTS = (*OURS_GRAPHS, "ours_graphs_hf_gdn", "ours_graphs_unfused", "ours_static", "ours_eager")
GDN_STEP_VARIANTS = (*OURS_GRAPHS, "ours_static", "ours_eager")


def model_config(name: str, layers: str) -> tuple[Any, int]:
    """(model section, vocab size) of a bench model."""
    from rl.config import ModelConfig

    if name in ("twin", "vlm_twin"):
        from harness.recipe.load import load_recipe
        from rl.tokenizer import load_tokenizer

        recipe = "qwen3_5_35b.yaml" if name == "twin" else "qwen3_5_35b_vlm.yaml"
        model = load_recipe(ROOT / "recipes" / recipe, scale="h200x2").data["model"]
        block = ModelConfig(family=model["family"], modality=model.get("modality", "text"),
                            config=dict(model["config"]), tokenizer=model["tokenizer"])
        return block, len(load_tokenizer(model["tokenizer"]))
    from megatron_gpu import model_cfg

    cfg = model_cfg(name, layers)
    return cfg, int(cfg.config.get("vocab_size", 151936))


def image_prompts(model, text: torch.Tensor, side: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Each row: half its text, one random side x side image's placeholder tokens, the rest."""
    from rl.models.image_inputs import ImageLayout, patchify

    layout = ImageLayout.of(model)
    g = torch.Generator().manual_seed(2)
    pixels, grid = patchify(torch.randint(0, 256, (text.shape[0], side, side, 3), dtype=torch.uint8, generator=g),
                            layout)
    tokens = int(grid[0].prod()) // layout.spatial_merge_size ** 2
    image = torch.tensor([layout.vision_start_token_id, *[layout.image_token_id] * tokens, layout.vision_end_token_id],
                         device=text.device).expand(text.shape[0], -1)
    half = text.shape[1] // 2
    return (torch.cat([text[:, :half], image, text[:, half:]], dim=1),
            {"pixel_values": pixels.to(text.device, next(model.parameters()).dtype),
             "image_grid_thw": grid.to(text.device)})


def first_special(model) -> int:
    """The lowest image-marker token id: random text stays below it."""
    from rl.models.image_inputs import ImageLayout

    layout = ImageLayout.of(model)
    return min(layout.image_token_id, layout.vision_start_token_id, layout.vision_end_token_id)


def hf_image_kwargs(model, prompt: torch.Tensor, images: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF `generate`'s keyword arguments for the same images (flattened patches, token types)."""
    if not images:
        return {}
    from rl.models.image_inputs import image_forward_kwargs

    return image_forward_kwargs(model, prompt, images["pixel_values"], images["image_grid_thw"])


def timed(fn, repeats: int, decoder=None) -> tuple[float, float, tuple[float, float] | None]:
    """(first call s, median of the timed calls s, and with a StaticDecoder the medians of its
    `phase_seconds`: the prompt's forward and the decode steps), each call ending in a device sync."""
    phases = []

    def once() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        if decoder is not None:
            phases.append(decoder.phase_seconds())
        return seconds

    first = once()
    phases.clear()
    median = statistics.median(once() for _ in range(repeats))
    return first, median, tuple(statistics.median(p) for p in zip(*phases)) if phases else None


def profile(fn, path: str, title: str, steps: int) -> None:
    """torch.profiler's table of one call of `fn` (after a warm-up call) by self device time, and
    the device time per decode step (all kernels' time over `steps`; the prompt's forward included)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch.no_grad():
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA and not e.is_user_annotation]
    device_us = sum(e.self_device_time_total for e in kernels)
    table = events.table(sort_by="self_cuda_time_total", row_limit=45, max_name_column_width=90)
    summary = (f"device time {device_us / 1e3:.1f} ms over {steps} decode steps: {device_us / steps:.1f} us a step; "
               f"wall under the profiler {wall * 1e3:.1f} ms")
    Path(path).write_text(f"{title}\n{summary}\n{table}\n")
    print(f"profile: {path}: {summary}", flush=True)


def worker_model(unfused, *, attention_step: bool = True, one_increment: bool = True, gdn_step: bool = True,
                 conv_kernel: bool = True, batch_launch: bool = True, bounded: bool = False):
    """A copy of `unfused` with the generation worker's decode parts (stacked projections, the
    attention step, the gated-delta-net step, the attention's launch by batch); a keyword changes one
    part (a one-part variant)."""
    import copy

    from rl.generation.attention_step import bound_by_write_position, use_attention_step
    from rl.generation.decode_attention import launch_by_batch
    from rl.generation.fused_projections import fuse_projections
    from rl.generation.gdn_decode import use_gdn_decode

    model = copy.deepcopy(unfused)
    fuse_projections(model)
    if attention_step:
        use_attention_step(model, one_increment=one_increment)
    if gdn_step:
        use_gdn_decode(model, conv_kernel=conv_kernel)
    if batch_launch:
        launch_by_batch(model)
    if bounded:
        bound_by_write_position(model)
    return model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="twin", choices=["twin", "vlm_twin", "dense_1b", "moe_1b"])
    p.add_argument("--image", type=int, default=24, help="vlm_twin: the image side in pixels (its task's)")
    p.add_argument("--layers", default="hybrid", choices=["full", "hybrid"])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--out", default=None)
    p.add_argument("--warm", action="store_true",
                   help="run each variant once untimed, printing whether it ran (beside the smoke suite, so a timed "
                        "run after it finds inductor's and Triton's caches warm)")
    p.add_argument("--attention", default="grouped", choices=["grouped", "sdpa"],
                   help="our variants' decode attention (rl.generation.decode_attention, or HF's sdpa)")
    p.add_argument("--profile", default=None, help="write the kernel table of one --profile-variant call here")
    p.add_argument("--profile-variant", default="ours_graphs", choices=["ours_graphs", "ours_static"])
    args = p.parse_args()

    import copy

    from rl.generation import generate, row_seeds
    from rl.generation.decode_attention import use_grouped_decode_attention
    from rl.generation.flash_decode import triton
    from rl.generation.fused_projections import fuse_projections
    from rl.generation.static_decode import StaticDecoder
    from rl.generation.triton_runs import triton_runs
    from rl.models import build_model

    model_block, vocab = model_config(args.model, args.layers)
    with torch.device("cuda"):  # initialised on the GPU: seconds, where the CPU takes a minute at 1.2 B
        model = build_model(model_block, vocab_size=vocab, seed=0).to("cuda", torch.bfloat16).eval()
    prompt = torch.randint(3, vocab, (args.batch, args.prompt), generator=torch.Generator().manual_seed(0)).cuda()
    images = {}
    if args.model == "vlm_twin":
        prompt, images = image_prompts(model, prompt.clamp(max=first_special(model) - 1), args.image)
    mask = torch.ones_like(prompt)
    seeds = row_seeds(1, args.batch)
    ours = dict(max_new_tokens=args.new, temperature=1.0, eos_token_id=-1, pad_token_id=0, **images)
    hf = dict(attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=args.new,
              eos_token_id=None, pad_token_id=0, **hf_image_kwargs(model, prompt, images))
    worker = dict(use_graphs=True, fused_draw=True, fused_stats=True, draw_kernel=True)  # the generation worker's
    unfused = model
    if args.attention == "grouped":
        unfused = copy.deepcopy(model)
        use_grouped_decode_attention(unfused, flash=True)
    wanted = set(args.variants.split(","))

    def variant(name: str, **parts) -> StaticDecoder | None:
        """The one-part variant `name`'s decoder when it is asked for."""
        return StaticDecoder(worker_model(unfused, **parts), **worker) if name in wanted else None

    graphs_hf_gdn = variant("ours_graphs_hf_gdn", gdn_step=False)
    graphs_conv_torch = variant("ours_graphs_conv_torch", conv_kernel=False)
    graphs_attention_torch = variant("ours_graphs_attention_torch", attention_step=False)
    grid_launch = variant("ours_graphs_grid_launch", batch_launch=False)
    layer_increments = variant("ours_graphs_layer_increments", one_increment=False)
    bounded = variant("ours_graphs_bounded", bounded=True)
    our_model = worker_model(unfused)
    has_gdn_step = any(hasattr(m, "fused_in_proj") for m in our_model.modules())  # use_gdn_decode's stacked input
    gdn_step = "triton" if has_gdn_step and triton_runs(prompt) else "-"
    graphs = StaticDecoder(our_model, **worker)
    static = StaticDecoder(our_model, use_graphs=False)
    autotuned = StaticDecoder(our_model, **worker,
                              compile_mode="max-autotune-no-cudagraphs")
    torch_stats = StaticDecoder(our_model, **dict(worker, fused_stats=False))
    draw_torch = StaticDecoder(our_model, **dict(worker, draw_kernel=False))
    head_copy = StaticDecoder(our_model, **worker, direct_head=False)
    graphs_unfused = (StaticDecoder(unfused, **worker)
                      if "ours_graphs_unfused" in args.variants else None)
    graphs_sdpa = None
    if "ours_graphs_sdpa" in args.variants:
        sdpa_model = copy.deepcopy(model)
        if args.attention == "grouped":
            use_grouped_decode_attention(sdpa_model)
        fuse_projections(sdpa_model)
        graphs_sdpa = StaticDecoder(sdpa_model, use_graphs=True)
    flash = args.attention == "grouped" and triton is not None
    runs = {
        "ours_graphs": lambda: graphs.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_autotune": lambda: autotuned.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_torch_stats": lambda: torch_stats.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_draw_torch": lambda: draw_torch.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_head_copy": lambda: head_copy.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_grid_launch": lambda: grid_launch.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_layer_increments": lambda: layer_increments.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_bounded": lambda: bounded.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_conv_torch": lambda: graphs_conv_torch.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_attention_torch": lambda: graphs_attention_torch.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_hf_gdn": lambda: graphs_hf_gdn.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_sdpa": lambda: graphs_sdpa.generate(prompt, seeds=seeds, **ours),
        "ours_graphs_unfused": lambda: graphs_unfused.generate(prompt, seeds=seeds, **ours),
        "ours_static": lambda: static.generate(prompt, seeds=seeds, **ours),
        "ours_eager": lambda: generate(our_model, prompt, seeds=seeds, **ours),
        "hf_static": lambda: model.generate(prompt, cache_implementation="static", **hf),
        "hf_dynamic": lambda: model.generate(prompt, **hf),
    }
    decoders = {"ours_graphs": graphs, "ours_graphs_autotune": autotuned, "ours_graphs_torch_stats": torch_stats,
                "ours_graphs_draw_torch": draw_torch, "ours_graphs_head_copy": head_copy,
                "ours_graphs_grid_launch": grid_launch, "ours_graphs_layer_increments": layer_increments,
                "ours_graphs_bounded": bounded,
                "ours_graphs_conv_torch": graphs_conv_torch, "ours_graphs_attention_torch": graphs_attention_torch,
                "ours_graphs_hf_gdn": graphs_hf_gdn, "ours_graphs_sdpa": graphs_sdpa,
                "ours_graphs_unfused": graphs_unfused, "ours_static": static}
    params = sum(t.numel() for t in model.parameters())
    if args.warm:  # one untimed call each: compiles and captures into the caches a timed run then reads
        for name in args.variants.split(","):
            with torch.no_grad():
                try:
                    runs[name]()
                    print(json.dumps({"warm": name, "ok": True}), flush=True)
                except Exception as error:  # noqa: BLE001 - reported; the other variants still warm up
                    print(json.dumps({"warm": name, "ok": False, "error": str(error).splitlines()[0][:300]}),
                          flush=True)
        return
    results = {}
    for name in args.variants.split(","):
        with torch.no_grad():
            try:
                first, median, phases = timed(runs[name], args.repeats, decoders.get(name))
            except Exception as error:  # noqa: BLE001 - a variant that fails is reported, the rest still run
                results[name] = dict(variant=name, error=f"{type(error).__name__}: {str(error).splitlines()[0][:300]}")
                print(json.dumps(results[name]), flush=True)
                continue
        results[name] = dict(variant=name, model=args.model, layers=args.layers, params=params, batch=args.batch,
                             prompt=args.prompt, new=args.new,
                             attention=args.attention if name.startswith("ours") else "sdpa",
                             decode_kernel="flash_decode" if flash and name in FLASH_VARIANTS else "sdpa",
                             gdn_step=gdn_step if name in GDN_STEP_VARIANTS else "-",
                             first_s=round(first, 3), seconds=round(median, 4),
                             tokens_per_sec=round(args.batch * args.new / median, 1),
                             **({} if phases is None else dict(
                                 prefill_s=round(phases[0], 4), decode_s=round(phases[1], 4),
                                 decode_tokens_per_sec=round(args.batch * args.new / phases[1], 1))),
                             device=torch.cuda.get_device_name(), torch=torch.__version__,
                             date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        print(json.dumps(results[name]), flush=True)
    if "tokens_per_sec" in results.get("ours_graphs", {}):
        from decode_roofline import decode_roofline

        from rl.metrics.mfu import device_class

        roof = decode_roofline(model, args.batch, args.prompt, args.new, device_class(torch.cuda.get_device_name()))
        ours_row = results["ours_graphs"]
        # the roofline is a decode step's: `decode_roofline_fraction` sets the decode steps alone against
        # it; `roofline_fraction` the whole call, the prompt's forward included (its figure before 2026-12-05)
        ours_row.update(roofline_tokens_per_sec=round(roof.tokens_per_sec), roofline_bound=roof.bound,
                        roofline_fraction=round(ours_row["tokens_per_sec"] / roof.tokens_per_sec, 3),
                        decode_roofline_fraction=round(ours_row["decode_tokens_per_sec"] / roof.tokens_per_sec, 3))
        print(json.dumps({k: ours_row[k] for k in ("roofline_tokens_per_sec", "roofline_bound",
                                                   "roofline_fraction", "decode_roofline_fraction")}), flush=True)
    if "tokens_per_sec" in results.get("ours_graphs", {}) and "tokens_per_sec" in results.get("hf_static", {}):
        ratio = results["ours_graphs"]["tokens_per_sec"] / results["hf_static"]["tokens_per_sec"]
        results["ours_graphs"]["ratio_vs_hf_static"] = round(ratio, 2)
        print(json.dumps({"ratio_vs_hf_static": round(ratio, 2), "model": args.model, "batch": args.batch}), flush=True)
    if args.profile:
        profile(runs[args.profile_variant], args.profile, f"{args.model} {args.layers}, batch {args.batch}, "
                f"prompt {args.prompt}, new {args.new}, {args.profile_variant} ({args.attention} attention)", args.new)
    if args.out:
        with open(args.out, "a") as f:
            for r in results.values():
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
