"""Monte Carlo against Daly's exact expectation (docs/architecture.md, validation).

One job-scope exponential failure class (MTBF 8 h), instant detection, no
replacement, restart 10 min, sync checkpoints of 2 min; a 48 h run with 1-minute
steps swept over five intervals that divide it. Tolerance: 3 standard errors.
"""

from __future__ import annotations

import pytest

from sim.model import checkpoints, perf, reliability
from sim.model.scenario import load_document
from sim.runs.montecarlo import run
from sim.runs.summaries import summarize
from tests.conftest import TINY, merge

INTERVALS = [10, 20, 45, 80, 160]  # minutes = steps; each divides the 2,880-step run
REPLICAS = 1500

DALY = merge(
    TINY,
    {
        "name": "daly",
        # 2,880 steps of 60 s: 6e12 FLOPs per step at 1e11 FLOP/s (4 GPUs x 0.05 TFLOPS x MFU 0.5)
        # 1.2B parameters of 100 bytes of state each (a 120B model's states would not fit
        # in the GPUs' memory: the loader refuses it)
        "model": {
            "params": 1.2e9,
            "tokens": 2.88e6,
            "global_batch_tokens": 1000,
            "flops_per_token": 6.0e9,
        },
        "cluster": {"gpu": {"name": "slow", "peak_tflops": 0.05}, "nodes": 2, "gpus_per_node": 2},
        "performance": {"mfu": 0.5},
        # 120 GB checkpoint: written in 120 s at 1 GB/s; loaded in 1 s
        "storage": {
            "checkpoint_tier": {
                "kind": "lustre",
                "write_GB_s": 1.0,
                "read_GB_s": 120.0,
                "capacity_TB": 10,
                "latency_ms": 0.0,
            },
            "client_GB_s_per_node": 1000.0,
        },
        "checkpoint": {"interval_steps": 10, "state_bytes_per_param": 100.0, "keep_last": 2},
        "failures": [
            {
                "name": "job",
                "scope": "job",
                "mtbf_hours": 8.0,
                "detect_minutes": 0,
                "replace": False,
            }
        ],
        "recovery": {"policy": "restart", "restart_minutes": 10},
        "simulation": {"replicas": REPLICAS, "seed": 2024, "horizon_days": 3650},
        "sweep": {"checkpoint.interval_steps": INTERVALS},
    },
)


@pytest.fixture(scope="module")
def daly_sweep():
    scenario_set = load_document(DALY, "daly")
    table = run(scenario_set, replicas=REPLICAS, workers=1, progress=False)
    return scenario_set, summarize(table, scenario_set.swept_keys)


def expected_wall_hours(scenario) -> float:
    step_s = perf.step_time_s(scenario)
    return (
        reliability.daly_expected_wall_s(
            ideal_s=perf.total_steps(scenario) * step_s,
            interval_s=reliability.interval_steps(scenario) * step_s,
            checkpoint_s=checkpoints.checkpoint_write_s(scenario),
            restart_s=reliability.restart_s(
                scenario
            ),  # 600 s + 1 s load (none before the first checkpoint: < 0.02 SE)
            mtbf_s=8 * 3600.0,
        )
        / 3600.0
    )


def test_scenario_is_what_the_docstring_says():
    scenario = load_document(DALY).base
    assert perf.step_time_s(scenario) == pytest.approx(60.0)
    assert perf.total_steps(scenario) == 2880
    assert checkpoints.checkpoint_write_s(scenario) == pytest.approx(120.0)


@pytest.mark.montecarlo
def test_mean_wall_time_matches_daly_at_every_interval(daly_sweep):
    scenario_set, summary = daly_sweep
    wall = summary[summary["metric"] == "wall_hours"].set_index("point")
    for point in scenario_set.points:
        row = wall.loc[point.index]
        theory = expected_wall_hours(point.scenario)
        assert abs(row["mean"] - theory) < 3 * row["sem"], (
            f"interval {point.params}: simulated {row['mean']:.3f} ± {row['sem']:.3f} h, Daly {theory:.3f} h"
        )


@pytest.mark.montecarlo
def test_best_interval_of_the_sweep_is_the_one_theory_picks(daly_sweep):
    scenario_set, summary = daly_sweep
    wall = summary[summary["metric"] == "wall_hours"].set_index("point")["mean"]
    theory = {p.index: expected_wall_hours(p.scenario) for p in scenario_set.points}
    assert wall.idxmin() == min(theory, key=theory.get)
    # and that interval is the sweep's closest to Daly's optimum, ~sqrt(2 delta M) = 44 min
    optimum_min = reliability.daly_interval_s(120.0, 8 * 3600.0) / 60
    closest = min(INTERVALS, key=lambda m: abs(m - optimum_min))
    assert scenario_set.points[wall.idxmin()].params["checkpoint.interval_steps"] == closest
