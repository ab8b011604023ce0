"""Components long in service (`age: in_service`): residual lives from the renewal
process's equilibrium, in the distributions, in the engine and through `fit` and back.

References written independently of the code under test: the equilibrium's mean
E[L²] / (2·E[L]) and its CDF 1 − Q(1/k, (x/scale)^k) for the Weibull (Q the regularized
upper incomplete gamma function); a stationary renewal process fails on average t/mean
times in any window of length t; a fleet log drawn here with numpy, node by node.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from sim.data import fit, logs
from sim.engine import build_plan, simulate_replica
from sim.model.distributions import LogNormal, Weibull
from sim.model.scenario import load_document
from sim.runs import incident_log
from sim.runs.montecarlo import run
from tests.conftest import TINY, merge

pytestmark = pytest.mark.montecarlo


def test_weibull_residual_follows_the_equilibrium_law():
    law = Weibull(100.0, 0.5)
    sample = law.residual(np.random.default_rng(1), 40_000)
    k, scale = law.shape, law.scale
    second = scale**2 * math.gamma(1 + 2 / k)  # E[L²]
    expected = second / (2 * law.mean)
    assert abs(sample.mean() - expected) < 3 * sample.std() / math.sqrt(sample.size)
    cdf = lambda x: 1 - special.gammaincc(1 / k, (np.asarray(x) / scale) ** k)  # noqa: E731
    assert stats.kstest(sample, cdf).pvalue > 0.01


def test_lognormal_residual_mean():
    law = LogNormal(50.0, 1.0)
    sample = law.residual(np.random.default_rng(2), 40_000)
    expected = law.mean * math.exp(law.sigma**2) / 2  # E[L²]/(2 E[L])
    assert abs(sample.mean() - expected) < 3 * sample.std() / math.sqrt(sample.size)


MTBF_H = 100.0
HORIZON_DAYS = 30.0


def job_class_failures(age: str) -> np.ndarray:
    """Failures of one job-scope Weibull (shape 0.5) class over a fixed window: the job never
    finishes, detection and restart take no time, so every failure strikes a running job."""
    doc = merge(
        TINY,
        {
            "model": {"tokens": 1.0e12},
            "failures": [
                {
                    "name": "crash",
                    "scope": "job",
                    "mtbf_hours": MTBF_H,
                    "distribution": "weibull",
                    "weibull_shape": 0.5,
                    "detect_minutes": 0,
                    "age": age,
                }
            ],
            "recovery": {"restart_minutes": 0},
            "simulation": {"horizon_days": HORIZON_DAYS},
        },
    )
    table = run(load_document(doc, "age"), replicas=800, seed=3, progress=False)
    assert not table["finished"].any()
    return table["failures"].to_numpy()


def test_in_service_fails_at_its_rate_from_the_first_day():
    expected = HORIZON_DAYS * 24 / MTBF_H  # a stationary renewal process: t / mean
    in_service = job_class_failures("in_service")
    se = in_service.std(ddof=1) / math.sqrt(in_service.size)
    assert abs(in_service.mean() - expected) < 3 * se, (in_service.mean(), expected)
    new = job_class_failures("new")  # a decreasing hazard: a new component fails sooner
    assert new.mean() > expected + 3 * new.std(ddof=1) / math.sqrt(new.size)


def test_spares_enter_mid_life_and_repaired_nodes_fresh():
    """A swap: a spare that no repair in the run renewed has served a while (a residual
    life under `age: in_service`). With a spare pool far larger than the failures and
    repairs longer than the window, every node that enters is such a spare, so each slot
    is a renewal process of residual lives: its mean count is that of the numpy reference
    below, and far below what fresh lives (shape 0.5) give."""
    slots, window_h, mtbf_h = 16, 2000.0, 400.0
    law = Weibull(mtbf_h, 0.5)
    rng = np.random.default_rng(21)
    reference = []
    for _ in range(400):
        draws = np.cumsum(law.residual(rng, 200))
        reference.append(int(np.searchsorted(draws, window_h)))
    expected = slots * np.mean(reference)  # failures of the job's slots in the window
    doc = merge(
        TINY,
        {
            "model": {"tokens": 1.0e15},
            "cluster": {"nodes": slots, "gpus_per_node": 1, "spare_nodes": 2000},
            "failures": [
                {
                    "name": "n",
                    "scope": "node",
                    "mtbf_hours": mtbf_h,
                    "distribution": "weibull",
                    "weibull_shape": 0.5,
                    "age": "in_service",
                    "detect_minutes": 0,
                    "repair_hours": 80_000.0,
                }
            ],  # fmt: skip
            "recovery": {"restart_minutes": 0},
            "simulation": {"horizon_days": window_h / 24},
        },
    )
    table = run(load_document(doc, "mid-life"), replicas=40, seed=6, progress=False)
    counts = table["failures"].to_numpy()
    se = math.sqrt(counts.var(ddof=1) / counts.size + slots * np.var(reference) / len(reference))
    assert abs(counts.mean() - expected) < 3 * se, (counts.mean(), expected)


NODES, GPUS, WINDOW_H = 64, 8, 4000.0
NODE_MTBF_H = 400.0


def fleet_log(rng: np.random.Generator, shape: float, pace: np.ndarray) -> pd.DataFrame:
    """A fleet of nodes long in service, each a Weibull renewal process at its own pace
    (its rate over the mean node's): the first failure after an equilibrium residual life
    (U·L with L length-biased: scale·Gamma(1+1/k)^(1/k)), then whole lives."""
    scale = NODE_MTBF_H / math.gamma(1 + 1 / shape)
    rows = []
    for node in range(NODES):
        t = rng.random() * scale * rng.gamma(1 + 1 / shape) ** (1 / shape) / pace[node]
        while t <= WINDOW_H:
            rows.append((t, node))
            t += scale * rng.weibull(shape) / pace[node]
    return pd.DataFrame(rows, columns=["time", "node"])


def top_share(nodes: np.ndarray) -> float:
    """The share of failures on the 10% most-failing nodes."""
    counts = np.sort(np.bincount(nodes, minlength=NODES))[::-1]
    return counts[: NODES // 10].sum() / counts.sum()


def round_trip(table: pd.DataFrame) -> tuple[dict, float, float]:
    """fit -> fragment -> the engine on the same fleet and window (nodes stay in place, no
    spare, the job never finishes): the fragment, and the engine's mean count and top-10%
    share over 20 replicas."""
    result = fit.fit_log(logs.log_from_table(table, "fleet", NODES, GPUS, end=WINDOW_H))
    fragment = result.fragment()
    failures = [f | {"replace": False, "detect_minutes": 0} for f in fragment["failures"]]
    doc = merge(
        TINY,
        {
            "model": {"tokens": 1.0e15},
            "cluster": {"nodes": NODES, "gpus_per_node": GPUS, "spare_nodes": 0}
            | fragment.get("cluster", {}),
            "failures": failures,
            "recovery": {"restart_minutes": 0},
            "simulation": {"horizon_days": WINDOW_H / 24},
        },
    )
    plan = build_plan(load_document(doc, "fleet").base)
    counts, shares = [], []
    for replica in range(20):
        record = simulate_replica(plan, replica, 5, incidents=True)
        rows = incident_log.table_of(incident_log.rows_of(record.incidents, 0, replica))
        counts.append(len(rows))
        shares.append(top_share(rows["node"].to_numpy(dtype=int)))
    return fragment, float(np.mean(counts)), float(np.mean(shares))


def runs_back(table: pd.DataFrame, count: float, share: float) -> None:
    """The log's count within 10%, its top-10% share within 5 points."""
    assert abs(count / len(table) - 1) < 0.10, (count, len(table))
    assert abs(share - top_share(table["node"].to_numpy())) < 0.05, share


def test_weibull_without_spread_fits_back_and_runs_back():
    """Shape 0.5 and nodes alike: the decreasing hazard spreads the counts by itself, which
    fit does not take for lemons (the spread is not counted twice)."""
    table = fleet_log(np.random.default_rng(11), 0.5, np.ones(NODES))
    fragment, count, share = round_trip(table)
    (failure,) = fragment["failures"]
    assert failure["distribution"] == "weibull" and failure["age"] == "in_service"
    assert 0.4 < failure["weibull_shape"] < 0.6
    assert "cluster" not in fragment
    runs_back(table, count, share)


def test_exponential_with_gamma_spread_fits_back_and_runs_back():
    """Exponential lives, each node at its own gamma-distributed pace (CV 0.8)."""
    rng = np.random.default_rng(12)
    table = fleet_log(rng, 1.0, rng.gamma(1 / 0.8**2, 0.8**2, NODES))
    fragment, count, share = round_trip(table)
    assert fragment["failures"][0]["distribution"] == "exponential"
    assert 0.5 < fragment["cluster"]["node_rate_cv"] < 1.2, fragment
    runs_back(table, count, share)


def test_two_point_lemons_fit_back_and_run_back():
    """Exponential lives, 10% of the nodes at 8x."""
    pace = np.ones(NODES)
    pace[: NODES // 10] = 8.0
    table = fleet_log(np.random.default_rng(13), 1.0, pace)
    fragment, count, share = round_trip(table)
    assert fragment["failures"][0]["distribution"] == "exponential"
    cluster = fragment["cluster"]
    assert cluster["lemons_permanent"] is True and 4 < cluster["lemon_rate_multiplier"] < 16
    runs_back(table, count, share)


def test_gamma_spread_in_the_engine_gives_negative_binomial_counts():
    """cluster.node_rate_cv: a node's count over a window, exponential lives, is Poisson with
    a gamma mean: variance m + m²·cv² (m the mean count)."""
    cv = 0.7
    doc = merge(
        TINY,
        {
            "model": {"tokens": 1.0e15},
            "cluster": {"nodes": NODES, "gpus_per_node": GPUS, "node_rate_cv": cv},
            "failures": [
                {
                    "name": "n",
                    "scope": "node",
                    "mtbf_hours": NODE_MTBF_H,
                    "replace": False,
                    "detect_minutes": 0,
                }
            ],  # fmt: skip
            "recovery": {"restart_minutes": 0},
            "simulation": {"horizon_days": WINDOW_H / 24},
        },
    )
    plan = build_plan(load_document(doc, "spread").base)
    counts = np.concatenate(
        [
            np.bincount(
                incident_log.table_of(
                    incident_log.rows_of(
                        simulate_replica(plan, r, 8, incidents=True).incidents, 0, r
                    )
                )["node"].to_numpy(dtype=int),
                minlength=NODES,
            )
            for r in range(10)
        ]
    )
    m = WINDOW_H / NODE_MTBF_H
    assert abs(counts.mean() / m - 1) < 0.05
    # the variance of a sample of 640 node counts: within 15% of m + m²·cv² (Poisson: m)
    assert abs(counts.var(ddof=1) / (m + m**2 * cv**2) - 1) < 0.15


def test_permanent_lemons_stay_lemons_through_repairs():
    """With repairs that fix every node, lemons_permanent keeps the lemons' share of the
    failures; without it the first true fix cures them."""

    def lemon_share(permanent: bool) -> float:
        doc = merge(
            TINY,
            {
                "model": {"tokens": 1.0e15},
                "cluster": {
                    "nodes": 32, "gpus_per_node": GPUS, "spare_nodes": 32,
                    "lemon_fraction": 0.1, "lemon_rate_multiplier": 10,
                    "lemons_permanent": permanent,
                },
                "failures": [
                    {"name": "n", "scope": "node", "mtbf_hours": NODE_MTBF_H,
                     "detect_minutes": 0, "repair_hours": 1}
                ],
                "recovery": {"restart_minutes": 0},
                "simulation": {"horizon_days": WINDOW_H / 24},
            },
        )  # fmt: skip
        table = run(load_document(doc, "lemons"), replicas=20, seed=4, progress=False)
        return table["failures_lemon"].sum() / table["failures"].sum()

    permanent, cured = lemon_share(True), lemon_share(False)
    # cured at their first repair, the 6 lemons fail about as often as any node after it (a
    # few % of the failures); kept, they fail 10x as often whenever they serve
    assert permanent > 0.1 and permanent > 4 * cured, (permanent, cured)


def test_the_example_generator_draws_what_its_docs_say():
    """examples/make_incidents.py over 200 draws: each class's mean count is its stated rate
    over the exposure (lemons 6x in the node classes), and the host class (Weibull 0.7, in
    service) is no more frequent early in the window than late."""
    path = Path(__file__).resolve().parents[2] / "examples" / "make_incidents.py"
    spec = importlib.util.spec_from_file_location("make_incidents", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(9)
    draws = [module.draw(rng) for _ in range(200)]
    nodes, gpus, days = module.NODES, module.GPUS_PER_NODE, module.DAYS
    lemons = len(module.LEMONS)
    for name, scope, rate, _, multiplier, _ in module.CLASSES:
        counts = np.array([np.count_nonzero(d["class"] == name) for d in draws])
        weight = nodes if scope == "job" else nodes - lemons + lemons * multiplier
        expected = rate / 1000 * gpus * days * weight
        se = counts.std(ddof=1) / math.sqrt(counts.size)
        assert abs(counts.mean() - expected) < 3 * se, (name, counts.mean(), expected)
    host = np.concatenate([d.loc[d["class"] == "host", "t"].to_numpy() for d in draws])
    half = days * 24 / 2
    early, late = np.count_nonzero(host < half), np.count_nonzero(host >= half)
    assert abs(early - late) < 3 * math.sqrt(early + late)
