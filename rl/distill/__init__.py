"""Cross-tokenizer distillation: chunk alignment, the token projection, the loss, the driver."""

from rl.distill.align import Chunk, align, canonical_tokens
from rl.distill.loss import DistillConfig, chunk_mask, chunk_means, xtoken_loss
from rl.distill.projection import Projection, build_projection, vocab_size

__all__ = ["Chunk", "DistillConfig", "Projection", "align", "build_projection", "canonical_tokens",
           "chunk_mask", "chunk_means", "vocab_size", "xtoken_loss"]
