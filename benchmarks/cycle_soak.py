"""Soak test of the failure cycle in line (sim/engine/cycle.py): thousands of random small
scenarios in the cycle's configuration, each run with the cycle on and off; every column of
every replica must be identical.

Usage: .venv/bin/python benchmarks/cycle_soak.py [--runs 2000] [--seed 7] [--replicas 2]

The scenarios have sync checkpoints, a restart policy and gpu, node and job failure classes
(exponential, Weibull or lognormal: a GPU class with per-GPU clocks), with the identity soak's operations features on top: cold and
preemptible pools, lemons and lasting faults, the repair pipeline with technicians, RMA,
retirement, misdiagnosis and false fixes, classes that do not strike idle nodes, planned
maintenance and health checks (around which the cycle hands over to the general path).
Exit code 1 when any replica differs; each difference is printed with its scenario.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.identity_soak import add_operations, tiny_cluster  # noqa: E402
from sim.engine import build_plan, cycle, simulate_replica  # noqa: E402
from sim.model.scenario_set import ScenarioError  # noqa: E402
from sim.model.schema import Scenario  # noqa: E402
from tests.conftest import as_class, tiny  # noqa: E402


def cycle_scenario(rng: random.Random, ops: random.Random) -> Scenario:
    """A tiny random scenario in the cycle's configuration, with the operations features
    drawn from `ops` on top."""
    classes = [
        as_class(
            j,
            {
                "scope": rng.choice(["gpu", "node", "node", "job"]),
                "mtbf_hours": rng.uniform(0.02, 5),
                "distribution": rng.choice(["exponential", "exponential", "weibull", "lognormal"]),
                "detect_minutes": rng.uniform(0, 5),
                "repair_hours": rng.uniform(0.01, 2),
                "replace": rng.random() < 0.7,
            },
        )
        for j in range(rng.randint(1, 3))
    ]
    sections: dict = dict(
        cluster=tiny_cluster(rng),
        checkpoint={
            "interval_steps": rng.randint(1, 400),
            "snapshot_GB_s_per_node": rng.uniform(0.5, 50),
        },
        failures=classes,
        recovery={"policy": "restart", "restart_minutes": rng.uniform(0.5, 5)},
        simulation={"horizon_days": rng.uniform(0.2, 20) / 24},
    )
    add_operations(ops, sections)
    return tiny(**sections)


def rows(plan, replicas: int, seed: int, on: bool) -> list[dict]:
    """The replicas' rows with the cycle on or off."""
    cycle.ENABLED = on
    try:
        return [simulate_replica(plan, r, seed).row() for r in range(replicas)]
    finally:
        cycle.ENABLED = True


def differences(plan, replicas: int, seed: int) -> list[tuple]:
    """(replica, column, general path, cycle) of every value that differs."""
    off, on = rows(plan, replicas, seed, False), rows(plan, replicas, seed, True)
    out = []
    for r, (a, b) in enumerate(zip(off, on, strict=True)):
        for column, x in a.items():
            y = b[column]
            both_nan = isinstance(x, float) and math.isnan(x) and math.isnan(y)
            if x != y and not both_nan:
                out.append((r, column, x, y))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    fired = [0]
    fire = cycle._strike

    def counted(*a):
        fired[0] += 1
        return fire(*a)

    cycle._strike = counted
    ran = refused = used = 0
    bad: list[int] = []
    start = time.perf_counter()
    for i in range(args.runs):
        try:
            scenario = cycle_scenario(rng, random.Random(f"{args.seed}-ops-{i}"))
        except ScenarioError:
            refused += 1
            continue
        before = fired[0]
        found = differences(build_plan(scenario), args.replicas, i)
        used += fired[0] > before
        ran += 1
        if found:
            bad.append(i)
            print(f"DIFFERS run {i} (seed {i}): {found[:4]}")
            print(f"  scenario: {scenario.model_dump_json(exclude_defaults=True)}")
    print(
        f"cycle soak: {ran} runs ({refused} refused at the edge) in "
        f"{time.perf_counter() - start:.1f} s; {used} used the cycle, {fired[0]} failures "
        f"handled in it; {len(bad)} differ from the general path"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
