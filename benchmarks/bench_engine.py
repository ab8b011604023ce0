"""Engine speed and memory: replicas per second per core, and a 10,000-replica run end to end.

Usage: .venv/bin/python benchmarks/bench_engine.py [--quick]

Per-core figures run one replica after another in this process; the end-to-end
figure runs `trainsim run`'s library path (all cores, parquet, summary,
figures) into a temporary directory. Peak memory is the process's max RSS.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.api import run_scenario  # noqa: E402
from sim.engine import build_plan, simulate_replica  # noqa: E402
from sim.scenario import load_scenario  # noqa: E402

TARGETS = {"llama70b-1k": 300.0, "llama3-405b-16k": 20.0}


def per_core(path: Path, replicas: int) -> tuple[float, float, float]:
    """Replicas/s on one core, mean failures per replica, peak traced MB of one replica's model."""
    plan = build_plan(load_scenario(path).base)
    simulate_replica(plan, 0, 0)  # warm-up (imports, caches)
    start = time.perf_counter()
    failures = sum(simulate_replica(plan, r, 0).failures for r in range(replicas))
    rate = replicas / (time.perf_counter() - start)
    tracemalloc.start()
    simulate_replica(plan, 0, 0)
    peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return rate, failures / replicas, peak_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer replicas (a smoke run)")
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0

    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(
        f"{'scenario':<18} {'replicas/s/core':>16} {'target':>8} {'failures/replica':>17} {'peak MB/replica':>16}"
    )
    for name, replicas in [("llama70b-1k", 3000), ("llama3-405b-16k", 100)]:
        rate, failures, peak = per_core(
            ROOT / "scenarios" / f"{name}.yaml", max(10, int(replicas * scale))
        )
        verdict = "ok" if rate >= TARGETS[name] else "MISSED"
        print(
            f"{name:<18} {rate:>16.1f} {TARGETS[name]:>8.0f} {failures:>17.1f} {peak:>16.2f}  {verdict}"
        )

    replicas = int(10_000 * scale)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        outcome = run_scenario(
            ROOT / "scenarios" / "llama70b-1k.yaml", replicas=replicas, out=out, progress=False
        )
        elapsed = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
    print(
        f"end to end: {replicas:,} replicas of llama70b-1k on {os.cpu_count()} workers in {elapsed:.1f} s "
        f"({len(outcome.table):,} rows written; target < 60 s for 10,000)"
    )
    print(f"peak RSS: this process {rss_mb:.0f} MB, largest worker {children_mb:.0f} MB")


if __name__ == "__main__":
    main()
