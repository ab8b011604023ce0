"""Checkpoint strategy on the same seeds: async against sync on the 70B reference, and
the Daly interval against a fine sweep of the Daly-check scenario."""

from __future__ import annotations

import math

import pytest

from sim.decide import analysis
from sim.model import perf, reliability
from sim.model.scenario import load_document, load_scenario
from sim.runs.montecarlo import run
from tests.conftest import ROOT
from tests.stats.test_daly import DALY


@pytest.mark.montecarlo
def test_async_cuts_stall_tenfold_and_finishes_sooner():
    scenario_set = load_scenario(
        ROOT / "scenarios/llama70b-1k.yaml", params=["checkpoint.mode=sync,async"]
    )
    table = run(scenario_set, replicas=300, seed=3, workers=1, progress=False)
    sync = table[table["checkpoint.mode"] == "sync"].reset_index(drop=True)
    asyn = table[table["checkpoint.mode"] == "async"].reset_index(drop=True)
    assert sync["checkpoint_stall_hours"].mean() >= 10 * asyn["checkpoint_stall_hours"].mean()
    diff = sync["time_to_train_days"] - asyn["time_to_train_days"]
    assert diff.mean() > 3 * diff.std(ddof=1) / math.sqrt(len(diff))
    assert asyn["checkpoints_lost"].sum() > 0  # failures did land inside drains


@pytest.mark.montecarlo
def test_daly_interval_lands_near_the_best_of_a_fine_sweep():
    no_sweep = {k: v for k, v in DALY.items() if k != "sweep"}
    base = load_document(no_sweep).base
    daly_steps = reliability.interval_steps(
        load_document(no_sweep, overrides=["checkpoint.interval=daly"]).base
    )
    assert daly_steps == round(
        reliability.daly_interval_s(120.0, 8 * 3600) / perf.step_time_s(base)
    )
    fine = list(range(24, 66, 3))  # minutes = steps of 60 s, around the optimum of ~42.5
    scenario_set = load_document(
        no_sweep, params=["checkpoint.interval_steps=" + ",".join(map(str, fine))]
    )
    table = run(scenario_set, replicas=1500, seed=9, workers=1, progress=False)
    best = analysis.optimize(table, "checkpoint.interval_steps", "wall_hours").best
    assert abs(daly_steps - best) <= 0.10 * best, (daly_steps, best)


def _memory_pair(scope: str):
    doc = {
        "failures": [
            {
                "name": "f",
                "scope": scope,
                "mtbf_hours": 1280.0 if scope == "node" else 10.0,
                "detect_minutes": 3,
                "repair_hours": 2,
            }
        ],
    }
    scenario_set = load_scenario(
        ROOT / "scenarios/llama70b-1k.yaml",
        [f"failures={doc['failures']}".replace("'", ""), "checkpoint.interval_steps=1000"],
        params=["checkpoint.memory_every_steps=null,100"],
    )
    table = run(scenario_set, replicas=300, seed=21, workers=1, progress=False)
    without = table[table["checkpoint.memory_every_steps"].isna()].reset_index(drop=True)
    with_memory = table[table["checkpoint.memory_every_steps"] == 100].reset_index(drop=True)
    return without, with_memory


@pytest.mark.montecarlo
def test_in_memory_level_cuts_lost_work_for_node_failures_only():
    without, with_memory = _memory_pair("node")
    diff = without["lost_work_hours"] - with_memory["lost_work_hours"]
    assert diff.mean() > 3 * diff.std(ddof=1) / math.sqrt(len(diff))
    assert with_memory["lost_work_hours"].mean() < 0.5 * without["lost_work_hours"].mean()
    job_without, job_with = _memory_pair("job")
    # against job-wide failures the in-memory copies do not survive: the same rollbacks (the
    # in-memory snapshots add a little time, which shifts the failure times a little)
    ratio = job_with["lost_work_hours"].mean() / job_without["lost_work_hours"].mean()
    assert 0.9 < ratio < 1.1
