"""Data reads sharing the checkpoint tier (tiny scenario: 1 s steps of 1,000 tokens; the
tier writes 1 GB/s and reads 2 GB/s; 10 GB checkpoints)."""

from __future__ import annotations

import pytest

from sim.engine import build_plan, simulate_replica
from tests.conftest import identity_error, tiny

ASYNC = {"interval_steps": 100, "mode": "async", "snapshot_GB_s_per_node": 5.0}


def run(storage: dict, checkpoint: dict | None = None):
    p = build_plan(tiny(storage=storage, checkpoint=checkpoint or {"interval_steps": 100}))
    return p, simulate_replica(p, 0, 1)


def test_reads_starved_during_a_drain_slow_the_steps_and_the_drain():
    # 1.5 GB of data per step: the tier's 1 GB/s is split 0.5 / 0.5 between the reads and the drain,
    # so steps overlapping a drain take 1.5 / 0.5 = 3 s and a drain takes 10 / 0.5 = 20 s
    p, r = run({"data_tier": "shared", "data_bytes_per_token": 1.5e6}, ASYNC)
    assert p.slow_step_s(2, p.full_replicas) == pytest.approx(3.0)
    assert p.drain_s(2) == pytest.approx(20.0)
    window = 20 + (100 - 20 / 3)  # 20 s at 3 s per step, the rest at 1 s
    assert r.slowdown_hours * 3600 == pytest.approx(9 * (window - 100))
    assert r.wall_hours * 3600 == pytest.approx(101 + 9 * (window + 1) + 20)
    assert identity_error(r) < 1e-9
    _, separate = run({"data_tier": "separate", "data_bytes_per_token": 1.5e6}, ASYNC)
    assert separate.slowdown_hours == 0 and separate.wall_hours * 3600 == pytest.approx(1020)


def test_a_tier_too_thin_for_the_reads_slows_every_step():
    _, r = run({"data_tier": "shared", "data_bytes_per_token": 3e6})  # 3 GB per step at 2 GB/s
    assert r.slowdown_hours * 3600 == pytest.approx(1000 * 0.5)
    assert identity_error(r) < 1e-9


def test_other_tenants_thin_the_tier():
    _, r = run({"background_load": 0.5})
    assert r.checkpoint_stall_hours * 3600 == pytest.approx(10 * 20.0)  # 10 GB at 0.5 GB/s
