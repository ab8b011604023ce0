"""Two checkouts' engines side by side: CPU per replica of every shipped scenario, interleaved.

Usage:
    .venv/bin/python benchmarks/speed_ab.py --a /tmp/base [--b .] [--replicas 40]
        [--rounds 4] [--seconds 0.4] [--seed 0] [--only NAME]... [--file PATH]...
        [--set KEY=VALUE]...

Each checkout runs in a worker process of its own (its own `sim` on the path), kept for
the whole run so that imports and caches are paid once. For each scenario, each round
asks A and B (A first in even rounds, B first in odd ones) for the same replicas with the same seed, one core at a time (as many
replicas as take A about `--seconds` of CPU, at least `--replicas`), and reads the worker's CPU time. It prints the ratio of
each side's best round and the median of the rounds' own ratios (each round measures A and
B next to each other: the machine's speed drifts by tens of percent over minutes, and a
round's pair shares its drift). B / A above 1 means B is slower. The two engines may draw
differently: failures per replica are printed so that a ratio can be read against the
work each side did.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the worker: imports one checkout's engine, then answers "scenario replicas seed" lines with
# the CPU seconds per replica and the failures per replica, as JSON
WORKER = r"""
import json, sys, time
root = sys.argv[1]
sys.path.insert(0, root)
from sim.engine import build_plan, simulate_replica
from sim.model.scenario import load_scenario
plans = {}
for line in sys.stdin:
    path, replicas, seed, overrides = json.loads(line)
    key = (path, tuple(overrides))
    if key not in plans:
        plans[key] = build_plan(load_scenario(path, overrides=overrides).points[0].scenario)
        simulate_replica(plans[key], 0, seed)  # caches
    plan = plans[key]
    failures = 0
    start = time.process_time()
    for r in range(replicas):
        failures += simulate_replica(plan, r, seed).failures
    cpu = time.process_time() - start
    print(json.dumps({"cpu": cpu / replicas, "failures": failures / replicas}), flush=True)
"""


class Worker:
    def __init__(self, root: Path):
        self.root = root.resolve()
        python = ROOT / ".venv" / "bin" / "python"
        self.process = subprocess.Popen(
            [str(python if python.exists() else sys.executable), "-c", WORKER, str(self.root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, scenario: Path, replicas: int, seed: int, overrides: list[str]) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([str(scenario), replicas, seed, overrides]) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            sys.exit(f"the worker of {self.root} stopped (see its error above)")
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="the checkout compared against")
    parser.add_argument("--b", type=Path, default=ROOT, help="the checkout measured")
    parser.add_argument("--replicas", type=int, default=10, help="at least this many a batch")
    parser.add_argument("--seconds", type=float, default=0.4, help="CPU of a batch, about")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", action="append", default=[], help="scenario file stem")
    parser.add_argument(
        "--file", action="append", default=[], type=Path, help="a scenario file instead"
    )
    parser.add_argument(
        "--set", action="append", default=[], dest="overrides", help="KEY=VALUE on every scenario"
    )
    args = parser.parse_args()
    scenarios = sorted((ROOT / "scenarios").glob("*.yaml"))
    if args.only:
        scenarios = [s for s in scenarios if s.stem in args.only]
    if args.file:
        scenarios = [path.resolve() for path in args.file]
    a, b = Worker(args.a), Worker(args.b)
    print(f"A: {a.root}\nB: {b.root}\nCPU ms per replica, best of {args.rounds} rounds")
    print(f"{'scenario':<24} {'A ms':>9} {'B ms':>9} {'B / A':>7} {'median':>8}   failures A / B")
    try:
        for scenario in scenarios:
            best = {"a": float("inf"), "b": float("inf")}
            ratios = []  # B / A of each round: the two measured next to each other
            failures = {}
            probe = a.run(scenario, args.replicas, args.seed, args.overrides)["cpu"]
            replicas = max(args.replicas, round(args.seconds / probe))
            for round_ in range(args.rounds):
                order = (("a", a), ("b", b)) if round_ % 2 == 0 else (("b", b), ("a", a))
                cpu = {}
                for name, worker in order:
                    result = worker.run(scenario, replicas, args.seed, args.overrides)
                    cpu[name] = result["cpu"]
                    best[name] = min(best[name], result["cpu"])
                    failures[name] = result["failures"]
                ratios.append(cpu["b"] / cpu["a"])
            print(
                f"{scenario.stem:<24} {best['a'] * 1e3:>9.3f} {best['b'] * 1e3:>9.3f}"
                f" {best['b'] / best['a']:>7.3f} {statistics.median(ratios):>8.3f}"
                f"   {failures['a']:.1f} / {failures['b']:.1f}",
                flush=True,
            )
    finally:
        a.close()
        b.close()


if __name__ == "__main__":
    main()
