"""The incident log (`simulate_replica(..., incidents=True)`): one exact row per failure
that struck, with the node's identity, its lasting fault and its drawn repair path.

The tiny scenario (tests/conftest.py): 1 s steps, 1,000 steps, a 10 s checkpoint every
100 steps, restart 600 s + 5 s load, detection 60 s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.engine import Failure, build_plan, simulate_replica
from sim.engine.streams import stream
from tests.conftest import identity_error, tiny

NODE = {"name": "node", "scope": "node", "mtbf_hours": 1e15, "detect_minutes": 1, "repair_hours": 1}
CRASH = {"name": "crash", "scope": "job", "mtbf_hours": 1e15, "detect_minutes": 1}


def node_failure(t: float, slot: int) -> Failure:
    return Failure(0, "node", t, (slot,), 60.0, True, 3600.0, scope="node")


def crash(t: float) -> Failure:
    return Failure(1, "crash", t, (), 60.0, False, 0.0)


def standard_exponentials(name: str, n: int) -> list[float]:
    """The first `n` draws of replica 0, seed 1's stream `name` (class 0), as `Draws` takes
    them: a block of standard exponentials."""
    return stream(1, 0, name, 0).standard_exponential(256)[:n].tolist()


def test_flat_repairs_and_a_job_failure_give_exact_rows():
    plan = build_plan(tiny(failures=[NODE, CRASH], cluster={"spare_nodes": 1}))
    injected = [node_failure(250.0, 0), crash(600.0), node_failure(1000.0, 1)]
    r = simulate_replica(plan, 0, 1, injected=injected, incidents=True)
    assert identity_error(r) < 1e-9 and r.failures == 3
    # the flat repairs (mean 1 h) start when the failure is detected, 1 minute after it
    e1, e2 = (e + 1 / 60 for e in standard_exponentials("repair_times", 2))
    # node 0 failed in slot 0 (spare node 2 took its place); the job crashed during the
    # restart, and node 1 failed in slot 1 during the next one
    assert r.incidents == [
        {
            "time_h": 250.0 / 3600,
            "node": 0,
            "class": "node",
            "scope": "node",
            "repair_hours": pytest.approx(e1),
            "lasting_fault": False,
            "repair_path": "repair",
        },
        {
            "time_h": 600.0 / 3600,
            "node": -1,
            "class": "crash",
            "scope": "job",
            "repair_hours": pytest.approx(math.nan, nan_ok=True),
            "lasting_fault": False,
            "repair_path": "",
        },
        {
            "time_h": 1000.0 / 3600,
            "node": 1,
            "class": "node",
            "scope": "node",
            "repair_hours": pytest.approx(e2),
            "lasting_fault": False,
            "repair_path": "repair",
        },
    ]
    assert "incidents" not in r.row() and "timeline" not in r.row()


def test_a_false_fix_brings_the_node_back_with_its_lasting_fault():
    # every failure leaves a lasting fault and every automated repair is a false fix: node 0
    # fails healthy, comes back faulty after its repair and fails again in slot 1
    plan = build_plan(
        tiny(
            failures=[dict(NODE, fault_prob=1.0)],
            cluster={"spare_nodes": 1},
            repair={"auto_minutes": 1, "escalate_prob": 0.0, "auto_false_fix_prob": 1.0},
        )
    )
    injected = [node_failure(250.0, 0), node_failure(1000.0, 1), node_failure(1500.0, 1)]
    r = simulate_replica(plan, 0, 1, injected=injected, incidents=True)
    # automated repairs of 1 minute on average, from the detection, 1 minute after it
    autos = [(60.0 + 60.0 * e) / 3600 for e in standard_exponentials("repair_pipeline", 3)]
    rows = r.incidents
    assert [row["node"] for row in rows] == [0, 1, 0]
    assert [row["lasting_fault"] for row in rows] == [False, False, True]
    assert [row["repair_path"] for row in rows] == ["auto:false_fix"] * 3
    assert [row["repair_hours"] for row in rows] == pytest.approx(autos)
    assert r.failures_lemon == 1


def test_no_log_unless_asked():
    plan = build_plan(tiny(failures=[NODE], cluster={"spare_nodes": 1}))
    assert simulate_replica(plan, 0, 1, injected=[node_failure(250.0, 0)]).incidents is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_log_agrees_with_the_counts(seed):
    # drawn failures with lemons, the pipeline with technicians and retirement: one row per
    # failure counted, per class; lasting faults of attributable classes are failures_lemon
    plan = build_plan(
        tiny(
            failures=[
                dict(NODE, mtbf_hours=0.3, fault_prob=0.3),
                dict(CRASH, mtbf_hours=0.5),
            ],
            cluster={"nodes": 8, "spare_nodes": 2, "lemon_fraction": 0.25},
            repair={"technicians": 1, "manual_hours": 1, "retire_after_failures": 3},
        )
    )
    r = simulate_replica(plan, 0, seed, incidents=True)
    rows = r.incidents
    assert r.failures > 5 and len(rows) == r.failures
    for name, count in r.failures_by_class.items():
        assert sum(row["class"] == name for row in rows) == count
    assert sum(row["lasting_fault"] for row in rows if row["class"] == "node") == r.failures_lemon
    times = [row["time_h"] for row in rows]
    assert times == sorted(times) and times[-1] <= r.wall_hours
    for row in rows:
        replaced = row["repair_path"] not in ("", "retired", "misdiagnosed")
        assert (row["node"] >= 0) == (row["class"] == "node")
        assert replaced == np.isfinite(row["repair_hours"])
        assert not replaced or row["repair_hours"] > 0
