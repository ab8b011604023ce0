"""Gray failures and data faults, as paired differences with 95% confidence intervals:
how fast stragglers must be detected, and what keep_last and checkpoint validation are
worth against corrupt checkpoints.

Every comparison runs the same replicas (same seed) at each setting: replica r draws
the same failure lifetimes, straggler onsets and corruption draws everywhere (common
random numbers), so the difference of replica r's two results is a paired sample.
Intervals are normal: mean ± 1.96 · sd / √n.

Usage:
    .venv/bin/python benchmarks/gray_tradeoffs.py [--replicas 200] [--seed 7] [--workers 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the reference scenario, the paired intervals and the tables are the operations benchmark's
from benchmarks.ops_tradeoffs import ci, point, print_table, run_sections, table  # noqa: E402

# The straggler model of scenarios/llama70b-1k-gray.yaml (its comment gives the sources)
# on the reference run: 0.3 per 1,000 GPU-days, slowdowns 0.2-0.5, clearing in ~3 h.
STRAGGLERS = [
    "stragglers={rate_per_1k_gpu_day: 0.3, slowdown: 0.2, slowdown_max: 0.5, "
    "clear_hours: 3, repair_hours: 24}"
]
DETECT_HOURS = ("0.5", "2", "8", "null")  # null: never detected

# Corrupt checkpoints at 1% per write (ten times the gray scenario's assumption, so that a
# few hundred replicas see enough of them) on the reference run.
CORRUPTION = ["checkpoint.corrupt_prob=0.01"]
KEEP_LAST = ("1", "2", "5")


def stragglers(args: argparse.Namespace) -> None:
    frame = table(STRAGGLERS, [f"stragglers.detect_hours={','.join(DETECT_HOURS)}"], args)
    never = point(frame, len(DETECT_HOURS) - 1)
    rows = []
    for i, hours in enumerate(DETECT_HOURS):
        at = point(frame, i)
        rows.append(
            [
                "never" if hours == "null" else f"{hours} h",
                f"{at['goodput'].mean():.4f}",
                ci(at, never, "goodput"),
                ci(at, never, "slowdown_hours", 2),
                ci(at, never, "downtime_hours", 2),
                f"{at['stragglers'].mean():.1f}",
                f"{at['straggler_hours'].mean():.1f}",
                f"{at['nodes_drained'].mean():.1f}",
            ]
        )
    print_table(
        "Stragglers on llama70b-1k (0.3 per 1,000 GPU-days, slowdown 0.2-0.5, clearing in ~3 h): "
        "detect_hours against never detected, paired",
        ["detect", "goodput", "d goodput [95% CI]", "d slowdown h", "d downtime h",
         "stragglers", "straggler h", "drained"],
        rows,
    )  # fmt: skip


def corruption(args: argparse.Namespace) -> None:
    frame = table(
        CORRUPTION,
        [f"checkpoint.keep_last={','.join(KEEP_LAST)}", "checkpoint.validate=false,true"],
        args,
    )
    # points: keep_last varies slowest (the sweep's cartesian order)
    rows = []
    plain = point(frame, 2 * (len(KEEP_LAST) - 1))  # keep_last 5, no validation
    for i, keep in enumerate(KEEP_LAST):
        off, on = point(frame, 2 * i), point(frame, 2 * i + 1)
        rows.append(
            [
                keep,
                f"{off['lost_work_hours'].mean():.2f}",
                f"{on['lost_work_hours'].mean():.2f}",
                f"{off['checkpoints_corrupt'].mean():.2f}",
                f"{off['rollback_exhausted'].mean():.3f}",
                ci(off, plain, "wall_hours", 2),
                ci(on, off, "checkpoint_stall_hours", 3),
                ci(on, off, "wall_hours", 2),
            ]
        )
    print_table(
        "Corrupt checkpoints on llama70b-1k (1% of writes): keep_last with and without "
        "validation, paired",
        ["keep_last", "lost work h", "lost work h (validated)", "corrupt found",
         "exhausted", "d wall h vs keep 5", "validation: d stall h", "validation: d wall h"],
        rows,
    )  # fmt: skip


def main() -> None:
    run_sections(__doc__.splitlines()[0], stragglers, corruption)


if __name__ == "__main__":
    main()
