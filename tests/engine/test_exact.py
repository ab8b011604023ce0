"""Tiny deterministic scenarios with exact answers (CONVENTIONS: tests/engine)."""

from __future__ import annotations

import pytest

from sim.engine import Failure, build_plan, simulate_replica
from tests.conftest import identity_error, tiny

NEVER = [{"name": "crash", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1}]
NODE_NEVER = [
    {"name": "node", "scope": "node", "mtbf_hours": 1e15, "detect_minutes": 1, "repair_hours": 1}
]


def crash(t: float, detect_s: float = 60.0) -> Failure:
    return Failure(0, "crash", t, (), detect_s, False, 0.0)


def node_failure(
    t: float, node: int = 0, detect_s: float = 60.0, repair_s: float = 3600.0
) -> Failure:
    return Failure(0, "node", t, (node,), detect_s, True, repair_s, scope="node")


def test_no_failures_wall_is_steps_times_step_plus_checkpoints():
    r = simulate_replica(build_plan(tiny()), 0, 1)
    assert r.finished
    assert r.wall_hours * 3600 == pytest.approx(1000 * 1.0 + 10 * 10.0, abs=1e-9)
    assert r.checkpoints_written == 10
    assert r.lost_work_hours == r.downtime_hours == r.slowdown_hours == 0
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(100.0)
    assert r.goodput == pytest.approx(1000 / 1100)
    assert identity_error(r) < 1e-9


def test_no_failures_with_a_partial_last_interval():
    r = simulate_replica(build_plan(tiny(checkpoint={"interval_steps": 300})), 0, 1)
    # checkpoints at 300, 600, 900 and the final one at 1000
    assert r.checkpoints_written == 4
    assert r.wall_hours * 3600 == pytest.approx(1000 + 4 * 10.0)


def test_one_failure_loses_work_since_the_last_durable_checkpoint():
    plan = build_plan(tiny(failures=NEVER))
    r = simulate_replica(plan, 0, 1, injected=[crash(250.0)])
    # checkpoints durable at 110 and 220 s; the failure at 250 s is 30 s into the next interval
    assert r.lost_work_hours * 3600 == pytest.approx(30.0)
    # detection 60 s + restart 600 s + load of the step-200 checkpoint 5 s
    assert r.downtime_hours * 3600 == pytest.approx(665.0)
    assert r.wall_hours * 3600 == pytest.approx(1100 + 30 + 665)
    assert r.failures == 1 and r.restarts == 1
    assert identity_error(r) < 1e-9


def test_failure_during_a_checkpoint_write_discards_it():
    r = simulate_replica(build_plan(tiny(failures=NEVER)), 0, 1, injected=[crash(215.0)])
    # at 215 s the second checkpoint (written 210-220 s) is 5 s from durable: lost 100 s compute + 5 s write
    assert r.lost_work_hours * 3600 == pytest.approx(105.0)
    assert r.checkpoints_written == 10
    assert identity_error(r) < 1e-9


def test_failure_before_the_first_checkpoint_restarts_without_a_load():
    r = simulate_replica(build_plan(tiny(failures=NEVER)), 0, 1, injected=[crash(50.0)])
    assert r.lost_work_hours * 3600 == pytest.approx(50.0)
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600)


def test_failure_during_restart_aborts_it():
    # second failure 100 s into the first restart (restart begins at 250 + 60 = 310 s)
    r = simulate_replica(
        build_plan(tiny(failures=NEVER)), 0, 1, injected=[crash(250.0), crash(410.0)]
    )
    assert r.restarts == 2
    assert r.lost_work_hours * 3600 == pytest.approx(30.0)  # nothing ran during the restart
    assert r.downtime_hours * 3600 == pytest.approx(60 + 100 + 60 + 605)
    assert identity_error(r) < 1e-9


def test_failures_in_the_detection_window_merge():
    r = simulate_replica(
        build_plan(tiny(failures=NEVER)), 0, 1, injected=[crash(250.0), crash(280.0)]
    )
    assert r.failures == 2 and r.restarts == 1
    assert r.downtime_hours * 3600 == pytest.approx(665.0)


def test_node_failure_swaps_in_a_spare_at_once():
    plan = build_plan(tiny(failures=NODE_NEVER, cluster={"spare_nodes": 1}))
    r = simulate_replica(plan, 0, 1, injected=[node_failure(250.0)])
    assert r.nodes_replaced == 1 and r.node_wait_hours == 0
    assert r.wall_hours * 3600 == pytest.approx(1100 + 30 + 665)


def test_restart_policy_waits_for_the_repaired_node():
    plan = build_plan(tiny(failures=NODE_NEVER, cluster={"spare_nodes": 0}))
    r = simulate_replica(plan, 0, 1, injected=[node_failure(250.0, repair_s=3600.0)])
    assert r.finished
    assert r.node_wait_hours > 0  # repair time is drawn (exponential, mean 1 h)
    assert r.downtime_hours * 3600 == pytest.approx(60 + r.node_wait_hours * 3600 + 605)
    assert identity_error(r) < 1e-9


def test_elastic_shrinks_then_grows_back_at_a_checkpoint():
    plan = build_plan(
        tiny(
            failures=NODE_NEVER,
            cluster={"spare_nodes": 0, "gpus_per_node": 2},
            recovery={"policy": "elastic", "elastic_min_fraction": 0.5, "rescale_minutes": 1},
        )
    )
    # 2 nodes x 2 GPUs = 4 data-parallel replicas; losing a node halves them (steps take 2 s)
    r = simulate_replica(plan, 0, 1, injected=[node_failure(250.0, repair_s=1e9)])
    assert r.finished and r.node_wait_hours == 0
    assert r.slowdown_hours * 3600 == pytest.approx(
        800 * 1.0
    )  # 800 remaining steps at 2 s instead of 1 s
    assert r.ideal_hours * 3600 == pytest.approx(1000.0)
    # checkpoints from one node are written at the client's 100 GB/s ... still tier-bound at 1 GB/s
    assert identity_error(r) < 1e-9
    grown = simulate_replica(plan, 0, 1, injected=[node_failure(250.0, repair_s=1.0)])
    # the node is back during the restart; the job grows at its first checkpoint, so exactly one
    # interval (100 steps) ran at half speed
    assert grown.slowdown_hours * 3600 == pytest.approx(100.0)
    assert grown.downtime_hours * 3600 == pytest.approx(60 + 605 + 60)  # + one 60 s rescale
    assert identity_error(grown) < 1e-9


def test_horizon_ends_an_unfinished_replica():
    plan = build_plan(tiny(simulation={"horizon_days": 500 / 86400}))
    r = simulate_replica(plan, 0, 1)
    assert not r.finished
    assert r.wall_hours * 3600 == pytest.approx(500.0)
    assert r.time_to_train_days != r.time_to_train_days  # NaN: it never finished
    assert r.ideal_hours * 3600 == pytest.approx(400.0)  # four durable checkpoints of 100 steps
    assert r.lost_work_hours * 3600 == pytest.approx(500 - 440)
    assert identity_error(r) < 1e-9


def test_timeline_covers_the_wall_clock():
    plan = build_plan(tiny(failures=NEVER))
    r = simulate_replica(plan, 0, 1, injected=[crash(250.0)], timeline=True)
    assert {e["name"] for e in r.timeline} >= {"train", "lost work", "detect", "restart"}
    assert sum(e["duration_s"] for e in r.timeline) == pytest.approx(r.wall_hours * 3600)
