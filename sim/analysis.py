"""Summaries of replica tables and the checkpoint-interval theory to compare with.

`summarize` gives mean, std, standard error and percentiles per metric and
sweep point; Young, Daly and Daly's expected wall time are re-exported from
`sim.perf` so notebooks find the theory and the statistics in one place.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from sim import perf
from sim.perf import daly_expected_wall_s, daly_interval_s, young_interval_s
from sim.scenario import Scenario, ScenarioSet

__all__ = [
    "METRICS",
    "STATISTICS",
    "daly_expected_wall_s",
    "daly_interval_s",
    "interval_marks",
    "summarize",
    "summary_json",
    "young_interval_s",
]

METRICS = [
    "time_to_train_days",
    "wall_hours",
    "ideal_hours",
    "slowdown_hours",
    "lost_work_hours",
    "checkpoint_stall_hours",
    "downtime_hours",
    "goodput",
    "effective_mfu",
    "failures",
    "checkpoints_written",
    "restarts",
    "nodes_replaced",
    "node_wait_hours",
    "lost_gpu_hours",
    "gpu_hours",
    "cost_usd",
]
STATISTICS = ["mean", "std", "sem", "p5", "p50", "p95", "p99"]


def describe(values: pd.Series) -> dict[str, float]:
    """mean, std (ddof=1), standard error, p5/p50/p95/p99 of the non-missing values."""
    x = values.dropna().to_numpy(dtype=float)
    n = x.size
    if n == 0:
        return {k: math.nan for k in STATISTICS} | {"n": 0}
    std = float(x.std(ddof=1)) if n > 1 else 0.0
    p5, p50, p95, p99 = np.percentile(x, [5, 50, 95, 99])
    return {
        "mean": float(x.mean()),
        "std": std,
        "sem": std / math.sqrt(n),
        "p5": float(p5),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "n": n,
    }


def metrics_of(table: pd.DataFrame) -> list[str]:
    return METRICS + sorted(c for c in table.columns if c.startswith("failures_"))


def summarize(table: pd.DataFrame, swept_keys: list[str] | None = None) -> pd.DataFrame:
    """One row per (point, metric) with the swept values, n and the statistics.

    Error rows are left out; `time_to_train_days` is over finished replicas only
    (unfinished ones have none), and `finished_fraction` says how many finished.
    """
    swept_keys = swept_keys or []
    ok = table[table["error"] == ""] if "error" in table else table
    records = []
    for point, group in ok.groupby("point", sort=True):
        params = {k: group[k].iloc[0] for k in swept_keys}
        for metric in metrics_of(table):
            records.append({"point": point, **params, "metric": metric, **describe(group[metric])})
        finished = group["finished"].astype(float)
        records.append(
            {"point": point, **params, "metric": "finished_fraction", **describe(finished)}
        )
    return pd.DataFrame(records)


def summary_json(
    scenario_set: ScenarioSet, table: pd.DataFrame, summary: pd.DataFrame, replicas: int
) -> dict[str, Any]:
    """The documented `--json` document: scenario, replicas, and per point its params and metrics."""
    points = []
    for point in scenario_set.points:
        rows = summary[summary["point"] == point.index]
        group = table[table["point"] == point.index]
        metrics = {
            row.metric: {k: _json_number(getattr(row, k)) for k in STATISTICS}
            for row in rows.itertuples()
        }
        points.append(
            {
                "point": point.index,
                "params": {k: _json_value(v) for k, v in point.params.items()},
                "finished": int(group["finished"].sum()),
                "errors": int((group["error"] != "").sum()),
                "metrics": metrics,
            }
        )
    return {"scenario": scenario_set.name, "replicas": replicas, "points": points}


def _json_number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _json_value(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def interval_marks(scenario: Scenario, swept_key: str) -> dict[str, float]:
    """Young's and Daly's intervals in the unit of the swept checkpoint key (empty if none)."""
    mtbf_s = perf.aggregate_mtbf_hours(scenario) * perf.HOUR_S
    if not math.isfinite(mtbf_s):
        return {}
    write_s = perf.checkpoint_write_s(scenario)
    seconds = {"Young": young_interval_s(write_s, mtbf_s), "Daly": daly_interval_s(write_s, mtbf_s)}
    if swept_key == "checkpoint.interval_steps":
        step_s = perf.step_time_s(scenario)
        return {k: v / step_s for k, v in seconds.items()}
    if swept_key == "checkpoint.interval_minutes":
        return {k: v / 60.0 for k, v in seconds.items()}
    return {}
