"""Soak test of the timeline against the ledger: thousands of random small scenarios (those of
`identity_soak.py`, every feature on), each replica run with its timeline, which must tile the
wall clock and add up to the record's buckets (`tests/conftest.py: timeline_problems`, the
suite's own check, here over far more scenarios than the property tests draw).

Usage: .venv/bin/python benchmarks/timeline_soak.py [--runs 2000] [--seed 17] [--show 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from identity_soak import describe, random_scenario  # noqa: E402

from sim.engine import build_plan, simulate_replica  # noqa: E402
from sim.model.scenario_set import ScenarioError  # noqa: E402
from tests.conftest import timeline_problems  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--show", type=int, default=5, help="print this many violations")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ran = refused = 0
    bad: list[int] = []
    start = time.perf_counter()
    for i in range(args.runs):
        ops = random.Random(f"{args.seed}-ops-{i}")
        gray = random.Random(f"{args.seed}-gray-{i}")
        try:
            scenario = random_scenario(rng, ops, gray)
            plan = build_plan(scenario)
        except ScenarioError:
            refused += 1
            continue
        ran += 1
        try:
            problems = timeline_problems(simulate_replica(plan, 0, i, timeline=True))
        except Exception as exc:  # noqa: BLE001 - a crash is a violation too
            problems = [f"raised {type(exc).__name__}: {exc}"]
        if problems:
            bad.append(i)
            if len(bad) <= args.show:
                print(f"VIOLATION run {i} (seed {i}): {'; '.join(problems)} [{describe(scenario)}]")
    print(
        f"timeline soak: {ran} runs ({refused} refused at the edge) in "
        f"{time.perf_counter() - start:.1f} s, {len(bad)} timelines that disagree with the ledger"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
