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
