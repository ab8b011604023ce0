"""Operations on the same seeds (common random numbers): retiring lemon nodes, retiring
too eagerly, and health checks.

Each test sweeps one key, so replica r of both points draws the same failure lifetimes;
the per-replica differences are paired samples and the tests compare their mean with
its 95% interval (mean ± 1.96 standard errors).

Lemon scenarios: the reference run (scenarios/llama70b-1k.yaml) on 512 nodes (TP 8 x
PP 4 is 4 nodes per data-parallel replica: 128 replicas), a tenth of the fleet lemons,
a repair pipeline with false fixes. Per node, the Llama 3 mix's node-attributable
classes (gpu, host, network) fail 0.0032 times a day: a healthy node every ~310 days,
a 5x lemon every ~62 days, a 50x lemon every ~6 days.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchmarks.ops_tradeoffs import CHECKS as BENCH_CHECKS
from benchmarks.ops_tradeoffs import EAGER, PERSISTENT_LEMONS
from sim.model.scenario import load_scenario
from sim.runs.montecarlo import run
from tests.conftest import ROOT

REFERENCE = ROOT / "scenarios" / "llama70b-1k.yaml"

# the scenarios are the benchmark's (benchmarks/ops_tradeoffs.py prints the figures)
CHECKS = [*BENCH_CHECKS, "health_checks.cost_minutes=10"]


def points(overrides: list[str], param: str, replicas: int, seed: int):
    """The two points of a one-key sweep of the reference scenario, indexed by replica."""
    scenario_set = load_scenario(REFERENCE, overrides=overrides, params=[param])
    table = run(scenario_set, replicas=replicas, seed=seed, workers=1, progress=False)
    assert (table["error"] == "").all()
    first, second = (table[table["point"] == i].set_index("replica") for i in (0, 1))
    return first, second


def paired(diff: pd.Series) -> tuple[float, float]:
    """Mean of paired differences and the half-width of its 95% interval."""
    return float(diff.mean()), 1.96 * float(diff.std(ddof=1)) / math.sqrt(len(diff))


@pytest.mark.montecarlo
def test_retiring_lemons_that_fail_within_the_window_raises_goodput():
    off, on = points(PERSISTENT_LEMONS, "repair.retire_after_failures=null,2", replicas=100, seed=7)
    assert on["lemons_retired"].sum() > 0.5 * on["nodes_retired"].sum()  # mostly lemons
    assert (on["node_wait_hours"] == 0).all()  # the spares outlast the retirements
    mean, half = paired(on["goodput"] - off["goodput"])
    assert mean - half > 0
    mean, half = paired(on["failures_lemon"] - off["failures_lemon"])
    assert mean + half < 0  # because the faulty nodes fail less


@pytest.mark.montecarlo
def test_retiring_too_eagerly_costs_goodput():
    off, on = points(EAGER, "repair.retire_after_failures=null,1", replicas=40, seed=7)
    # the guard stops at the job's size: 4 retired, and every later failure waits for repair
    assert on["nodes_retired"].max() == 4 and on["nodes_retired"].mean() > 3
    mean, half = paired(on["goodput"] - off["goodput"])
    assert mean + half < 0
    mean, half = paired(on["node_wait_hours"] - off["node_wait_hours"])
    assert mean - half > 0


@pytest.mark.montecarlo
def test_health_checks_that_catch_cut_lost_work_and_failures():
    blind, catching = points(CHECKS, "health_checks.catch_prob=0,0.5", replicas=100, seed=7)
    assert (blind["nodes_drained"] == 0).all() and catching["nodes_drained"].mean() > 1
    for column in ("lost_work_hours", "failures"):
        mean, half = paired(catching[column] - blind[column])
        assert mean + half < 0, column
    # a drain costs a restart too, so restarts fall by less than the failures avoided
    restarts, _ = paired(catching["restarts"] - blind["restarts"])
    failures, _ = paired(catching["failures"] - blind["failures"])
    assert failures < restarts <= 0
