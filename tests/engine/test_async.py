"""Async checkpoints: a blocking device-to-host snapshot, then a background drain; the
checkpoint is durable only when the drain ends (tiny scenario: 10 GB over 2 nodes,
snapshot 5 GB per node at 5 GB/s = 1 s, drain 10 GB at 1 GB/s = 10 s)."""

from __future__ import annotations

import pytest

from sim.engine import Failure, build_plan, simulate_replica
from tests.conftest import identity_error, tiny

NEVER = [{"name": "crash", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1}]


def async_plan(interval=100, **changes):
    checkpoint = {"interval_steps": interval, "mode": "async", "snapshot_GB_s_per_node": 5.0}
    return build_plan(tiny(checkpoint=checkpoint, failures=NEVER, **changes))


def crash(t: float) -> Failure:
    return Failure(0, "crash", t, (), 60.0, False, 0.0)


def test_no_failures_only_snapshots_block():
    plan = async_plan()
    assert (plan.snapshot_s(2), plan.drain_s(2)) == (1.0, 10.0)
    r = simulate_replica(plan, 0, 1)
    # 1,000 s compute + 10 snapshots of 1 s + the final checkpoint's drain
    assert r.wall_hours * 3600 == pytest.approx(1000 + 10 + 10)
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(20.0)
    assert r.checkpoints_written == 10 and r.checkpoints_lost == 0
    sync = simulate_replica(build_plan(tiny(failures=NEVER)), 0, 1)
    assert sync.checkpoint_stall_hours == pytest.approx(5 * r.checkpoint_stall_hours)


def test_the_next_snapshot_waits_for_the_previous_drain():
    r = simulate_replica(async_plan(interval=5), 0, 1)
    # 200 checkpoints: the first cycle 5 + 1 s, then 199 cycles of max(5, 10) + 1 s, and the last drain
    assert r.wall_hours * 3600 == pytest.approx(6 + 199 * 11 + 10)
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(r.wall_hours * 3600 - 1000)


def test_a_failure_inside_a_drain_loses_that_checkpoint():
    # snapshot 1 ends at 101 s and drains until 111 s; the failure at 106 s rolls back to step 0
    r = simulate_replica(async_plan(), 0, 1, injected=[crash(106.0)])
    assert r.checkpoints_lost == 1
    assert r.lost_work_hours * 3600 == pytest.approx(106.0)
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600)  # no checkpoint to load
    assert identity_error(r) < 1e-9


def test_a_failure_after_the_drain_keeps_the_checkpoint():
    r = simulate_replica(async_plan(), 0, 1, injected=[crash(150.0)])
    assert r.checkpoints_lost == 0
    assert r.lost_work_hours * 3600 == pytest.approx(150.0 - 101.0)  # compute since the snapshot
    assert r.downtime_hours * 3600 == pytest.approx(60 + 600 + 5)  # load the step-100 checkpoint
    assert identity_error(r) < 1e-9
