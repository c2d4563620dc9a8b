"""rl.cluster.placement: the bundles and actor slots of CPU and GPU runs, and their nodes (rl.cluster.assign_nodes)."""

import pytest

from rl.cluster.placement import CPUS_PER_GPU, WORKER_CPUS, generation_replicas, plan_placement
from rl.cluster.ray_cluster import assign_nodes


def test_cpu_run_fractional_cpus_one_bundle_each():
    p = plan_placement(device="cpu", world_size=2)
    assert not p.gpu and p.num_gpus == 0
    assert p.bundles == [{"CPU": WORKER_CPUS}] * 3
    assert [s.bundle for s in p.policy] == [0, 1] and [s.bundle for s in p.generation] == [2]
    assert all(s.num_gpus == 0 for s in [*p.policy, *p.generation])


def test_cpu_replicas_are_cpu_actors_of_their_own():
    p = plan_placement(device="cpu", world_size=2, replicas=3)
    assert p.bundles == [{"CPU": WORKER_CPUS}] * 5 and p.node_of == [0] * 5
    assert [s.bundle for s in p.generation] == [2, 3, 4] and all(s.num_gpus == 0 for s in p.generation)


def test_gpu_colocated_generation_is_one_replica_per_gpu_beside_its_rank():
    p = plan_placement(device="h200", world_size=2, colocated=True)
    assert p.gpu and p.num_gpus == 2
    assert p.bundles == [{"GPU": 1.0, "CPU": float(CPUS_PER_GPU)}] * 2
    assert [s.bundle for s in p.generation] == [0, 1] and [s.bundle for s in p.policy] == [0, 1]
    for rank, replica in zip(p.policy, p.generation):  # the GPU split between a rank and its replica
        assert rank.num_gpus + replica.num_gpus == pytest.approx(1.0)
        assert rank.num_cpus + replica.num_cpus <= p.bundles[rank.bundle]["CPU"]


def test_gpu_colocated_fewer_replicas_leave_the_other_ranks_their_whole_gpu():
    p = plan_placement(device="h200", world_size=4, replicas=1)
    assert [s.bundle for s in p.generation] == [0]
    assert p.policy[0].num_gpus + p.generation[0].num_gpus == pytest.approx(1.0)
    assert [s.num_gpus for s in p.policy[1:]] == [1.0] * 3
    with pytest.raises(ValueError, match="generation.replicas: 5 colocated replicas need as many GPUs"):
        plan_placement(device="h200", world_size=4, replicas=5)


def test_gpu_not_colocated_generation_has_its_own_gpu():
    p = plan_placement(device="h100", world_size=2, colocated=False)
    assert p.num_gpus == 3 and len(p.bundles) == 3
    assert [s.bundle for s in p.generation] == [2] and p.generation[0].num_gpus == 1.0
    assert all(s.num_gpus == 1.0 for s in p.policy)


def test_one_gpu_colocated():
    p = plan_placement(device="h200", world_size=1)
    assert p.num_gpus == 1 and p.policy[0].bundle == p.generation[0].bundle == 0


def test_replicas_derived_one_per_gpu_when_colocated_on_gpus_else_one():
    assert generation_replicas(None, device="h200", world_size=16, colocated=True) == 16
    assert generation_replicas(None, device="h200", world_size=16, colocated=False) == 1
    assert generation_replicas(None, device="cpu", world_size=2, colocated=True) == 1
    assert generation_replicas(3, device="cpu", world_size=2, colocated=True) == 3


def test_world_size_must_be_positive():
    with pytest.raises(ValueError, match="world size"):
        plan_placement(device="cpu", world_size=0)


def test_ranks_fill_nodes_in_order_and_generation_sits_beside_rank0():
    p = plan_placement(device="h200", world_size=16, nodes=2)
    assert p.nodes == 2 and p.node_of == [0] * 8 + [1] * 8  # TP groups of consecutive ranks stay in a node
    assert p.node_bundles(1) == [{"GPU": 1.0, "CPU": float(CPUS_PER_GPU)}] * 8
    cpu = plan_placement(device="cpu", world_size=2, nodes=2)
    assert cpu.node_of == [0, 1, 0] and cpu.policy[1].bundle == 1 and cpu.generation[0].bundle == 2
    apart = plan_placement(device="h100", world_size=4, nodes=2, colocated=False)
    assert apart.node_of == [0, 0, 1, 1, 0] and apart.generation[0].bundle == 4
    beside = plan_placement(device="h200", world_size=4, nodes=2)  # each replica on its rank's node
    assert [beside.node_of[s.bundle] for s in beside.generation] == [0, 0, 1, 1]


def test_one_node_by_default_and_ranks_must_split_evenly():
    assert plan_placement(device="cpu", world_size=3).node_of == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="cluster.nodes"):
        plan_placement(device="cpu", world_size=3, nodes=2)


def _node(node_id: str, address: str = "10.0.0.1", alive: bool = True, **resources: float) -> dict:
    return {"NodeID": node_id, "NodeManagerAddress": address, "Alive": alive, "Resources": resources}


def test_nodes_are_assigned_driver_first_then_by_address_skipping_dead_and_small_ones():
    p = plan_placement(device="h200", world_size=4, nodes=2)
    nodes = [_node("c", "10.0.0.3", GPU=2, CPU=8), _node("b", "10.0.0.2", alive=False, GPU=2, CPU=8),
             _node("cpu-head", "10.0.0.0", CPU=8), _node("a", "10.0.0.2", GPU=2, CPU=8),
             _node("d", "10.0.0.1", GPU=1, CPU=8)]
    assert assign_nodes(p, nodes, driver_node="c") == ["c", "a"]
    assert assign_nodes(p, nodes, driver_node="cpu-head") == ["a", "c"]  # a GPU-less head holds no rank


def test_too_few_fitting_nodes_name_the_key():
    p = plan_placement(device="cpu", world_size=2, nodes=2)
    with pytest.raises(ValueError, match=r"cluster.nodes: 2 nodes asked for, node 1 needs \{'CPU': 0.25\}"):
        assign_nodes(p, [_node("only", CPU=1)], driver_node="only")
