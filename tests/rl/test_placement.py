"""rl.placement: the bundles and actor slots of CPU and GPU runs."""

import pytest

from rl.placement import CPUS_PER_GPU, WORKER_CPUS, plan_placement


def test_cpu_run_fractional_cpus_one_bundle_each():
    p = plan_placement(device="cpu", world_size=2)
    assert not p.gpu and p.num_gpus == 0
    assert p.bundles == [{"CPU": WORKER_CPUS}] * 3
    assert [s.bundle for s in p.policy] == [0, 1] and p.generation.bundle == 2
    assert all(s.num_gpus == 0 for s in [*p.policy, p.generation])


def test_gpu_colocated_generation_shares_rank0_gpu():
    p = plan_placement(device="h200", world_size=2, colocated=True)
    assert p.gpu and p.num_gpus == 2
    assert p.bundles == [{"GPU": 1.0, "CPU": float(CPUS_PER_GPU)}] * 2
    assert p.generation.bundle == 0 and p.policy[0].bundle == 0
    assert p.policy[0].num_gpus + p.generation.num_gpus == pytest.approx(1.0)
    assert p.policy[1].num_gpus == 1.0
    # every actor fits its bundle
    for slot in [*p.policy, p.generation]:
        assert slot.num_cpus <= p.bundles[slot.bundle]["CPU"]
    assert p.policy[0].num_cpus + p.generation.num_cpus <= p.bundles[0]["CPU"]


def test_gpu_not_colocated_generation_has_its_own_gpu():
    p = plan_placement(device="h100", world_size=2, colocated=False)
    assert p.num_gpus == 3 and len(p.bundles) == 3
    assert p.generation.bundle == 2 and p.generation.num_gpus == 1.0
    assert all(s.num_gpus == 1.0 for s in p.policy)


def test_one_gpu_colocated():
    p = plan_placement(device="h200", world_size=1)
    assert p.num_gpus == 1 and p.policy[0].bundle == p.generation.bundle == 0


def test_world_size_must_be_positive():
    with pytest.raises(ValueError, match="world size"):
        plan_placement(device="cpu", world_size=0)
