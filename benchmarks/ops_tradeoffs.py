"""Operations trade-offs, as paired differences with 95% confidence intervals: retiring
lemon nodes, retiring too eagerly, and health checks (catch 0 against 0.5) at a few
check costs.

Every comparison runs the same replicas (same seed) at each setting: replica r draws
the same failure lifetimes everywhere (common random numbers), so the difference of
replica r's two results is a paired sample and its mean has a much tighter interval
than the difference of two means. Intervals are normal: mean ± 1.96 · sd / √n.

Usage:
    .venv/bin/python benchmarks/ops_tradeoffs.py [--replicas 200] [--seed 7] [--workers 2]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.model.scenario import load_scenario  # noqa: E402
from sim.runs.montecarlo import run  # noqa: E402

REFERENCE = ROOT / "scenarios" / "llama70b-1k.yaml"

# The reference run on 512 nodes (TP 8 x PP 4 = 4 nodes per replica: 128 replicas), a tenth
# of the fleet lemons failing 5x as often, a repair pipeline with false fixes.
LEMONS = [
    "cluster.nodes=512",
    "cluster.spare_nodes=16",
    "cluster.lemon_fraction=0.1",
    "cluster.lemon_rate_multiplier=5",
    "repair.auto_minutes=120",
    "repair.escalate_prob=0.5",
    "repair.auto_false_fix_prob=0.4",
    "repair.manual_hours=48",
    "repair.manual_false_fix_prob=0.2",
    "repair.retire_window_days=7",
]
# Lemons that fail about weekly (a 50x multiplier: mean life ~6 days, the window's length)
# and that repair seldom cures (automated repair is mostly a false fix), with more spares.
# The newest spare goes in first, so a lemon back from a false fix is the next one in: with
# the default (oldest first) it would wait behind the 32 spares, past the end of this ~6-day
# run, and retiring it would change nothing.
PERSISTENT_LEMONS = [
    *LEMONS,
    "cluster.spare_order=newest",
    "cluster.spare_nodes=32",
    "cluster.lemon_rate_multiplier=50",
    "repair.escalate_prob=0.2",
    "repair.auto_false_fix_prob=0.8",
    "repair.manual_false_fix_prob=0.5",
]
# Retire at the first failure (a year-long window) with only 4 spares: the fleet shrinks
# to the job's size and every later failure waits for a repair.
EAGER = [*LEMONS, "cluster.spare_nodes=4", "repair.retire_window_days=365"]

CHECK_COSTS_MINUTES = (2, 10, 30)
CHECKS = ["health_checks.every_hours=24", "health_checks.lead_hours=12"]


def table(overrides: list[str], params: list[str], args: argparse.Namespace) -> pd.DataFrame:
    scenario_set = load_scenario(REFERENCE, overrides=overrides, params=params)
    return run(scenario_set, args.replicas, args.seed, args.workers, progress=False)


def point(frame: pd.DataFrame, index: int) -> pd.DataFrame:
    return frame[frame["point"] == index].set_index("replica")


def paired(after: pd.DataFrame, before: pd.DataFrame, column: str) -> tuple[float, float]:
    """Mean of the per-replica differences after - before, and its 95% half-width."""
    diff = (after[column] - before[column]).dropna()
    if len(diff) < 2:
        return math.nan, math.nan
    return float(diff.mean()), 1.96 * float(diff.std(ddof=1)) / math.sqrt(len(diff))


def ci(after: pd.DataFrame, before: pd.DataFrame, column: str, digits: int = 4) -> str:
    mean, half = paired(after, before, column)
    return f"{mean:+.{digits}f} [{mean - half:+.{digits}f}, {mean + half:+.{digits}f}]"


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


def retirement(args: argparse.Namespace) -> None:
    cases = [
        ("lemons 5x, retire 2 in 7 d", LEMONS, "repair.retire_after_failures=null,2"),
        ("persistent lemons 50x, retire 2 in 7 d", PERSISTENT_LEMONS, "repair.retire_after_failures=null,2"),
        ("eager: retire 1 in 365 d, 4 spares", EAGER, "repair.retire_after_failures=null,1"),
    ]  # fmt: skip
    rows = []
    for name, overrides, param in cases:
        frame = table(overrides, [param], args)
        off, on = point(frame, 0), point(frame, 1)
        rows.append(
            [
                name,
                f"{off['goodput'].mean():.4f}",
                f"{on['goodput'].mean():.4f}",
                ci(on, off, "goodput"),
                ci(on, off, "time_to_train_days", 2),
                f"{off['failures_lemon'].mean():.1f} / {on['failures_lemon'].mean():.1f}",
                f"{on['nodes_retired'].mean():.2f} ({on['lemons_retired'].mean():.2f})",
                f"{on['node_wait_hours'].mean():.1f}",
                f"{(on['goodput'] != off['goodput']).mean():.2f}",
            ]
        )
    print_table(
        "Retirement (512 nodes, 10% lemons): retire_after_failures set vs null, paired",
        ["case", "goodput off", "goodput on", "d goodput [95% CI]", "d days to train [95% CI]",
         "failures_lemon off/on", "retired (lemons)", "node wait h (on)", "replicas changed"],
        rows,
    )  # fmt: skip


def health_checks(args: argparse.Namespace) -> None:
    base = point(table([], [], args), 0)
    cost_rows, saved_rows = [], []
    for cost in CHECK_COSTS_MINUTES:
        frame = table(
            [*CHECKS, f"health_checks.cost_minutes={cost}"],
            ["health_checks.catch_prob=0,0.5"],
            args,
        )
        blind, catching = point(frame, 0), point(frame, 1)
        cost_rows.append(
            [
                f"{cost} min",
                ci(blind, base, "downtime_hours", 2),
                ci(catching, blind, "lost_work_hours", 2),
                ci(catching, blind, "failures", 2),
                ci(catching, blind, "restarts", 2),
                ci(catching, blind, "downtime_hours", 2),
                f"{catching['nodes_drained'].mean():.2f}",
            ]
        )
        saved_rows.append(
            [
                f"{cost} min",
                ci(catching, base, "wall_hours", 2),
                ci(catching, base, "goodput"),
                ci(blind, base, "goodput"),
            ]
        )
    print_table(
        "Health checks on llama70b-1k (every 24 h, lead 12 h): the checks' cost (catch 0 - "
        "none) and what catching saves (catch 0.5 - catch 0), paired",
        ["check cost", "d downtime h: cost", "d lost work h", "d failures", "d restarts",
         "d downtime h", "drained (0.5)"],
        cost_rows,
    )  # fmt: skip
    print_table(
        "Health checks, net against no checks (paired)",
        ["check cost", "d wall h (catch 0.5)", "d goodput (catch 0.5)", "d goodput (catch 0)"],
        saved_rows,
    )


def run_sections(description: str, *sections: Callable[[argparse.Namespace], None]) -> None:
    """Parse --replicas, --seed and --workers, and print each section's tables (timed)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"replicas {args.replicas} per setting, seed {args.seed}, workers {args.workers}")
    start = time.perf_counter()
    for section in sections:
        section(args)
    print(f"\n{time.perf_counter() - start:.1f} s")


def main() -> None:
    run_sections(__doc__.splitlines()[0], retirement, health_checks)


if __name__ == "__main__":
    main()
