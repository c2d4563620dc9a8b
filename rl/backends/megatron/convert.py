"""Weights between Hugging Face Qwen3.5 and megatron-core GPTModel, both ways (refit).

Two steps each way, so the format mapping and the parallel sharding are tested apart:

    hf_to_mcore(hf_sd, hf_config)            -> full megatron dict (global expert numbers)
    shard(full, rank=ShardRank(...))         -> this rank's GPTModel state dict
    gather_full(model_sd, ...)               -> full megatron dict (collectives over TP/EP groups)
    mcore_to_hf(full, hf_config)             -> HF state dict

Layouts that are not a plain rename:
* linear_qkv: per query group g, rows [q heads of g; their output gates; k_g; v_g]. HF's
  q_proj rows are per head [q_h; gate_h], then k_proj and v_proj.
* linear_fc1 (SwiGLU): [gate; up]; under TP each rank holds [gate shard; up shard].
* Experts: stacked on both sides, in the same layout (`EXPERT_WEIGHTS`): HF's gate_up_proj
  [E, 2I, H] is megatron's `mlp.experts.fc1` and down_proj [E, H, I] its `fc2`
  (`rl.backends.megatron.experts.GroupedExperts`). An expert-parallel rank holds E/EP
  consecutive experts (dim 0); expert-TP splits each expert's matrix as TP splits a dense MLP's.
* Linear attention (gated delta net): in_proj = [q; k; v; z; beta; alpha] from HF's in_proj_qkv,
  in_proj_z, in_proj_b, in_proj_a; under TP each rank holds [q; k; v; z; beta; alpha] of its own
  heads (and conv1d [q; k; v] of them), so those two split per section (`gdn_sections`).
Copies are exact (no arithmetic), so HF -> megatron -> HF is bitwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["EXPERT_WEIGHTS", "Piece", "ShardRank", "expert_weight", "gather_full", "gdn_sections", "hf_to_mcore",
           "mcore_layer_to_hf", "mcore_top_to_hf",
           "layout_shape", "local_entry", "mcore_layout", "mcore_to_hf", "shard", "split_ranges", "split_rule"]

_L = "decoder.layers.{}."

# The routed experts of a MoE layer: megatron-core name (under the layer) -> (HF name under the
# layer, how expert-TP splits each expert's matrix: `split_rule`). Both sides are [E, out, in].
EXPERT_WEIGHTS = {"mlp.experts.fc1": ("mlp.experts.gate_up_proj", "glu"),  # [E, 2I, H], [gate; up]
                  "mlp.experts.fc2": ("mlp.experts.down_proj", "cols")}  # [E, H, I]


def expert_weight(name: str) -> str | None:
    """The `EXPERT_WEIGHTS` key megatron tensor `name` ends with (None: not a stacked expert weight)."""
    return next((k for k in EXPERT_WEIGHTS if name.endswith("." + k)), None)


@dataclass(frozen=True)
class Piece:
    """Rows [start, stop) of the HF tensor `name` (of its expert `expert`: HF stacks experts in
    dim 0). Every megatron tensor is its pieces concatenated along dim 0 (`mcore_layout`), but a
    stacked expert weight, which is its pieces (one per expert) stacked along a new dim 0."""

    name: str
    start: int
    stop: int
    expert: int | None = None

    @property
    def rows(self) -> int:
        return self.stop - self.start


def _qkv_pieces(q: str, k: str, v: str, cfg) -> list[Piece]:
    """linear_qkv: per query group g, [q rows of g's heads; their output gates; k_g; v_g]. HF's
    q_proj rows are per head [q_h; gate_h]."""
    heads, groups, dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    per = heads // groups
    out = []
    for g in range(groups):
        for half in (0, 1):  # q, then the gates
            out += [Piece(q, (2 * h + half) * dim, (2 * h + half + 1) * dim) for h in range(g * per, (g + 1) * per)]
        out += [Piece(k, g * dim, (g + 1) * dim), Piece(v, g * dim, (g + 1) * dim)]
    return out


def _qkv_to_hf(qkv: torch.Tensor, cfg) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    heads, groups, dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    per = heads // groups
    hidden = qkv.shape[-1]
    g = qkv.view(groups, (2 * per + 2) * dim, hidden)
    q, gate, k, v = torch.split(g, [per * dim, per * dim, dim, dim], dim=1)
    q_hf = torch.stack([q.reshape(groups, per, dim, hidden), gate.reshape(groups, per, dim, hidden)], dim=2)
    return q_hf.reshape(-1, hidden), k.reshape(-1, hidden), v.reshape(-1, hidden)


# GatedDeltaNet parameters whose names are the same on both sides (HF linear_attn.X, megatron self_attention.X)
_GDN_SAME = ("conv1d.weight", "dt_bias", "A_log", "out_proj.weight")


def gdn_sections(cfg) -> dict[str, tuple[int, ...]]:
    """Row sections of the gated delta net's TP-split fused weights (full sizes), by name suffix."""
    qk = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    v = cfg.linear_num_value_heads * cfg.linear_value_head_dim
    heads = cfg.linear_num_value_heads
    return {"self_attention.in_proj.weight": (qk, qk, v, v, heads, heads),
            "self_attention.conv1d.weight": (qk, qk, v)}


def _gdn_to_hf(full: dict[str, torch.Tensor], m: str, h: str, cfg) -> dict[str, torch.Tensor]:
    out = {h + name: full[m + name] for name in _GDN_SAME}
    qk, _, v, z, b, a = gdn_sections(cfg)["self_attention.in_proj.weight"]
    parts = torch.split(full[m + "in_proj.weight"], [2 * qk + v, z, b, a])
    out.update({h + f"in_proj_{p}.weight": t for p, t in zip(("qkv", "z", "b", "a"), parts)})
    out[h + "norm.weight"] = full[m + "out_norm.weight"]
    return out


def mcore_layout(cfg, shapes: dict[str, tuple[int, ...]]) -> dict[str, list[Piece]]:
    """Which HF tensors, and which of their rows, make each full megatron-core tensor (TP=EP=1
    names, global expert numbers): the one statement of the HF -> megatron layout, used by
    `hf_to_mcore` (a whole HF dict in memory) and by `rl.backends.megatron.load` (a rank reading
    its slices from safetensors files).

    `shapes`: the HF text tensors there are (HF causal-LM names, as `split_hf` gives them) and
    their shapes; which layers are linear attention, MoE or have a shared expert, and whether
    `lm_head` is tied, follow from which names are present.
    """
    def whole(name: str) -> list[Piece]:
        return [Piece(name, 0, shapes[name][0])]

    def expert(name: str, e: int) -> Piece:
        return Piece(name, 0, shapes[name][1], e)

    out = {"embedding.word_embeddings.weight": whole("model.embed_tokens.weight"),
           "decoder.final_layernorm.weight": whole("model.norm.weight"),
           "output_layer.weight": whole("lm_head.weight" if "lm_head.weight" in shapes
                                        else "model.embed_tokens.weight")}
    for i in range(cfg.num_hidden_layers):
        h, m = f"model.layers.{i}.", _L.format(i)
        out[m + "input_layernorm.weight"] = whole(h + "input_layernorm.weight")
        out[m + "pre_mlp_layernorm.weight"] = whole(h + "post_attention_layernorm.weight")
        if h + "linear_attn.in_proj_qkv.weight" in shapes:
            g, sa = h + "linear_attn.", m + "self_attention."
            out.update({sa + name: whole(g + name) for name in _GDN_SAME})
            out[sa + "in_proj.weight"] = [p for part in ("qkv", "z", "b", "a")
                                          for p in whole(g + f"in_proj_{part}.weight")]
            out[sa + "out_norm.weight"] = whole(g + "norm.weight")
        else:
            a, sa = h + "self_attn.", m + "self_attention."
            out[sa + "linear_qkv.weight"] = _qkv_pieces(a + "q_proj.weight", a + "k_proj.weight",
                                                        a + "v_proj.weight", cfg)
            out[sa + "linear_proj.weight"] = whole(a + "o_proj.weight")
            out[sa + "q_layernorm.weight"] = whole(a + "q_norm.weight")
            out[sa + "k_layernorm.weight"] = whole(a + "k_norm.weight")
        if h + "mlp.gate.weight" in shapes:
            out[m + "mlp.router.weight"] = whole(h + "mlp.gate.weight")
            for mcore, (hf, _) in EXPERT_WEIGHTS.items():
                out[m + mcore] = [expert(h + hf, e) for e in range(shapes[h + hf][0])]
            s = h + "mlp.shared_expert."
            if s + "gate_proj.weight" in shapes:
                out[m + "mlp.shared_experts.linear_fc1.weight"] = (whole(s + "gate_proj.weight")
                                                                   + whole(s + "up_proj.weight"))
                out[m + "mlp.shared_experts.linear_fc2.weight"] = whole(s + "down_proj.weight")
                out[m + "mlp.shared_experts.gate_weight"] = whole(h + "mlp.shared_expert_gate.weight")
        else:
            out[m + "mlp.linear_fc1.weight"] = whole(h + "mlp.gate_proj.weight") + whole(h + "mlp.up_proj.weight")
            out[m + "mlp.linear_fc2.weight"] = whole(h + "mlp.down_proj.weight")
    return out


def layout_shape(pieces: list[Piece], shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The shape of the megatron tensor `pieces` make."""
    first = pieces[0]
    if first.expert is not None:
        return (len(pieces), first.rows, *shapes[first.name][2:])
    return (sum(p.rows for p in pieces), *shapes[first.name][1:])


def hf_to_mcore(hf: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """HF Qwen3_5(Moe)ForCausalLM state dict -> full megatron-core GPTModel dict (TP=EP=1 names)."""
    layout = mcore_layout(cfg, {k: tuple(v.shape) for k, v in hf.items()})

    def rows(p: Piece) -> torch.Tensor:
        t = hf[p.name] if p.expert is None else hf[p.name][p.expert]
        return t.detach()[p.start:p.stop]

    def make(pieces: list[Piece]) -> torch.Tensor:
        if pieces[0].expert is not None:
            return torch.stack([rows(p) for p in pieces])
        return torch.cat([rows(p) for p in pieces]) if len(pieces) > 1 else rows(pieces[0]).clone()

    return {name: make(pieces) for name, pieces in layout.items()}


def mcore_to_hf(full: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """Full megatron-core dict -> HF state dict (the inverse of `hf_to_mcore`)."""
    out = mcore_top_to_hf(full, cfg)
    for i in range(cfg.num_hidden_layers):
        out.update(mcore_layer_to_hf(full, i, cfg))
    return out


def _owned(out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def mcore_top_to_hf(full: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """The weights outside the decoder layers: embedding, final norm, output layer (untied)."""
    out = {"model.embed_tokens.weight": full["embedding.word_embeddings.weight"],
           "model.norm.weight": full["decoder.final_layernorm.weight"]}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = full["output_layer.weight"]
    return _owned(out)


def mcore_layer_to_hf(full: dict[str, torch.Tensor], i: int, cfg) -> dict[str, torch.Tensor]:
    """Decoder layer `i` (the full model's number) of a megatron-core dict in HF names."""
    h, m = f"model.layers.{i}.", _L.format(i)
    out = {h + "input_layernorm.weight": full[m + "input_layernorm.weight"],
           h + "post_attention_layernorm.weight": full[m + "pre_mlp_layernorm.weight"]}
    if m + "self_attention.in_proj.weight" in full:
        out.update(_gdn_to_hf(full, m + "self_attention.", h + "linear_attn.", cfg))
    else:
        a = h + "self_attn."
        q, k, v = _qkv_to_hf(full[m + "self_attention.linear_qkv.weight"], cfg)
        out.update({a + "q_proj.weight": q, a + "k_proj.weight": k, a + "v_proj.weight": v})
        out[a + "o_proj.weight"] = full[m + "self_attention.linear_proj.weight"]
        out[a + "q_norm.weight"] = full[m + "self_attention.q_layernorm.weight"]
        out[a + "k_norm.weight"] = full[m + "self_attention.k_layernorm.weight"]
    if m + "mlp.router.weight" in full:
        out[h + "mlp.gate.weight"] = full[m + "mlp.router.weight"]
        out.update({h + hf: full[m + mcore] for mcore, (hf, _) in EXPERT_WEIGHTS.items()})
        if m + "mlp.shared_experts.linear_fc1.weight" in full:
            gate, up = full[m + "mlp.shared_experts.linear_fc1.weight"].chunk(2)
            s = h + "mlp.shared_expert."
            out.update({s + "gate_proj.weight": gate, s + "up_proj.weight": up,
                        s + "down_proj.weight": full[m + "mlp.shared_experts.linear_fc2.weight"],
                        h + "mlp.shared_expert_gate.weight": full[m + "mlp.shared_experts.gate_weight"]})
    else:
        gate, up = full[m + "mlp.linear_fc1.weight"].chunk(2)
        out.update({h + "mlp.gate_proj.weight": gate, h + "mlp.up_proj.weight": up,
                    h + "mlp.down_proj.weight": full[m + "mlp.linear_fc2.weight"]})
    return _owned(out)


# --- sharding over tensor and expert parallelism ------------------------------------------------

@dataclass(kw_only=True, frozen=True)
class ShardRank:
    """This rank's coordinates: tensor-parallel and expert-parallel (and expert-TP) rank and size."""

    tp_rank: int = 0
    tp_size: int = 1
    ep_rank: int = 0
    ep_size: int = 1
    etp_rank: int = 0
    etp_size: int = 1


def split_rule(name: str) -> str:
    """How a parameter is split: 'rows' (dim 0), 'cols' (dim 1), 'glu' (rows, per half),
    'sections' (rows, per section of `gdn_sections`) or 'none'. A stacked expert weight: how each
    expert's matrix is split (dims 1 and 2)."""
    expert = expert_weight(name)
    if expert is not None:
        return EXPERT_WEIGHTS[expert][1]
    if name.endswith(("self_attention.in_proj.weight", "self_attention.conv1d.weight")):
        return "sections"
    if name.endswith(("word_embeddings.weight", "output_layer.weight", "linear_qkv.weight",
                      "self_attention.dt_bias", "self_attention.A_log")):
        return "rows"
    if name.endswith(("linear_proj.weight", "linear_fc2.weight", "self_attention.out_proj.weight")):
        return "cols"
    if name.endswith("linear_fc1.weight"):
        return "glu"
    return "none"


def _sections_of(name: str, rows: int, sections: dict[str, tuple[int, ...]] | None, parts: int = 1) -> list[int]:
    """The section sizes of `name`'s `rows` rows (of a tensor that is 1/parts of the full one); GLU: two halves."""
    if split_rule(name) == "glu":
        return [rows // 2] * 2
    suffix = next((k for k in (sections or {}) if name.endswith(k)), None)
    if suffix is None:
        raise ValueError(f"{name}: split per section, but no sections given (gdn_sections)")
    return [n // parts for n in sections[suffix]]


def _chunk(start: int, stop: int, rank: int, size: int) -> tuple[int, int]:
    """Rank `rank`'s part of [start, stop) cut in `size` (as `torch.chunk` cuts)."""
    step = -(-(stop - start) // size)
    low = min(start + rank * step, stop)
    return low, min(low + step, stop)


def split_ranges(name: str, shape: tuple[int, ...], rank: int, size: int, sections=None
                 ) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """Which part of the full tensor `name` (of `shape`; of a stacked expert weight, one expert's
    matrix) rank `rank` of `size` holds: its row ranges, in order, and its column range (None: all
    columns). The one statement of the TP split (`split_rule`), used by `shard` on a tensor in
    memory and by `rl.backends.megatron.load` on a safetensors file."""
    rule = split_rule(name)
    if size == 1 or rule == "none":
        return [(0, shape[0])], None
    if rule == "rows":
        return [_chunk(0, shape[0], rank, size)], None
    if rule == "cols":
        return [(0, shape[0])], _chunk(0, shape[1], rank, size)
    sizes = _sections_of(name, shape[0], sections)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [_chunk(start, start + n, rank, size) for start, n in zip(starts, sizes)], None


def _split(name: str, t: torch.Tensor, rank: int, size: int, sections=None, dim: int = 0) -> torch.Tensor:
    """Rank `rank`'s part of `t`, `split_ranges` applied to its dims `dim` (rows) and `dim` + 1."""
    if size == 1 or split_rule(name) == "none":
        return t
    ranges, cols = split_ranges(name, tuple(t.shape[dim:]), rank, size, sections)
    parts = [t.narrow(dim, a, b - a) for a, b in ranges]
    out = torch.cat(parts, dim=dim) if len(parts) > 1 else parts[0]
    return out if cols is None else out.narrow(dim + 1, cols[0], cols[1] - cols[0])


def _join(name: str, parts: list[torch.Tensor], sections=None, dim: int = 0) -> torch.Tensor:
    """The inverse of `_split`: every rank's part, in rank order, joined."""
    rule = split_rule(name)
    if len(parts) == 1 or rule == "none":
        return parts[0]
    if rule == "rows":
        return torch.cat(parts, dim=dim)
    if rule == "cols":
        return torch.cat(parts, dim=dim + 1)
    split = [torch.split(p, _sections_of(name, p.shape[dim], sections, parts=len(parts)), dim=dim) for p in parts]
    return torch.cat([rank_pieces[i] for i in range(len(split[0])) for rank_pieces in split], dim=dim)


def local_entry(name: str, *, rank: ShardRank, num_experts: int = 0,
                sections: dict[str, tuple[int, ...]] | None = None
                ) -> tuple[int, int, dict[str, tuple[int, ...]] | None, tuple[int, int] | None]:
    """How this rank holds full tensor `name` (under the same name): the rank and size of the group
    that splits it, the sections, and, for a stacked expert weight, the experts it holds ([start,
    stop) of dim 0: E/EP consecutive ones; expert-TP then splits each expert's matrix)."""
    if expert_weight(name) is None:
        return rank.tp_rank, rank.tp_size, sections, None
    local = num_experts // rank.ep_size
    return rank.etp_rank, rank.etp_size, None, (rank.ep_rank * local, (rank.ep_rank + 1) * local)


def shard(full: dict[str, torch.Tensor], *, rank: ShardRank, num_experts: int = 0,
          sections: dict[str, tuple[int, ...]] | None = None) -> dict[str, torch.Tensor]:
    """This rank's GPTModel state dict from the full dict; `sections`: `gdn_sections(cfg)` when
    the model has linear-attention layers."""
    out = {}
    for name, t in full.items():
        r, size, secs, experts = local_entry(name, rank=rank, num_experts=num_experts, sections=sections)
        if experts is None:
            out[name] = _split(name, t, r, size, secs).clone()
        else:
            out[name] = _split(name, t[experts[0]:experts[1]], r, size, dim=1).clone()
    return out


def _all_gather(t: torch.Tensor, group, size: int) -> list[torch.Tensor]:
    if size == 1:
        return [t]
    parts = [torch.empty_like(t) for _ in range(size)]
    dist.all_gather(parts, t.contiguous(), group=group)
    return parts


def gather_full(local: dict[str, torch.Tensor], *, rank: ShardRank, tp_group=None, ep_group=None,
                etp_group=None, sections: dict[str, tuple[int, ...]] | None = None) -> dict[str, torch.Tensor]:
    """The full dict from every rank's shard; a collective over the TP, EP and expert-TP groups.

    Every rank must call it with the same names in the same order (sorted here).
    """
    out = {}
    for name in sorted(local):
        t = local[name].detach()
        if expert_weight(name) is not None:
            joined = _join(name, _all_gather(t, etp_group, rank.etp_size), dim=1)
            out[name] = torch.cat(_all_gather(joined, ep_group, rank.ep_size))
        else:
            out[name] = _join(name, _all_gather(t, tp_group, rank.tp_size), sections)
    return out
