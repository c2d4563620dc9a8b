"""The training loops (GRPO, distillation): the drivers that sequence generation, the data plane,
the workers and the maths, kept apart so rl/algorithms/ and rl/distill/ import none of them."""
