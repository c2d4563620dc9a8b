"""The engine's Ray cluster: starting or joining Ray (ray_cluster), where each worker runs
(placement), free ports for process groups (ports), and how workers fail (worker_errors)."""
