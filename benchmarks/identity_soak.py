"""Soak test of the time accounting: thousands of random small scenarios, every feature on.

Usage: .venv/bin/python benchmarks/identity_soak.py [--runs 4000] [--seed 13]

Each run draws a random tiny scenario (nodes, spares, interval, sync/async, in-memory
level, shared data tier, backups, every failure scope including fabric and storage,
restart/elastic, horizon) and checks that wall = ideal + slowdown + lost_work +
checkpoint_stall + downtime, that no bucket is negative, and that a finished run kept
exactly total_steps of ideal compute. The hypothesis property test does the same in
the suite with fewer examples; this finds the rare paths.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.engine import build_plan, simulate_replica  # noqa: E402
from sim.scenario import ScenarioError  # noqa: E402
from tests.conftest import identity_error, tiny  # noqa: E402
from tests.engine.test_properties import as_class  # noqa: E402

SCOPES = ["gpu", "node", "node", "job", "link", "switch", "storage"]


def random_scenario(rng: random.Random):
    classes = [
        as_class(
            j,
            {
                "scope": rng.choice(SCOPES),
                "mtbf_hours": rng.uniform(0.02, 5),
                "distribution": "exponential",
                "detect_minutes": rng.uniform(0, 5),
                "repair_hours": rng.uniform(0.01, 2),
                "replace": rng.random() < 0.5,
                "loses_data": rng.random() < 0.5,
            },
        )
        for j in range(rng.randint(0, 3))
    ]
    memory = rng.choice([None, rng.randint(1, 60)])
    storage = {
        "data_tier": "shared" if rng.random() < 0.5 and memory is None else "separate",
        "data_bytes_per_token": rng.uniform(0, 4e6),
        "background_load": rng.uniform(0, 0.9),
    }
    every = rng.choice([0, 0, 1, 2, 3])
    if every:
        storage["backup"] = {"kind": "object", "every": every}
    return tiny(
        cluster={
            "nodes": rng.randint(1, 8),
            "gpus_per_node": rng.choice([1, 2, 4]),
            "spare_nodes": rng.randint(0, 3),
        },
        checkpoint={
            "interval_steps": rng.randint(1, 400),
            "mode": rng.choice(["sync", "async"]),
            "snapshot_GB_s_per_node": rng.uniform(0.5, 50),
            "memory_every_steps": memory,
        },
        failures=classes,
        recovery={
            "policy": rng.choice(["restart", "elastic"]),
            "elastic_min_fraction": rng.uniform(0.1, 1),
            "restart_minutes": 1,
        },
        simulation={"horizon_days": rng.uniform(0.2, 20) / 24},
        network={
            "switch_radix": rng.choice([4, 8, 64]),
            "placement": rng.choice(["contiguous", "scattered"]),
        },
        storage=storage,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ran = bad = 0
    for i in range(args.runs):
        try:
            scenario = random_scenario(rng)
        except ScenarioError:
            continue  # refused at the edge (e.g. a fat tree too small for the nodes)
        plan = build_plan(scenario)
        r = simulate_replica(plan, 0, i)
        ran += 1
        buckets = [
            r.ideal_hours,
            r.slowdown_hours,
            r.lost_work_hours,
            r.checkpoint_stall_hours,
            r.downtime_hours,
        ]
        exact = not r.finished or abs(r.ideal_hours * 3600 - plan.total_steps * plan.step_s) < 1e-6
        if identity_error(r) > 1e-9 or min(buckets) < 0 or not exact:
            bad += 1
            print(f"VIOLATION run {i}: {scenario.model_dump_json()}")
    print(f"identity soak: {ran} runs, {bad} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
