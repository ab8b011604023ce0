"""Gray failures on the same seeds (common random numbers): detecting stragglers sooner,
and keep_last and validation against corrupt checkpoints, on the reference run.

Each test sweeps keys of the reference scenario, so replica r of every point draws the
same failures, straggler onsets and corruption draws; per-replica differences are paired
samples, compared through their mean and its 95% interval (mean ± 1.96 standard errors).
The scenarios are the benchmark's (benchmarks/gray_tradeoffs.py prints the figures).
"""

from __future__ import annotations

import pytest

from benchmarks.gray_tradeoffs import STRAGGLERS
from sim.model.scenario import load_scenario
from sim.runs.montecarlo import run
from tests.conftest import ROOT
from tests.stats.test_ops_tradeoffs import paired

REFERENCE = ROOT / "scenarios" / "llama70b-1k.yaml"


def sweep(overrides: list[str], params: list[str], replicas: int, seed: int):
    scenario_set = load_scenario(REFERENCE, overrides=overrides, params=params)
    table = run(scenario_set, replicas=replicas, seed=seed, workers=1, progress=False)
    assert (table["error"] == "").all()
    return [
        table[table["point"] == i].set_index("replica") for i in sorted(table["point"].unique())
    ]


@pytest.mark.montecarlo
def test_detecting_stragglers_sooner_raises_goodput():
    fast, slow, never = sweep(STRAGGLERS, ["stragglers.detect_hours=0.5,8,null"], 80, seed=7)
    assert never["stragglers"].sum() > 0
    mean, half = paired(fast["goodput"] - never["goodput"])
    assert mean - half > 0
    mean, half = paired(fast["slowdown_hours"] - slow["slowdown_hours"])
    assert mean + half < 0
    # draining costs restarts: downtime rises with the drains
    mean, half = paired(fast["downtime_hours"] - never["downtime_hours"])
    assert mean - half > 0
    assert (never["nodes_drained"] == 0).all() and fast["nodes_drained"].sum() > 0


@pytest.mark.montecarlo
def test_keep_last_and_validation_against_corrupt_checkpoints():
    # 5% of writes corrupt: a restart loads a corrupt checkpoint now and then
    keep1, keep1_valid, keep5, keep5_valid = sweep(
        ["checkpoint.corrupt_prob=0.05"],
        ["checkpoint.keep_last=1,5", "checkpoint.validate=false,true"],
        80,
        seed=3,
    )
    assert keep5["checkpoints_corrupt"].sum() > 0
    # keep_last 1: a corrupt newest checkpoint sends the run back to the start
    assert keep1["rollback_exhausted"].sum() > 0 and keep5["rollback_exhausted"].sum() == 0
    mean, half = paired(keep1["lost_work_hours"] - keep5["lost_work_hours"])
    assert mean - half > 0
    # validation finds every corrupt checkpoint at its write: nothing corrupt is ever loaded
    assert keep1_valid["rollback_exhausted"].sum() == keep5_valid["rollback_exhausted"].sum() == 0
    assert (keep1_valid["wall_hours"] == keep5_valid["wall_hours"]).all()
    mean, half = paired(keep1_valid["wall_hours"] - keep1["wall_hours"])
    assert mean + half < 0  # worth it with keep_last 1
    # ... and a cost with keep_last 5: the read-backs (and rewrites) stall every checkpoint
    mean, half = paired(keep5_valid["checkpoint_stall_hours"] - keep5["checkpoint_stall_hours"])
    assert mean - half > 0
