from fla.ops.gated_delta_rule.chunk import chunk_gated_delta_rule

__all__ = ["chunk_gated_delta_rule"]
