"""The in-memory checkpoint level (tiny scenario, sync tier checkpoints every 100 steps,
an in-memory checkpoint every 20 steps taking 0.1 s): a single-node failure rolls back
only to the newest in-memory checkpoint and restarts without a tier load; a job-wide
failure rolls back to the tier."""

from __future__ import annotations

import pytest

from sim.engine import Failure, build_plan, simulate_replica
from tests.conftest import identity_error, tiny

CLASSES = [
    {"name": "node", "scope": "node", "mtbf_hours": 1e15, "detect_minutes": 1, "repair_hours": 1},
    {"name": "crash", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1},
]


def plan():
    checkpoint = {"interval_steps": 100, "memory_every_steps": 20, "snapshot_GB_s_per_node": 50.0}
    return build_plan(tiny(checkpoint=checkpoint, failures=CLASSES, cluster={"spare_nodes": 1}))


def test_in_memory_checkpoints_cost_their_snapshots():
    p = plan()
    assert p.memory_s(2) == pytest.approx(0.1)
    r = simulate_replica(p, 0, 1)
    # 4 in-memory checkpoints per interval (after steps 20, 40, 60, 80), 10 intervals
    assert r.wall_hours * 3600 == pytest.approx(1000 + 100 + 40 * 0.1)
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(100 + 4.0)


def test_a_single_node_failure_rolls_back_to_the_newest_in_memory_checkpoint():
    # tier checkpoints durable at 110.4 and 220.8 s; the in-memory one after step 220 completes
    # at 220.8 + 20 + 0.1 = 240.9 s; the node fails at 250 s
    node = Failure(0, "node", 250.0, (0,), 60.0, True, 3600.0, scope="node")
    r = simulate_replica(plan(), 0, 1, injected=[node])
    assert r.lost_work_hours * 3600 == pytest.approx(250.0 - 240.9)
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600)  # no load from the tier
    assert r.wall_hours * 3600 == pytest.approx(1104 + 9.1 + 660)
    assert identity_error(r) < 1e-9


def test_a_job_wide_failure_rolls_back_to_the_tier():
    crash = Failure(1, "crash", 250.0, (), 60.0, False, 0.0)
    r = simulate_replica(plan(), 0, 1, injected=[crash])
    assert r.lost_work_hours * 3600 == pytest.approx(250.0 - 220.8)
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600 + 5)
    assert identity_error(r) < 1e-9


def test_two_nodes_failing_together_lose_the_peer_copies():
    first = Failure(0, "node", 250.0, (0,), 60.0, True, 3600.0, scope="node")
    second = Failure(0, "node", 260.0, (1,), 60.0, True, 3600.0, scope="node")
    r = simulate_replica(
        build_plan(
            tiny(
                checkpoint={
                    "interval_steps": 100,
                    "memory_every_steps": 20,
                    "snapshot_GB_s_per_node": 50.0,
                },
                failures=CLASSES,
                cluster={"spare_nodes": 2},
            )
        ),
        0,
        1,
        injected=[first, second],
    )
    assert r.lost_work_hours * 3600 == pytest.approx(250.0 - 220.8)  # back to the tier
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600 + 5)
    assert identity_error(r) < 1e-9
