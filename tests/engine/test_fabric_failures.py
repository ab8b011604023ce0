"""Link and switch failures in the engine: a degraded fabric slows steps (slowdown,
no lost work) until repair; a leaf switch takes the nodes under it out of the job."""

from __future__ import annotations

import pytest

from sim.engine import Failure, build_plan, simulate_replica
from tests.conftest import identity_error, tiny

# 4 nodes x 2 GPUs, TP2: two data-parallel rings of 4 nodes, one per rail. Radix 4: a leaf
# holds one rail of 2 nodes; the nodes are scattered so that every ring hop crosses between
# leaves and each leaf's two uplinks carry one flow each (losing one doubles up the other:
# static routing, network.routing: static; adaptive routing would spread the two flows
# over the leaf's surviving uplinks). Step 0.5 s, 1,000 steps, 10 checkpoints of 10 s:
# 600 s without failures.
FABRIC = dict(
    cluster={"nodes": 8, "gpus_per_node": 2, "spare_nodes": 4},
    parallelism={"tensor": 2},
    network={"switch_radix": 8, "placement": "scattered", "routing": "static"},
    performance={"overlap": 0.0},
    failures=[
        {"name": "cable", "scope": "link", "mtbf_hours": 1e15, "repair_hours": 0.05},
        {
            "name": "switch",
            "scope": "switch",
            "mtbf_hours": 1e15,
            "detect_minutes": 1,
            "repair_hours": 0.5,
        },
    ],
)


def fabric_plan(**changes):
    return build_plan(tiny(**{**FABRIC, **changes}))


def used_cable(plan) -> int:
    """The cable whose loss costs most (its flows share the leaf's other uplink)."""
    costs = [plan.fabric.extra_step_s(frozenset([name])) for name in plan.fabric.cables]
    return max(range(len(costs)), key=costs.__getitem__)


def test_plan_knows_the_fabric():
    plan = fabric_plan()
    assert plan.fabric is not None
    assert len(plan.fabric.cables) == 16  # 4 leaves x 4 uplinks
    assert plan.failure_classes[0].components == 16
    assert plan.failure_classes[1].components == 4 + 2  # leaves + spines


def test_a_failed_cable_slows_steps_until_repair_without_losing_work():
    plan = fabric_plan()
    cable = used_cable(plan)
    extra = plan.fabric.extra_step_s(frozenset([plan.fabric.cables[cable]]))
    assert extra > 0
    failure = Failure(0, "cable", 80.0, (), 0.0, False, 180.0, scope="link", component=cable)
    r = simulate_replica(plan, 0, 1, injected=[failure])
    assert r.failures == 1 and r.restarts == 0
    assert r.lost_work_hours == 0 and r.downtime_hours == 0
    assert r.slowdown_hours > 0
    assert r.wall_hours * 3600 == pytest.approx(350 + r.slowdown_hours * 3600)
    degraded_steps = r.slowdown_hours * 3600 / extra
    assert 0 < degraded_steps < 770  # only while the cable was down (failed at step 240)
    assert identity_error(r) < 1e-9


def test_an_unused_cable_costs_nothing():
    plan = fabric_plan()
    unused = next((i for i, n in enumerate(plan.fabric.cables) if n not in plan.fabric.used), None)
    if unused is None:
        pytest.skip("every cable carries gradient traffic in this layout")
    r = simulate_replica(
        plan,
        0,
        1,
        injected=[Failure(0, "cable", 80.0, (), 0.0, False, 180.0, scope="link", component=unused)],
    )
    assert r.slowdown_hours == 0 and r.wall_hours * 3600 == pytest.approx(350)


def test_a_leaf_switch_failure_takes_its_nodes_out():
    plan = fabric_plan()
    failure = Failure(1, "switch", 80.0, (), 60.0, True, 1800.0, scope="switch", component=0)
    r = simulate_replica(plan, 0, 1, injected=[failure])
    assert r.nodes_replaced == 4  # the four nodes whose rail 0 hangs off leaf 0
    assert r.restarts == 1 and r.lost_work_hours * 3600 == pytest.approx(
        10.0
    )  # 80 s: 10 s past a checkpoint
    assert identity_error(r) < 1e-9
    # without enough spares the restart policy waits for the switch repair
    short = simulate_replica(
        fabric_plan(cluster={**FABRIC["cluster"], "spare_nodes": 3}), 0, 1, injected=[failure]
    )
    assert short.node_wait_hours > 0 and identity_error(short) < 1e-9


def test_a_partitioned_fabric_stops_the_job_until_a_repair():
    plan = fabric_plan()
    leaf0 = [i for i, n in enumerate(plan.fabric.cables) if n.startswith("leaf0-")]
    cut = [
        Failure(0, "cable", 80.0, (), 60.0, False, 36000.0, scope="link", component=i)
        for i in leaf0
    ]
    r = simulate_replica(plan, 0, 1, injected=cut)
    assert r.finished and r.failures == len(leaf0)
    assert r.restarts >= 1 and r.node_wait_hours > 0  # waited for the fabric, not for nodes
    assert identity_error(r) < 1e-9


def test_random_fabric_failures_keep_the_identity():
    plan = fabric_plan(
        failures=[
            {"name": "cable", "scope": "link", "mtbf_hours": 0.5, "repair_hours": 0.02},
            {
                "name": "switch",
                "scope": "switch",
                "mtbf_hours": 2.0,
                "detect_minutes": 1,
                "repair_hours": 0.2,
            },
        ]
    )
    for replica in range(40):
        r = simulate_replica(plan, replica, 3)
        assert identity_error(r) < 1e-9
        assert r.finished
