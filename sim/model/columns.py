"""Names of output columns that several layers share, and how to read a metric.

The parts of downtime and of the cost (docs/metrics.md), which way a metric is
better and the unit its name carries. Imports nothing (no engine, no simpy), so
that figures and reports can use it as well as the engine.
"""

from __future__ import annotations

# The buckets of the time identity wall = ideal + slowdown + lost_work + checkpoint_stall + downtime.
TIME_BUCKETS = ("ideal", "slowdown", "lost_work", "checkpoint_stall", "downtime")

# The parts of downtime, in output order; each is a `<part>_hours` column and sums to downtime_hours.
DOWNTIME_PARTS = (
    "detect",
    "node_wait",
    "restart",
    "checkpoint_load",
    "rescale",
    "storage_wait",
    "maintenance",
    "health_check",
    "human_wait",
)
DOWNTIME_COLUMNS = tuple(f"{part}_hours" for part in DOWNTIME_PARTS)

# The parts of cost_usd: the job's GPUs over each time bucket, and the fleet beyond the job.
COST_PARTS = (*TIME_BUCKETS, "idle_spares")
COST_COLUMNS = tuple(f"cost_{part}_usd" for part in COST_PARTS)

# The metrics a run's summary table shows (`trainsim run`, the report), with their labels.
SUMMARY_METRICS = [
    ("time_to_train_days", "time to train (days)"),
    ("wall_hours", "wall (hours)"),
    ("lost_work_hours", "lost work (hours)"),
    ("checkpoint_stall_hours", "checkpoint stall (hours)"),
    ("downtime_hours", "downtime (hours)"),
    ("slowdown_hours", "slowdown (hours)"),
    ("goodput", "goodput"),
    ("effective_mfu", "effective MFU"),
    ("failures", "failures"),
    ("cost_usd", "cost (USD)"),
]

# Metrics where more is better; every other metric (times, costs, counts) is minimised.
MAXIMIZED = frozenset({"goodput", "effective_mfu", "finished_fraction"})


def better_direction(metric: str) -> str:
    """'max' for goodput-like metrics, 'min' for times, costs and counts."""
    return "max" if metric in MAXIMIZED else "min"


def unit_of(metric: str) -> str:
    """The unit a metric's name carries ('' for ratios and counts)."""
    if "gpu_hours" in metric:
        return "GPU-h"
    for suffix, unit in (
        ("_usd", "USD"),
        ("_days", "days"),
        ("_hours", "h"),
        ("_TB", "TB"),
        ("_GB", "GB"),
    ):
        if metric.endswith(suffix) or f"{suffix}_" in metric:
            return unit
    return ""
