"""A fleet as a log sees it: repairs that renew only the class that failed, the fleet's
power-law trend, and repairs that do not hold, each against a reference written here
(a small event simulation node by node, or the non-homogeneous Poisson process's closed
form), never against the engine itself.

Every scenario here keeps the failure process free of the job's state: nodes wait in
their slots (no spares; the job waits for the node in repair), no detection or restart
time, classes that tick in wall time. Each node is then on its own: up until one of its
classes fails, down for its repair, up again."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.engine import build_plan, failures, simulate_replica
from sim.model.distributions import Weibull
from sim.model.scenario import load_document
from sim.runs import incident_log
from tests.conftest import TINY, merge

pytestmark = pytest.mark.montecarlo

NODES = 16


def fleet_doc(classes: list[dict], horizon_h: float, cluster: dict | None = None) -> dict:
    return merge(
        TINY,
        {
            "model": {"tokens": 1.0e15},  # never finishes: every replica runs to the horizon
            "cluster": {"nodes": NODES, "gpus_per_node": 1, "spare_nodes": 0} | (cluster or {}),
            "failures": [{"scope": "node", "detect_minutes": 0} | c for c in classes],
            "recovery": {"restart_minutes": 0},
            "simulation": {"horizon_days": horizon_h / 24},
        },
    )


def engine_logs(doc: dict, replicas: int, seed: int) -> list:
    """Each replica's incident log (a table: time in hours, node, class)."""
    plan = build_plan(load_document(doc, "fleet").base)
    out = []
    for replica in range(replicas):
        record = simulate_replica(plan, replica, seed, incidents=True)
        out.append(incident_log.table_of(incident_log.rows_of(record.incidents, 0, replica)))
    return out


def mean_and_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


# --------------------------------------------------------------------------- 1: what a repair renews

MEAN_H, SHAPE, REPAIR_H, HORIZON_H = 400.0, 0.5, 50.0, 2000.0


def node_history(rng: np.random.Generator, renew_all: bool) -> tuple[int, int]:
    """One node with two Weibull classes of shape 0.5 (new at the start): the first to run
    out fails the node, which is down an exponential repair; the class that failed starts a
    fresh life, the other keeps what it had left (its clock stands still while the node is
    down), or, with `renew_all`, starts afresh too. Failures of each class by the horizon."""
    law = Weibull(MEAN_H, SHAPE)
    left = law.sample(rng, 2)
    t, counts = 0.0, [0, 0]
    while True:
        first = int(np.argmin(left))
        t += left[first]
        if t > HORIZON_H:
            return counts[0], counts[1]
        counts[first] += 1
        left = left - left[first]
        left[first] = law.sample(rng, 1)[0]
        if renew_all:
            left = law.sample(rng, 2)
        t += rng.exponential(REPAIR_H)


def test_a_repair_renews_the_class_that_failed_and_nothing_else():
    rng = np.random.default_rng(8)
    kept = np.array([node_history(rng, False) for _ in range(6000)]).sum(axis=1)
    renewed = np.array([node_history(rng, True) for _ in range(6000)]).sum(axis=1)
    expected, se_ref = mean_and_se(kept)
    old, se_old = mean_and_se(renewed)
    # the reference can tell the two semantics apart (else the test could not fail)
    assert old - expected > 8 * math.hypot(se_ref, se_old), (old, expected)
    classes = [
        {"name": name, "mtbf_hours": MEAN_H, "distribution": "weibull", "weibull_shape": SHAPE,
         "repair_hours": REPAIR_H}
        for name in ("a", "b")
    ]  # fmt: skip
    per_node = [len(log) / NODES for log in engine_logs(fleet_doc(classes, HORIZON_H), 60, 4)]
    got, se = mean_and_se(per_node)
    assert abs(got - expected) < 3 * math.hypot(se, se_ref), (got, expected, old)


# --------------------------------------------------------------------------- 2: the fleet ages

RATE_PER_NODE_DAY, BETA, RATED_DAYS, AGE_DAYS, WINDOW_DAYS = 0.02, 0.5, 400.0, 10.0, 400.0


def expected_per_quarter() -> np.ndarray:
    """The power law's mean function: a node fails λ·∫ (a/a_r)^(β−1) da between two ages,
    λ·a_r/β·((a₁/a_r)^β − (a₀/a_r)^β) (nodes in place, nothing repaired)."""
    ages = AGE_DAYS + np.linspace(0, WINDOW_DAYS, 5)
    mean = RATE_PER_NODE_DAY * RATED_DAYS / BETA * (ages / RATED_DAYS) ** BETA
    return NODES * np.diff(mean)


@pytest.mark.parametrize("layout", ["superposed", "per node"])
def test_a_fleet_aging_fails_per_quarter_as_the_power_law_says(monkeypatch, layout):
    monkeypatch.setattr(failures, "SUPERPOSE", layout == "superposed")
    doc = fleet_doc(
        [{"name": "host", "rate_per_1k_gpu_day": RATE_PER_NODE_DAY * 1000, "replace": False}],
        WINDOW_DAYS * 24,
        {"aging": {"beta": BETA, "rated_at_days": RATED_DAYS, "age_days": AGE_DAYS}},
    )
    quarters = []
    for log in engine_logs(doc, 40, 9):
        edges = np.linspace(0, WINDOW_DAYS * 24, 5)
        quarters.append(np.histogram(log["time"].to_numpy(), bins=edges)[0])
    quarters = np.array(quarters)
    expected = expected_per_quarter()
    got = quarters.mean(axis=0)
    se = np.sqrt(expected / len(quarters))  # Poisson counts
    assert np.all(np.abs(got - expected) < 3.5 * se), (got, expected)
    assert expected[0] > 2 * expected[-1]  # a burn-in the test can see


def test_a_weibull_class_ages_in_operational_time():
    """A Weibull class under the trend is the time change of its renewal process: its
    count by the window's end has the mean of the untrended process over U(T), here by
    a numpy renewal simulation of U(T) (nodes in place, new at the start)."""
    from sim.engine.aging import FleetAge

    day = 86400.0
    age = FleetAge(AGE_DAYS * day, RATED_DAYS * day, BETA)
    horizon_u_h = age.operational(WINDOW_DAYS * day) / 3600.0
    law = Weibull(2000.0, 0.7)
    rng = np.random.default_rng(3)
    counts = []
    for _ in range(4000):
        draws = np.cumsum(law.sample(rng, 400))
        counts.append(int(np.searchsorted(draws, horizon_u_h)))
    expected, se_ref = mean_and_se(counts)
    doc = fleet_doc(
        [{"name": "host", "mtbf_hours": 2000.0, "distribution": "weibull", "weibull_shape": 0.7,
          "replace": False}],
        WINDOW_DAYS * 24,
        {"aging": {"beta": BETA, "rated_at_days": RATED_DAYS, "age_days": AGE_DAYS}},
    )  # fmt: skip
    per_node = [len(log) / NODES for log in engine_logs(doc, 40, 2)]
    got, se = mean_and_se(per_node)
    assert abs(got - expected) < 3 * math.hypot(se, se_ref), (got, expected)


# --------------------------------------------------------------------------- 3: repairs that do not hold

LAMBDA_H, REFAIL_P, REFAIL_H, FIX_H, T_H = 1 / 300.0, 0.3, 6.0, 4.0, 3000.0


def refail_history(rng: np.random.Generator) -> tuple[int, int]:
    """One node, one exponential class, exponential repairs; each repair does not hold with
    probability p, and then the class fails again after an exponential time of mean h in
    service (or earlier, by its own clock). Failures, and those within a day of the node's
    previous one."""
    t, pending, count, quick, last = 0.0, False, 0, 0, -math.inf
    while True:
        wait = rng.exponential(1 / LAMBDA_H)
        if pending:
            wait = min(wait, rng.exponential(REFAIL_H))
        t += wait
        if t > T_H:
            return count, quick
        count += 1
        quick += t - last <= 24.0
        last = t
        t += rng.exponential(FIX_H)
        pending = rng.random() < REFAIL_P


def test_repairs_that_do_not_hold_come_back_as_the_event_simulation_says():
    rng = np.random.default_rng(12)
    reference = np.array([refail_history(rng) for _ in range(20_000)])
    doc = fleet_doc(
        [{"name": "host", "mtbf_hours": 1 / LAMBDA_H, "repair_hours": FIX_H,
          "refail_prob": REFAIL_P, "refail_hours": REFAIL_H}],
        T_H,
    )  # fmt: skip
    counts, quick = [], []
    for log in engine_logs(doc, 60, 5):
        log = log.sort_values(["node", "time"])
        gaps = log.groupby("node")["time"].diff().to_numpy()
        counts.append(len(log) / NODES)
        quick.append(np.count_nonzero(gaps <= 24.0) / NODES)
    for got, ref in ((counts, reference[:, 0]), (quick, reference[:, 1])):
        mean, se = mean_and_se(got)
        expected, se_ref = mean_and_se(ref)
        assert abs(mean - expected) < 3 * math.hypot(se, se_ref), (mean, expected)
    # without the recurrences a failure follows the node's previous one within a day with
    # probability about 1 − e^{−24λ}: the recurrences' share is several times that
    alone = 1 - math.exp(-24 * LAMBDA_H)
    assert np.mean(quick) / np.mean(counts) > 4 * alone, (np.mean(quick), np.mean(counts))
