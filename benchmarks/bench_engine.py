"""Engine speed and memory: replicas per second per core, CPU per failure, and a 10,000-replica run end to end.

Usage: .venv/bin/python benchmarks/bench_engine.py [--quick] [--no-e2e] [--no-big]
           [--root PATH] [--seed N] [--json PATH]

Per-core figures run one replica after another in this process (serial, one core,
seed 0 unless --seed): replicas/s is wall clock, µs per failure is the process's CPU
time divided by the failures the replicas counted. The end-to-end figure runs
`trainsim run`'s library path (all cores, parquet, summary, figures) into a
temporary directory. Peak memory is the process's max RSS.

Scenarios:
  llama70b-1k, llama3-405b-16k   the shipped files, every operations section absent
  llama3-405b-16k+ops            the 16k file with the operations features on (OPS_16K)
  big-4k-256d[+ops]              derived from llama3-405b-16k (see `big_overrides`):
                                 4,096 nodes, 256 spares, tokens scaled so the ideal
                                 time is 256 days, every failure rate × RATE_SCALE so a
                                 replica sees ~11,000 failures; +ops: lemons and the
                                 repair pipeline (OPS_BIG); +lemons: 15% lemons, the
                                 repair pipeline with false fixes, a cold pool and
                                 every class `while_idle: false` (OPS_LEMONS)

--root runs the same measurements against another checkout (e.g. a git worktree of
an older commit): its `sim` package and its scenarios/ are used. Rows whose keys its
schema does not know are reported as n/a.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

TARGETS = {"llama70b-1k": 3000.0, "llama3-405b-16k": 20.0, "llama3-405b-16k+ops": 100.0}
BIG_TARGET_S = 0.1  # seconds of one core per replica of the 4,096-node case
BIG_TARGET_US = 8.0  # µs of CPU per failure of the 4,096-node case

# The operations features on the 16k scenario: 5% lemons failing 5x as often, a cold
# pool, the repair pipeline with 20 technicians and retirement, maintenance every two
# weeks and a daily health check.
OPS_16K = [
    "cluster.lemon_fraction=0.05",
    "cluster.lemon_rate_multiplier=5",
    "cluster.pool_nodes=64",
    "repair={technicians: 20, retire_after_failures: 3}",
    "maintenance={every_days: 14, duration_hours: 4}",
    "health_checks={every_hours: 24, cost_minutes: 10, lead_hours: 12}",
]

# The 4,096-node case: llama3-405b-16k doubled to 4,096 nodes (32,768 GPUs), tokens
# scaled so that the ideal (failure-free) time is BIG_IDEAL_DAYS, every class's rate
# per 1,000 GPU-days × RATE_SCALE (the Llama 3 mix gives ~15.5 failures/day on 32k
# GPUs; × 1.6 with 5% lemons at 5× and a wall of ~1.5× the ideal time gives ~11,000).
BIG_NODES, BIG_SPARES, BIG_IDEAL_DAYS, RATE_SCALE = 4096, 256, 256.0, 1.6
# lemons and the repair pipeline; 80 technicians keep the manual-repair queue stable
# (~25 escalations/day × 48 h is ~50 technicians busy)
OPS_BIG = [
    "cluster.lemon_fraction=0.05",
    "cluster.lemon_rate_multiplier=5",
    "repair={technicians: 80, retire_after_failures: 3}",
]
# the lean engine's reference case (issue #17): 15% lemons failing 5x as often, the repair
# pipeline with false fixes (and 80 technicians), a cold pool, and failures that strike only
# while the job computes (every class `while_idle: false`, added by `big_rows`)
OPS_LEMONS = [
    "cluster.lemon_fraction=0.15",
    "cluster.lemon_rate_multiplier=5",
    "cluster.pool_nodes=128",
    "repair={technicians: 80, retire_after_failures: 3, auto_false_fix_prob: 0.3, "
    "manual_false_fix_prob: 0.1}",
]


def import_engine(root: Path) -> None:
    """Import the engine of the checkout at `root` (its `sim` must shadow any other)."""
    sys.path.insert(0, str(root))
    global ScenarioError, build_plan, load_scenario, simulate_replica, sim
    import sim
    from sim.engine import build_plan, simulate_replica
    from sim.model.scenario import load_scenario
    from sim.model.scenario_set import ScenarioError

    here = Path(sim.__file__).resolve().parents[1]
    if here != root.resolve():
        sys.exit(f"sim imported from {here}, not from --root {root}")


def big_overrides(root: Path) -> tuple[list[str], str]:
    """--set overrides deriving the 4,096-node, 256-day case from llama3-405b-16k, and a
    one-line account of the derivation."""
    path = root / "scenarios" / "llama3-405b-16k.yaml"
    base = load_scenario(path).base
    # twice the batch too: 16M tokens over 256 data-parallel replicas would be 8 sequences
    # each, fewer than the 16 pipeline stages (a configuration that cannot run)
    sized = [
        f"cluster.nodes={BIG_NODES}",
        f"cluster.spare_nodes={BIG_SPARES}",
        f"model.global_batch_tokens={2 * base.model.global_batch_tokens}",
    ]
    plan = build_plan(load_scenario(path, overrides=sized).base)
    ideal_days = plan.step_s * plan.total_steps / 86400
    tokens = base.model.tokens * BIG_IDEAL_DAYS / ideal_days
    rates = [
        f"failures.{i}.rate_per_1k_gpu_day={f.rate_per_1k_gpu_day * RATE_SCALE:.6g}"
        for i, f in enumerate(base.failures)
    ]
    gpus = BIG_NODES * base.cluster.gpus_per_node
    per_day = sum(f.rate_per_1k_gpu_day for f in base.failures) * RATE_SCALE * gpus / 1000
    how = (
        f"llama3-405b-16k with nodes {BIG_NODES}, spares {BIG_SPARES}, twice the batch, tokens "
        f"{base.model.tokens:.3g} x {BIG_IDEAL_DAYS:g}/{ideal_days:.2f} d = {tokens:.4g}, "
        f"rates x {RATE_SCALE} ({per_day:.1f} failures per wall day on {gpus:,} GPUs)"
    )
    return [*sized, f"model.tokens={tokens:.6g}", *rates], how


def measure(
    plan: Any, replicas: int, seed: int, warm_up: bool = True, trace: bool = True
) -> dict[str, float]:
    """Run `replicas` replicas one after another: replicas/s (wall), CPU s per replica,
    failures per replica, µs CPU per failure, and the traced peak MB of one replica."""
    if warm_up:
        simulate_replica(plan, 0, seed)  # imports, caches
    wall0, cpu0 = time.perf_counter(), time.process_time()
    failures = 0
    days = 0.0
    for r in range(replicas):
        record = simulate_replica(plan, r, seed)
        failures += record.failures
        days += record.wall_hours / 24
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    peak_mb = float("nan")
    if trace:
        tracemalloc.start()
        simulate_replica(plan, 0, seed)
        peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
    return {
        "replicas": replicas,
        "rate": replicas / wall,
        "cpu_rate": replicas / cpu,
        "wall_s_per_replica": wall / replicas,
        "cpu_s_per_replica": cpu / replicas,
        "failures": failures / replicas,
        "us_per_failure": cpu / failures * 1e6 if failures else float("nan"),
        "wall_days": days / replicas,
        "peak_mb": peak_mb,
    }


def plan_of(path: Path, overrides: list[str] | None = None) -> tuple[Any | None, str]:
    """The plan of a scenario file with overrides; or None and why, when this checkout's
    schema refuses them (an older engine without the operations keys)."""
    try:
        return build_plan(load_scenario(path, overrides=overrides).base), ""
    except ScenarioError as exc:
        return None, f"n/a: {exc.path}: {exc.message}"[:90]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer replicas (a smoke run)")
    parser.add_argument("--no-e2e", action="store_true", help="skip the all-cores end-to-end run")
    parser.add_argument("--no-big", action="store_true", help="skip the 4,096-node case")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose engine to run")
    parser.add_argument("--seed", type=int, default=0, help="seed of every replica (fixed)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this row (repeatable: llama70b-1k, llama3-405b-16k, llama3-405b-16k+ops, "
        "big-4k-256d, big-4k-256d+ops, big-4k-256d+lemons, end-to-end), e.g. to profile one case",
    )
    args = parser.parse_args()
    import_engine(args.root)
    scale = 0.2 if args.quick else 1.0
    seed = args.seed
    scenarios = args.root / "scenarios"
    figures: dict[str, Any] = {"root": str(args.root.resolve()), "seed": seed}

    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"engine: {Path(sim.__file__).resolve().parent}")
    path_16k = scenarios / "llama3-405b-16k.yaml"
    rows = [
        ("llama70b-1k", scenarios / "llama70b-1k.yaml", None, 3000),
        ("llama3-405b-16k", path_16k, None, 100),
        ("llama3-405b-16k+ops", path_16k, OPS_16K, 100),
    ]
    rows = [row for row in rows if not args.only or row[0] in args.only]
    if rows:
        print(
            f"{'scenario':<20} {'replicas/s/core':>16} {'target':>8} {'failures/replica':>17} {'peak MB/replica':>16}"
        )
    for name, path, overrides, replicas in rows:
        plan, why = plan_of(path, overrides)
        if plan is None:
            print(f"{name:<20} {why}")
            continue
        m = measure(plan, max(10, int(replicas * scale)), seed)
        figures[name] = m
        target = TARGETS.get(name)
        verdict = "" if target is None else "  ok" if m["rate"] >= target else "  MISSED"
        shown = f"{target:>8.0f}" if target is not None else f"{'-':>8}"
        print(
            f"{name:<20} {m['rate']:>16.1f} {shown} {m['failures']:>17.1f} {m['peak_mb']:>16.2f}{verdict}"
        )

    if any(name in figures for name, _, _, _ in rows):
        print()
        print("CPU per failure event (one core, process time / failures counted)")
        print(
            f"{'scenario':<20} {'replicas':>8} {'CPU ms/replica':>15} {'failures/replica':>17} {'µs/failure':>11}"
        )
    for name, _, _, _ in rows:
        m = figures.get(name)
        if m is not None:
            print(
                f"{name:<20} {m['replicas']:>8} {m['cpu_s_per_replica'] * 1e3:>15.2f} "
                f"{m['failures']:>17.1f} {m['us_per_failure']:>11.1f}"
            )
    if "llama3-405b-16k" in figures and "llama3-405b-16k+ops" in figures:
        plain, ops = figures["llama3-405b-16k"], figures["llama3-405b-16k+ops"]
        print(
            f"ops on/off, 16k: {ops['cpu_s_per_replica'] / plain['cpu_s_per_replica']:.2f}x CPU "
            f"per replica, {ops['us_per_failure'] / plain['us_per_failure']:.2f}x per failure"
        )

    classes = len(load_scenario(path_16k).base.failures)
    idle_spared = [f"failures.{i}.while_idle=false" for i in range(classes)]
    big = [
        ("big-4k-256d", []),
        ("big-4k-256d+ops", OPS_BIG),
        ("big-4k-256d+lemons", OPS_LEMONS + idle_spared),
    ]
    big = [(name, extra) for name, extra in big if not args.only or name in args.only]
    if not args.no_big and big:
        overrides, how = big_overrides(args.root)
        print()
        print(f"4,096 nodes, 256 ideal days: {how}")
        print(
            f"{'scenario':<20} {'replicas':>8} {'s/replica':>10} {'target':>7} {'failures/replica':>17} "
            f"{'µs/failure':>11} {'target':>7} {'wall days':>10} {'peak MB':>8}"
        )
        replicas = max(3, int(10 * scale))
        for name, extra in big:
            plan, why = plan_of(path_16k, overrides + extra)
            if plan is None:
                print(f"{name:<20} {why}")
                continue
            m = measure(plan, replicas, seed, warm_up=False, trace=not args.quick)
            m["ideal_days"] = plan.step_s * plan.total_steps / 86400
            figures[name] = m
            ok = m["cpu_s_per_replica"] < BIG_TARGET_S and m["us_per_failure"] <= BIG_TARGET_US
            print(
                f"{name:<20} {replicas:>8} {m['cpu_s_per_replica']:>10.3f} {BIG_TARGET_S:>7.1f} "
                f"{m['failures']:>17.0f} {m['us_per_failure']:>11.1f} {BIG_TARGET_US:>7.0f} "
                f"{m['wall_days']:>10.1f} {m['peak_mb']:>8.1f}  {'ok' if ok else 'MISSED'}"
            )

    if not args.no_e2e and (not args.only or "end-to-end" in args.only):
        from sim.runs.api import run_scenario  # pandas, pyarrow, matplotlib: only for this part
        from sim.show.run_figures import write_run_figures

        replicas = int(10_000 * scale)
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            outcome = run_scenario(
                scenarios / "llama70b-1k.yaml",
                replicas=replicas,
                out=out,
                progress=False,
                figures=write_run_figures,
            )
            elapsed = time.perf_counter() - start
            written = len(outcome.table)  # read while the directory exists (the table is lazy)
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
        figures["end_to_end"] = {"replicas": replicas, "seconds": elapsed}
        print()
        print(
            f"end to end: {replicas:,} replicas of llama70b-1k on {os.cpu_count()} workers in {elapsed:.1f} s "
            f"({written:,} rows written; target < 60 s for 10,000)"
        )
        print(f"peak RSS: this process {rss_mb:.0f} MB, largest worker {children_mb:.0f} MB")

    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
