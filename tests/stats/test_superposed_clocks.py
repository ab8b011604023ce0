"""An exponential class as one superposed clock (`SuperposedSource`) against the closed
form of the Poisson process it stands for, and the clock-per-node layout against the same.

The reference, written here: 32 nodes, 4 of them lemons failing 5x as often, a node class
whose failures leave the node in the job (no spare swaps in, so the rates never change):
the failures are a Poisson process of rate Λ = (28 + 4·5)·r over the wall time, so over
replicas of wall times W_i their count has mean Λ·ΣW (the compensated count is a
martingale, stopped at the end of the run) and standard deviation √(Λ·ΣW); each failure
strikes a lemon with probability 4·5 / 48, independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.engine import build_plan, failures, simulate_replica
from sim.model.scenario import load_document
from tests.conftest import TINY, merge

pytestmark = pytest.mark.montecarlo

NODES, LEMONS, MULTIPLIER = 32, 4, 5.0
RATE_PER_NODE_DAY = 0.1  # a sound node's failures per day (100 per 1,000 GPU-days, 1 GPU)
REPLICAS = 120


def fleet_doc() -> dict:
    return merge(
        TINY,
        {
            # 0.125 s steps on 32 GPUs: ~10 days of training, ~50 failures a replica
            "model": {"tokens": 6.9e9},
            "cluster": {
                "nodes": NODES,
                "gpus_per_node": 1,
                "lemon_fraction": LEMONS / NODES,
                "lemon_rate_multiplier": MULTIPLIER,
            },
            "checkpoint": {"interval_steps": 20_000},
            "failures": [
                {
                    "name": "host",
                    "scope": "node",
                    "rate_per_1k_gpu_day": RATE_PER_NODE_DAY * 1000,
                    "replace": False,
                }
            ],
            "simulation": {"horizon_days": 60},
        },
    )


@pytest.mark.parametrize("layout", ["groups", "tree", "per node"])
def test_failures_follow_the_superposed_poisson_process(monkeypatch, layout):
    """The superposed clock with its weights in groups (sound nodes, lemons), in a Fenwick
    tree (as with a rate per node), and a clock per node, each against the closed form."""
    monkeypatch.setattr(failures, "SUPERPOSE", layout != "per node")
    if layout == "tree":
        monkeypatch.setattr(failures.SuperposedSource, "GROUPS", 0)
    plan = build_plan(load_document(fleet_doc(), "fleet").base)
    records = [simulate_replica(plan, r, 7) for r in range(REPLICAS)]
    assert all(r.finished for r in records)
    wall_days = sum(r.wall_hours for r in records) / 24
    count = sum(r.failures for r in records)
    lemon_count = sum(r.failures_lemon for r in records)
    rate = (NODES - LEMONS + LEMONS * MULTIPLIER) * RATE_PER_NODE_DAY
    expected = rate * wall_days
    assert abs(count - expected) < 3 * math.sqrt(expected), (count, expected)
    share = LEMONS * MULTIPLIER / (NODES - LEMONS + LEMONS * MULTIPLIER)
    se = math.sqrt(share * (1 - share) / count)
    assert abs(lemon_count / count - share) < 3 * se, (lemon_count / count, share)


# Vacant slots: a node class that sends its node to repair, no spares, no detection time. Each
# slot then alternates on its own between holding a node (which fails at rate λ) and waiting
# for that node's repair (exponential, mean 1/μ), the job refilling it the moment the node is
# back (it waits for nodes holding its slots). So each slot is a two-state Markov chain that
# starts up, and its expected failures over a fixed horizon T (the run never finishes) are
# λ·(μ/(λ+μ)·T + λ/(λ+μ)²·(1 − e^{−(λ+μ)T})). The superposed clock keeps a vacant slot's
# weight in its sum and draws no failure there: this holds only if that thinning is exact.
HORIZON_DAYS, REPAIR_DAYS = 60.0, 2.0


def vacancy_doc() -> dict:
    return merge(
        TINY,
        {
            "model": {"tokens": 1e15},  # never finishes: every replica runs to the horizon
            "cluster": {"nodes": NODES, "gpus_per_node": 1, "spare_nodes": 0},
            "failures": [
                {
                    "name": "host",
                    "scope": "node",
                    "rate_per_1k_gpu_day": RATE_PER_NODE_DAY * 1000,
                    "replace": True,
                    "detect_minutes": 0,
                    "repair_hours": REPAIR_DAYS * 24,
                }
            ],
            "simulation": {"horizon_days": HORIZON_DAYS},
        },
    )


@pytest.mark.parametrize("layout", ["groups", "tree", "per node"])
def test_vacant_slots_fail_as_the_two_state_chain_says(monkeypatch, layout):
    monkeypatch.setattr(failures, "SUPERPOSE", layout != "per node")
    if layout == "tree":
        monkeypatch.setattr(failures.SuperposedSource, "GROUPS", 0)
    plan = build_plan(load_document(vacancy_doc(), "vacancies").base)
    counts = [simulate_replica(plan, r, 5).failures for r in range(60)]
    lam, mu, t = RATE_PER_NODE_DAY, 1 / REPAIR_DAYS, HORIZON_DAYS
    per_slot = lam * (mu / (lam + mu) * t + lam / (lam + mu) ** 2 * (1 - math.exp(-(lam + mu) * t)))
    expected = NODES * per_slot
    mean = sum(counts) / len(counts)
    sd = math.sqrt(sum((c - mean) ** 2 for c in counts) / (len(counts) - 1))
    assert abs(mean - expected) < 3 * sd / math.sqrt(len(counts)), (mean, expected)


# A rate per node (`cluster.node_rate_cv`): the superposed clock keeps the weights in a
# Fenwick tree, and a node entering another node's vacant slot changes that slot's weight.
# With no spares every node is in the job whenever it is not in repair, so node i is the
# two-state chain above at its own rate λ·z_i, z_i gamma of mean 1 and CV c: the expected
# failures are E_z[Σ_i per_slot(λ·z_i)], the expectation over z taken here by a large sample.
NODE_CV = 0.8


def per_node_failures(rate: float, repair_rate: float, horizon: float) -> float:
    total = rate + repair_rate
    return rate * (
        repair_rate / total * horizon + rate / total**2 * (1 - math.exp(-total * horizon))
    )


@pytest.mark.parametrize("layout", ["tree", "per node"])
def test_a_rate_per_node_fails_as_each_nodes_chain_says(monkeypatch, layout):
    monkeypatch.setattr(failures, "SUPERPOSE", layout != "per node")
    doc = merge(vacancy_doc(), {"cluster": {"node_rate_cv": NODE_CV}})
    plan = build_plan(load_document(doc, "spread").base)
    counts = [simulate_replica(plan, r, 11).failures for r in range(80)]
    shape = 1 / NODE_CV**2
    rng = np.random.default_rng(2)
    z = rng.gamma(shape, 1 / shape, 200_000)
    lam, mu, t = RATE_PER_NODE_DAY, 1 / REPAIR_DAYS, HORIZON_DAYS
    total = lam * z + mu
    expected = NODES * float(
        np.mean(lam * z * (mu / total * t + lam * z / total**2 * (1 - np.exp(-total * t))))
    )
    mean = sum(counts) / len(counts)
    sd = math.sqrt(sum((c - mean) ** 2 for c in counts) / (len(counts) - 1))
    assert abs(mean - expected) < 3 * sd / math.sqrt(len(counts)), (mean, expected)


def test_a_rate_per_node_with_spares_runs(monkeypatch):
    """What `fit` writes for a fleet with a spread: an exponential node class, a rate per
    node and spares that swap in (a spare's rate replaces the leaving node's in the tree)."""
    doc = merge(vacancy_doc(), {"cluster": {"node_rate_cv": NODE_CV, "spare_nodes": 4}})
    plan = build_plan(load_document(doc, "spread").base)
    records = [simulate_replica(plan, r, 13) for r in range(10)]
    assert all(r.failures > 0 for r in records)
