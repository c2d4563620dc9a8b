"""A stand-in for fla-core with fla's module layout, for tests/rl/test_gdn_kernels.py.

Like fla-core 0.6.0 on a Hopper GPU under Triton 3.4-3.7.0, its gated delta rule's backward calls
`fla.ops.gated_delta_rule.chunk.chunk_bwd_dqkwg` through that module's globals, and its own
version of that function refuses to run. The forward and the gradients are the torch reference
(transformers' own fallback), so a model through it trains exactly as without fla.
"""
