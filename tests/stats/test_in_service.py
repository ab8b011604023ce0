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

from sim import fit, incident_log
from sim.distributions import LogNormal, Weibull
from sim.engine import build_plan, simulate_replica
from sim.montecarlo import run
from sim.scenario import load_document
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


NODES, GPUS, WINDOW_H = 64, 8, 4000.0
SHAPE, NODE_MTBF_H = 0.5, 400.0


def fleet_log(rng: np.random.Generator) -> pd.DataFrame:
    """A fleet of nodes long in service, each a Weibull renewal process: the first failure
    after an equilibrium residual life (U·L with L length-biased: scale·Gamma(1+1/k)^(1/k)),
    then whole lives."""
    scale = NODE_MTBF_H / math.gamma(1 + 1 / SHAPE)
    rows = []
    for node in range(NODES):
        t = rng.random() * scale * rng.gamma(1 + 1 / SHAPE) ** (1 / SHAPE)
        while t <= WINDOW_H:
            rows.append((t, node))
            t += scale * rng.weibull(SHAPE)
    return pd.DataFrame(rows, columns=["time", "node"])


def top_share(nodes: np.ndarray) -> float:
    """The share of failures on the 10% most-failing nodes."""
    counts = np.sort(np.bincount(nodes, minlength=NODES))[::-1]
    return counts[: NODES // 10].sum() / counts.sum()


def test_a_fleet_log_fits_back_and_runs_back():
    """fit -> fragment -> the engine on the same fleet and window gives back the log's count
    (within 10%) and its share of failures on the 10% most-failing nodes (within 5 points)."""
    table = fleet_log(np.random.default_rng(11))
    log = fit.log_from_table(table, "fleet", NODES, GPUS, end=WINDOW_H)
    result = fit.fit_log(log)
    (fitted,) = result.classes
    assert fitted.distribution == "weibull" and fitted.lifetime.shape.covers(SHAPE)
    fragment = result.fragment()
    assert fragment["failures"][0]["age"] == "in_service"
    assert "cluster" not in fragment  # no spread between nodes in the truth: none written
    # the same fleet and window: nodes stay in place (no spare), the job never finishes
    failure = fragment["failures"][0] | {"replace": False, "detect_minutes": 0}
    doc = merge(
        TINY,
        {
            "model": {"tokens": 1.0e15},
            "cluster": {"nodes": NODES, "gpus_per_node": GPUS, "spare_nodes": 0},
            "parallelism": {"tensor": 1},
            "failures": [failure],
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
    assert abs(np.mean(counts) / len(table) - 1) < 0.10, (np.mean(counts), len(table))
    assert abs(np.mean(shares) - top_share(table["node"].to_numpy())) < 0.05


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
