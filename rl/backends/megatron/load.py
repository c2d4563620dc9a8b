"""A megatron rank's weights read straight from a safetensors checkpoint: only its tensors, only its slices.

    ckpt = SafetensorsCheckpoint(directory)           # the index (or the one file); headers only
    text, visual = load_rank(ckpt, hf_config, rank=ShardRank(...), num_experts=..., sections=...,
                             offset=..., count=..., first=..., last=..., vision=...)

`text` is exactly what `MegatronBackend._shard(hf_state_dict)` gives this rank from the whole
model loaded with `from_pretrained(..., dtype=float32)` (same keys, same values, bit for bit);
`visual` the vision tower's state dict (replicated, first pipeline stage only). The layout is
`rl.backends.megatron.convert`'s: `mcore_layout` says which HF rows make each megatron tensor, `to_stage`
which tensors a pipeline stage holds, `local_entry` which experts an EP rank holds (dim 0 of a
stacked expert weight), and `split_ranges` which rows and columns a TP rank holds of each (of
each expert's matrix); the reads are their
intersection, done with `safe_open(...).get_slice`, so a rank reads its own bytes only (up to
the safetensors headers). Values are cast to `dtype` after the read (a bf16 checkpoint becomes
fp32 exactly as `from_pretrained(dtype=float32)` does).

On-disk names this reads (what `from_pretrained` maps for these families in transformers 5):
the model's own names; experts per module (`mlp.experts.{e}.gate_proj|up_proj|down_proj.weight`,
what `save_pretrained` writes and the released Qwen3.5 checkpoints hold) or fused
(`mlp.experts.gate_up_proj` [E, 2I, H], `down_proj` [E, H, I]); text weights under
`model.language_model.` (a vision-language checkpoint, also when read as a text model). A
tensor the layout needs and the checkpoint lacks is an error (from_pretrained would have
initialised it at random).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from rl.backends.megatron import convert as conv

__all__ = ["SafetensorsCheckpoint", "load_rank"]

VISUAL, LANGUAGE = "model.visual.", "model.language_model."
_PER_EXPERT = re.compile(r"^(.*\.mlp\.experts\.)(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


@dataclass(frozen=True)
class _Source:
    """Where a text tensor (HF causal-LM name) lives on disk: one key, or per-expert keys
    (`gate`/`up` halves of a fused gate_up_proj, or down_proj), indexed by expert."""

    key: str | None = None
    experts: tuple[tuple[str, ...], ...] = ()  # per expert: (gate, up) or (down,)


class SafetensorsCheckpoint:
    """A Hugging Face safetensors checkpoint directory (one file, or an index and its shards).

    `reads` records every slice read, as (on-disk key, rows, columns) (None: all), and
    `bytes_read` their size, so tests can show what a rank did and did not read.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        index = self.directory / "model.safetensors.index.json"
        if index.is_file():
            self.weight_map: dict[str, str] = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        elif (self.directory / "model.safetensors").is_file():
            with safe_open(str(self.directory / "model.safetensors"), "pt") as f:
                self.weight_map = dict.fromkeys(f.keys(), "model.safetensors")
        else:
            raise FileNotFoundError(f"{self.directory}: no model.safetensors or model.safetensors.index.json")
        self._files: dict[str, object] = {}
        self.reads: list[tuple[str, tuple[int, int] | None, tuple[int, int] | None]] = []
        self.bytes_read = 0
        self.sources, self.shapes, self.visual_keys = self._scan()

    def _open(self, key: str):
        file = self.weight_map[key]
        if file not in self._files:
            self._files[file] = safe_open(str(self.directory / file), "pt")
        return self._files[file]

    def _shape(self, key: str) -> tuple[int, ...]:
        return tuple(self._open(key).get_slice(key).get_shape())

    def _scan(self) -> tuple[dict[str, _Source], dict[str, tuple[int, ...]], list[str]]:
        """Text tensors under their HF causal-LM names (sources and shapes), and the tower's keys."""
        sources: dict[str, _Source] = {}
        shapes: dict[str, tuple[int, ...]] = {}
        experts: dict[str, dict[int, dict[str, str]]] = {}
        visual = []
        for key in self.weight_map:
            if key.startswith(VISUAL):
                visual.append(key)
                continue
            name = "model." + key[len(LANGUAGE):] if key.startswith(LANGUAGE) else key
            match = _PER_EXPERT.match(name)
            if match:
                experts.setdefault(match.group(1), {}).setdefault(int(match.group(2)), {})[match.group(3)] = key
                continue
            sources[name] = _Source(key=key)
            shapes[name] = self._shape(key)
        for prefix, by_expert in experts.items():
            count = len(by_expert)
            if sorted(by_expert) != list(range(count)) or any(len(p) != 3 for p in by_expert.values()):
                raise ValueError(f"{self.directory}: experts of {prefix} are incomplete on disk")
            ordered = [by_expert[e] for e in range(count)]
            gate, up, down = (self._shape(ordered[0][p]) for p in ("gate_proj", "up_proj", "down_proj"))
            sources[prefix + "gate_up_proj"] = _Source(experts=tuple((p["gate_proj"], p["up_proj"]) for p in ordered))
            shapes[prefix + "gate_up_proj"] = (count, gate[0] + up[0], gate[1])
            sources[prefix + "down_proj"] = _Source(experts=tuple((p["down_proj"],) for p in ordered))
            shapes[prefix + "down_proj"] = (count, *down)
        return sources, shapes, sorted(visual)

    def _get(self, key: str, rows: tuple[int, int] | None, cols: tuple[int, int] | None,
             expert: int | None = None) -> torch.Tensor:
        sl = self._open(key).get_slice(key)
        index: tuple = () if expert is None else (slice(expert, expert + 1),)
        if rows is not None or cols is not None:
            index += (slice(*rows) if rows is not None else slice(None),)
        if cols is not None:
            index += (slice(*cols),)
        t = sl[index] if index else sl[:]
        if expert is not None:
            t = t[0]
        self.reads.append((key if expert is None else f"{key}[{expert}]", rows, cols))
        self.bytes_read += t.numel() * t.element_size()
        return t

    def read(self, piece: conv.Piece, cols: tuple[int, int] | None = None) -> torch.Tensor:
        """The rows of `piece` (and columns `cols`) of a text tensor, as stored."""
        if piece.name not in self.sources:
            raise KeyError(f"{self.directory}: the checkpoint has no {piece.name}")
        source, rows = self.sources[piece.name], (piece.start, piece.stop)
        if source.key is not None:
            return self._get(source.key, rows, cols, piece.expert)
        keys = source.experts[piece.expert]
        if len(keys) == 1:  # down_proj
            return self._get(keys[0], rows, cols)
        half = self.shapes[piece.name][1] // 2  # gate_up_proj rows: [gate; up]
        parts = [self._get(key, (max(piece.start - low, 0), min(piece.stop - low, half)), cols)
                 for key, low in zip(keys, (0, half)) if piece.start < low + half and piece.stop > low]
        return torch.cat(parts) if len(parts) > 1 else parts[0]

    def read_visual(self) -> dict[str, torch.Tensor]:
        """The vision tower's whole state dict (tower names, `model.visual.` removed)."""
        return {key[len(VISUAL):]: self._get(key, None, None) for key in self.visual_keys}


def _intersect(pieces: list[conv.Piece], ranges: list[tuple[int, int]]) -> list[conv.Piece]:
    """The pieces' rows that fall in `ranges` (rows of the tensor the pieces make), in order;
    neighbouring rows of one tensor are merged into one read."""
    out: list[conv.Piece] = []
    for low, high in ranges:
        offset = 0
        for p in pieces:
            a, b = max(low, offset), min(high, offset + p.rows)
            if a < b:
                part = conv.Piece(p.name, p.start + a - offset, p.start + b - offset, p.expert)
                last = out[-1] if out else None
                if last and (last.name, last.expert, last.stop) == (part.name, part.expert, part.start):
                    out[-1] = conv.Piece(last.name, last.start, part.stop, last.expert)
                else:
                    out.append(part)
            offset += p.rows
    return out


def _read(ckpt: SafetensorsCheckpoint, pieces: list[conv.Piece],
          split: tuple[list[tuple[int, int]], tuple[int, int] | None], dtype: torch.dtype) -> torch.Tensor:
    """The part `split` (row ranges, column range: `split_ranges`) of the tensor `pieces` make, cast to `dtype`."""
    ranges, cols = split
    parts = [ckpt.read(p, cols).to(dtype) for p in _intersect(pieces, ranges)]
    return (torch.cat(parts) if len(parts) > 1 else parts[0]).contiguous()


def load_rank(ckpt: SafetensorsCheckpoint, cfg, *, rank: conv.ShardRank, num_experts: int,
              sections: dict[str, tuple[int, ...]] | None, offset: int, count: int, first: bool, last: bool,
              vision: bool = False, dtype: torch.dtype = torch.float32
              ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """This rank's GPTModel state dict (its pipeline stage, TP/EP shard) and, for a
    vision-language model on the first stage, the tower's state dict; reading only those bytes."""
    from rl.backends.megatron.pipeline import to_stage

    layout = to_stage(conv.mcore_layout(cfg, ckpt.shapes), offset=offset, count=count, first=first, last=last)
    text = {}
    for name, pieces in layout.items():
        r, size, secs, experts = conv.local_entry(name, rank=rank, num_experts=num_experts, sections=sections)
        shape = conv.layout_shape(pieces, ckpt.shapes)
        if experts is None:
            text[name] = _read(ckpt, pieces, conv.split_ranges(name, shape, r, size, secs), dtype)
        else:  # one piece per expert; each expert's matrix split as a dense one
            split = conv.split_ranges(name, shape[1:], r, size)
            text[name] = torch.stack([_read(ckpt, [p], split, dtype) for p in pieces[experts[0]:experts[1]]])
    visual = {k: v.to(dtype) for k, v in ckpt.read_visual().items()} if vision and first else {}
    return text, visual
