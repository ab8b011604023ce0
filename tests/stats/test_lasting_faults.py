"""Lasting faults (issue 16): a failure does not turn a healthy node into a lemon.

Four job nodes and four warm spares, no lemons, one node class with an MTBF of 1,000 h,
1,000 h of compute in 36 s steps with a free checkpoint after every step, 6-minute
detection and an instant restart, every repair an automated false fix, faulty nodes
failing 100x as often. Transient faults only (fault_prob 0): the failures are
Poisson(4·1000/1000) = Poisson(4), none of them a lemon's, and each costs its 0.1 h of
detection and about half a step of lost work, so the wall is ≈ 1000 + 4·(0.1 + 0.005) h.
(The engine used to make every failed node a lemon: 49 failures, 45 of them "lemon".)
"""

from __future__ import annotations

import math
from unittest import mock

import pytest

from sim.engine import build_plan, simulate
from sim.engine.cluster import Cluster
from sim.engine.events import Failure
from sim.engine.simulate import simulate_replica
from sim.model.scenario import load_document
from sim.runs.montecarlo import run
from tests.conftest import TINY, merge, tiny

REPLICAS = 400
STEP_S = 36.0  # 100,000 steps of 1,000 tokens make 1,000 h


def reproduction(fault_prob: float = 0.0) -> dict:
    return merge(
        TINY,
        {
            "model": {"tokens": 1.0e8, "flops_per_token": 6.0e9 * 2 * STEP_S},  # 8 GPUs
            "cluster": {"nodes": 4, "spare_nodes": 4, "lemon_rate_multiplier": 100},
            "storage": {
                "checkpoint_tier": {"write_GB_s": 1e7, "read_GB_s": 1e7},
                "client_GB_s_per_node": 1e7,
            },
            "checkpoint": {"interval_steps": 1},
            "failures": [
                {
                    "name": "node",
                    "scope": "node",
                    "mtbf_hours": 1000.0,
                    "detect_minutes": 6,
                    "fault_prob": fault_prob,
                }
            ],
            "recovery": {"restart_minutes": 0},
            "repair": {"escalate_prob": 0.0, "auto_false_fix_prob": 1.0},
            "simulation": {"horizon_days": 3650},
        },
    )


@pytest.mark.montecarlo
def test_a_false_fix_does_not_turn_a_healthy_node_into_a_lemon():
    table = run(load_document(reproduction(), "repro"), REPLICAS, 16, workers=1, progress=False)
    assert (table["error"] == "").all() and table["finished"].all()
    failures = table["failures"]
    se = failures.std(ddof=1) / math.sqrt(REPLICAS)
    assert abs(failures.mean() - 4.0) < 3 * se
    assert failures.var(ddof=1) == pytest.approx(failures.mean(), rel=0.25)  # Poisson
    assert (table["failures_lemon"] == 0).all()
    # every failure: 0.1 h of detection, and the work since its step began (≤ 36 s)
    assert table["downtime_hours"].to_numpy() == pytest.approx(0.1 * failures.to_numpy())
    assert (table["lost_work_hours"] <= failures * STEP_S / 3600 + 1e-9).all()
    wall = table["wall_hours"]
    expected = 1000.0 + 4.0 * (0.1 + STEP_S / 2 / 3600)
    assert abs(wall.mean() - expected) < 3 * wall.std(ddof=1) / math.sqrt(REPLICAS)
    assert wall.mean() == pytest.approx(1000.4, abs=0.1)


@pytest.mark.montecarlo
def test_lasting_faults_make_lemons_again():
    # fault_prob 1: every failure leaves a lasting fault no repair clears; once the spares
    # taken before them are used up, the faulty nodes go back in and failures multiply
    table = run(load_document(reproduction(1.0), "repro"), 100, 16, workers=1, progress=False)
    assert table["failures"].mean() > 10
    assert table["failures_lemon"].sum() > 0.5 * table["failures"].sum()


def lasting_share(fault_prob: float, seeds: int) -> tuple[int, int]:
    """(failed nodes that came back with a lasting fault, failed nodes): 40 failures of
    slot 0, each of a fresh node (40 spares, taken oldest first; every repair is a quick
    false fix, so the fault a failure left stays)."""
    plan = build_plan(
        tiny(
            model={"tokens": 1.0e8},  # 100,000 s of compute: the failures all strike
            failures=[
                {
                    "name": "node",
                    "scope": "node",
                    "mtbf_hours": 1e15,
                    "detect_minutes": 1,
                    "fault_prob": fault_prob,
                }
            ],
            cluster={"spare_nodes": 40},
            repair={"auto_minutes": 1, "escalate_prob": 0.0, "auto_false_fix_prob": 1.0},
        )
    )
    injected = [
        Failure(0, "node", 250.0 + 1000.0 * k, (0,), 60.0, True, 3600.0, scope="node")
        for k in range(40)
    ]
    made: list[Cluster] = []

    class Kept(Cluster):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    faulty = failed = 0
    for seed in range(seeds):
        with mock.patch.object(simulate, "Cluster", Kept):
            r = simulate_replica(plan, 0, seed, injected=injected)
        assert r.failures == r.nodes_replaced == 40
        # node 0, then spares 2 ... 40 (oldest first), each failed once
        nodes = [0, *range(2, 41)]
        faulty += int(made[-1].faulty[nodes].sum())
        failed += len(nodes)
    return faulty, failed


@pytest.mark.parametrize("fault_prob", [0.0, 1.0])
def test_fault_prob_0_and_1_leave_no_fault_or_always_one(fault_prob):
    faulty, failed = lasting_share(fault_prob, seeds=2)
    assert faulty == fault_prob * failed


@pytest.mark.montecarlo
def test_fault_prob_is_the_share_of_failures_that_leave_a_lasting_fault():
    faulty, failed = lasting_share(0.5, seeds=10)
    share = faulty / failed
    assert abs(share - 0.5) < 3 * math.sqrt(0.25 / failed)
