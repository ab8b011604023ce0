"""Spares against the machine-repair model, written independently of the engine.

The reference: N job slots, S warm spares, nodes that fail at rate λ while they are in
use and are each repaired independently (exponential, rate μ, as many repairs at once as
there are failed nodes). Warm spares do not fail. While the job runs, its N slots are in
use; while it waits for nodes, the job holds every healthy node in its slots, and they
keep failing unless the class sets `while_idle: false`. `restart` computes only with all
N slots filled; `elastic` computes with as many one-node replicas as it has up to N, at
that share of the full speed, and waits below its minimum. A failure of a computing job
loses the work since the last checkpoint (one per step here).

The reference is a continuous-time Markov chain on the number of nodes down, simulated
event by event below; for no spare and `while_idle: true` its long-run computing share
is the closed form (μ / (λ + μ))^N, which `test_reference_matches_closed_form` checks.
Detection, restart, rescale and checkpoint writes are made negligible in the scenario,
so the engine's mean time to train must equal the reference's within 3 combined
standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.model.scenario import load_document
from sim.runs.montecarlo import run
from tests.conftest import TINY, merge

NODES = 16
STEP_S = 72.0
STEPS = 100_000  # 2,000 h of ideal work
MTBF_H = 800.0  # per node
REPLICAS = 600
REFERENCE_REPLICAS = 6_000


def reference_days(
    spares: int,
    repair_h: float,
    while_idle: bool,
    policy: str,
    min_replicas: int,
    replicas: int,
    seed: int,
    steps: int = STEPS,
) -> np.ndarray:
    """Time to train (days) of `replicas` runs of the machine-repair model above."""
    rng = np.random.default_rng(seed)
    fail, mend = 1.0 / (MTBF_H * 3600), 1.0 / (repair_h * 3600)
    work_s = steps * STEP_S
    out = np.empty(replicas)
    for r in range(replicas):
        down, t, remaining = 0, 0.0, work_s
        while True:
            up = NODES + spares - down
            if policy == "restart":
                running = NODES if up >= NODES else 0
            else:
                running = min(up, NODES) if up >= min_replicas else 0
            in_use = running if running else (min(up, NODES) if while_idle else 0)
            speed = running / NODES
            rate = in_use * fail + down * mend
            dt = rng.exponential(1 / rate) if rate > 0 else math.inf
            if speed > 0 and dt * speed >= remaining:
                t += remaining / speed
                break
            t += dt
            remaining -= dt * speed
            if rng.random() < in_use * fail / rate:
                if running:  # the job stops: back to the last checkpoint (every step)
                    remaining += (work_s - remaining) % STEP_S
                down += 1
            else:
                down -= 1
        out[r] = t / 86400
    return out


def engine_days(
    spares: int, repair_h: float, while_idle: bool, policy: str = "restart"
) -> np.ndarray:
    doc = merge(
        TINY,
        {
            # an abstract job: 8 one-GPU nodes of 2 TFLOPS at MFU 0.75, one step 72 s
            "model": {
                "params": 1e9,
                "tokens": STEPS * 1000,
                "global_batch_tokens": 1000,
                "flops_per_token": STEP_S * NODES * 2e12 * 0.75 / 1000,
            },
            "cluster": {"nodes": NODES, "gpus_per_node": 1, "spare_nodes": spares},
            "checkpoint": {"interval_steps": 1, "state_bytes_per_param": 1e-6},
            "storage": {
                "checkpoint_tier": {"write_GB_s": 1e6, "read_GB_s": 1e6, "capacity_TB": 1e3}
            },
            "failures": [
                {
                    "name": "node",
                    "scope": "node",
                    "mtbf_hours": MTBF_H,
                    "detect_minutes": 0,
                    "repair_hours": repair_h,
                    "while_idle": while_idle,
                }
            ],
            "recovery": {
                "policy": policy,
                "restart_minutes": 0,
                "rescale_minutes": 0,
                "elastic_min_fraction": 0.75,
            },
            "simulation": {"horizon_days": 3650},
        },
    )
    table = run(load_document(doc, "machine-repair"), replicas=REPLICAS, seed=5, progress=False)
    assert table["finished"].all()
    return table["time_to_train_days"].to_numpy()


def agree(engine: np.ndarray, reference: np.ndarray) -> None:
    se = math.sqrt(engine.var(ddof=1) / engine.size + reference.var(ddof=1) / reference.size)
    gap = engine.mean() - reference.mean()
    assert abs(gap) < 3 * se, (
        f"engine {engine.mean():.3f} days, reference {reference.mean():.3f} (±{se:.3f} s.e.)"
    )


CASES = [
    # spares, repair hours, while_idle: no spare with short and long repairs (long ones
    # overlap most), one and two spares, and clocks that stop while the job is down
    (0, 20.0, True),
    (0, 50.0, True),
    (1, 100.0, True),
    (2, 100.0, True),
    (0, 50.0, False),
    (1, 100.0, False),
]


@pytest.mark.montecarlo
@pytest.mark.parametrize("spares, repair_h, while_idle", CASES)
def test_restart_matches_machine_repair(spares, repair_h, while_idle):
    reference = reference_days(
        spares, repair_h, while_idle, "restart", NODES, REFERENCE_REPLICAS, seed=1
    )
    agree(engine_days(spares, repair_h, while_idle), reference)


@pytest.mark.montecarlo
@pytest.mark.parametrize("spares", [0, 1])
def test_elastic_matches_machine_repair(spares):
    # one node per data-parallel replica, at least three quarters of them (12) to compute;
    # the engine grows back at the next checkpoint (the next step here), a delay the
    # reference leaves out: under a step per repair, well inside the tolerance
    reference = reference_days(spares, 100.0, True, "elastic", 12, REFERENCE_REPLICAS, seed=2)
    agree(engine_days(spares, 100.0, True, "elastic"), reference)


def test_reference_matches_closed_form():
    """The reference itself, on a run long against the failure and repair cycle: no spare,
    held nodes failing, the job computes a share (μ / (λ + μ))^N of the time."""
    steps = 2_000_000  # 40,000 h of work
    days = reference_days(0, 50.0, True, "restart", NODES, 200, seed=3, steps=steps)
    share = (MTBF_H / (MTBF_H + 50.0)) ** NODES
    expected = steps * STEP_S / share / 86400
    se = days.std(ddof=1) / math.sqrt(days.size)
    # the start with every node up, and the work lost to rollbacks, are small next to it
    assert abs(days.mean() - expected) < 3 * se + 0.01 * expected
