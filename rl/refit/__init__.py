"""Refit: the trainer's new weights to the generation replicas after each step, without a trip
through host memory. buckets.py packs them into flat per-dtype buckets a colocated replica copies
out of over CUDA IPC; channel.py broadcasts the same buckets to a generator on a GPU of its own.
The two are one mechanism, so they sit together here; nothing is re-exported."""
