"""The two layouts of an exponential class's clocks side by side: one superposed clock per
class (the engine's default) against a clock per node (`sim.engine.failures.SUPERPOSE`
off), CPU per replica, interleaved in one process.

Usage:
    .venv/bin/python benchmarks/clock_layouts.py SCENARIO [--replicas 100] [--rounds 3]
        [--seed 0] [--set KEY=VALUE]...

Each round runs `--replicas` replicas with each layout, one after another on one core,
and times the process's CPU; the best round of each side is compared (the machine's speed
drifts between rounds, and interleaving keeps both under the same drift). The two layouts
draw differently, so their failures per replica agree in distribution, not replica by
replica (benchmarks/compare_engines.py checks that).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.engine import failures, simulate_replica  # noqa: E402
from sim.engine.plan import build_plan  # noqa: E402
from sim.model.scenario import load_scenario  # noqa: E402

LAYOUTS = {"superposed": True, "per node": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    plan = build_plan(load_scenario(args.scenario, overrides=args.overrides).base)
    simulate_replica(plan, 0, args.seed)  # imports, caches
    cpu = {name: [] for name in LAYOUTS}
    counted = {name: 0 for name in LAYOUTS}
    for _ in range(args.rounds):
        for name, superpose in LAYOUTS.items():
            failures.SUPERPOSE = superpose
            start = time.process_time()
            for r in range(args.replicas):
                counted[name] += simulate_replica(plan, r, args.seed).failures
            cpu[name].append((time.process_time() - start) / args.replicas)
    failures.SUPERPOSE = True
    print(f"{args.scenario.name}: CPU ms per replica, {args.replicas} replicas a round")
    for name in LAYOUTS:
        rounds = "  ".join(f"{s * 1e3:8.3f}" for s in cpu[name])
        per = counted[name] / (args.rounds * args.replicas)
        print(f"{name:<11} {rounds}   best {min(cpu[name]) * 1e3:8.3f}   failures {per:8.1f}")
    ratio = min(cpu["per node"]) / min(cpu["superposed"])
    print(f"per node / superposed (best rounds): {ratio:.2f}")


if __name__ == "__main__":
    main()
