"""Recovery policies on the same seeds (common random numbers).

No spares and week-long repairs: elastic keeps training on fewer replicas while
restart waits for repairs, so elastic finishes sooner (paired difference beyond
3 standard errors). Ample spares: elastic never shrinks, so the two policies
give identical replicas.
"""

from __future__ import annotations

import math

import pytest

from sim.model.scenario import load_document
from sim.runs.montecarlo import run
from tests.conftest import TINY, merge

REPLICAS = 300


def policies(spares: int, repair_hours: float):
    doc = merge(
        TINY,
        {
            # 8 nodes x 8 GPUs, TP8: 8 data-parallel replicas; 1,000 steps of 360 s = 100 h
            "model": {
                "params": 1e9,
                "tokens": 1e6,
                "global_batch_tokens": 1000,
                "flops_per_token": 6.0e9 * 360,
            },
            "cluster": {
                "gpu": {"name": "t", "peak_tflops": 0.25},
                "nodes": 8,
                "gpus_per_node": 8,
                "spare_nodes": spares,
            },
            "parallelism": {"tensor": 8},
            "failures": [
                {
                    "name": "node",
                    "scope": "node",
                    "mtbf_hours": 400.0,
                    "detect_minutes": 5,
                    "repair_hours": repair_hours,
                }
            ],
            "recovery": {"elastic_min_fraction": 0.5, "rescale_minutes": 5},
            "simulation": {"horizon_days": 3650},
            "sweep": {"recovery.policy": ["restart", "elastic"]},
        },
    )
    scenario_set = load_document(doc, "recovery")
    table = run(scenario_set, replicas=REPLICAS, seed=11, workers=1, progress=False)
    restart = table[table["recovery.policy"] == "restart"].reset_index(drop=True)
    elastic = table[table["recovery.policy"] == "elastic"].reset_index(drop=True)
    return restart, elastic


@pytest.mark.montecarlo
def test_elastic_finishes_sooner_without_spares():
    restart, elastic = policies(spares=0, repair_hours=168.0)
    assert restart["finished"].all() and elastic["finished"].all()
    assert (restart["node_wait_hours"] > 0).mean() > 0.5  # restart really does wait for repairs
    diff = restart["time_to_train_days"] - elastic["time_to_train_days"]
    sem = diff.std(ddof=1) / math.sqrt(len(diff))
    assert diff.mean() > 3 * sem
    assert (elastic["slowdown_hours"] > 0).mean() > 0.5  # it paid with slower steps instead


@pytest.mark.montecarlo
def test_policies_agree_with_ample_spares():
    restart, elastic = policies(spares=16, repair_hours=1.0)
    assert restart["failures"].sum() > REPLICAS  # failures did happen
    columns = ["wall_hours", "lost_work_hours", "downtime_hours", "failures", "checkpoints_written"]
    assert restart[columns].equals(elastic[columns])
    assert (elastic["slowdown_hours"] == 0).all()
