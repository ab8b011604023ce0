"""A run's summary table: per sweep point and metric the mean, standard deviation,
standard error and percentiles (`summarize`, or `summarize_file` read one column at a time),
the points that cannot run listed with their reason, and the summary JSON of `--json` and
summary.json.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from sim import __version__
from sim.model.scenario_set import ScenarioSet
from sim.runs.montecarlo import COLUMNS

# Every numeric per-replica column of the public table is summarised.
METRICS = [c for c in COLUMNS if c not in ("scenario", "point", "replica", "seed", "finished")]
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
    return metrics_of_names(list(table.columns))


def metrics_of_names(names: list[str]) -> list[str]:
    """The public metrics, then a failures_<class> column per failure class."""
    return METRICS + sorted(c for c in names if c.startswith("failures_") and c not in METRICS)


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
    return pd.DataFrame(records, columns=_summary_columns(swept_keys))


def _summary_columns(swept_keys: list[str]) -> list[str]:
    """The columns of a summary, also when it has no row (every replica an error)."""
    return ["point", *swept_keys, "metric", *STATISTICS, "n"]


def summarize_file(path: str | Path, swept_keys: list[str] | None = None) -> pd.DataFrame:
    """`summarize` of a replicas.parquet, reading one metric column at a time: memory does
    not grow with the columns (and little with the replicas)."""
    swept_keys = swept_keys or []
    names = pq.read_schema(path).names
    base = pd.read_parquet(path, columns=["point", "finished", "error", *swept_keys])
    ok = base[base["error"] == ""]
    groups = list(ok.groupby("point", sort=True).groups.items())
    params = {point: {k: ok.loc[index[0], k] for k in swept_keys} for point, index in groups}
    records = {point: [] for point, _ in groups}
    for metric in metrics_of_names(names):
        values = pd.read_parquet(path, columns=[metric])[metric]
        for point, index in groups:
            records[point].append(
                {"point": point, **params[point], "metric": metric, **describe(values[index])}
            )
    for point, index in groups:
        finished = ok.loc[index, "finished"].astype(float)
        records[point].append(
            {"point": point, **params[point], "metric": "finished_fraction", **describe(finished)}
        )
    return pd.DataFrame(
        [r for point, _ in groups for r in records[point]], columns=_summary_columns(swept_keys)
    )


def with_infeasible(
    summary: pd.DataFrame, scenario_set: ScenarioSet, points: Any = None
) -> pd.DataFrame:
    """The summary with a row per infeasible point (of `points`, default all): its point and
    swept values, no metric and no statistic, n = 0, and the reason in `infeasible`, which
    is empty on every other row. Rows stay in point order (summary.csv's shape)."""
    keys = scenario_set.swept_keys
    summary = summary.copy()
    summary["infeasible"] = ""
    extra = [
        {
            "point": p.index,
            **{k: python_value(p.params[k]) for k in keys},
            "n": 0,
            "infeasible": p.infeasible,
        }
        for p in scenario_set.points
        if p.infeasible is not None and (points is None or p.index in points)
    ]
    if not extra:
        return summary
    rows = pd.DataFrame(extra, columns=list(summary.columns))
    rows = rows.astype({c: "float64" for c in STATISTICS})
    both = [frame for frame in (summary, rows) if len(frame)]
    merged = pd.concat(both, ignore_index=True) if len(both) > 1 else both[0].copy()
    merged = merged.sort_values("point", kind="stable").reset_index(drop=True)
    merged["n"] = merged["n"].astype("int64")
    return merged


def summary_json(
    scenario_set: ScenarioSet,
    table: pd.DataFrame,
    summary: pd.DataFrame,
    replicas: int,
    seed: int | None = None,
) -> dict[str, Any]:
    """The documented `--json` document: scenario, replicas, and per point its params and
    metrics (`table` needs only the point, finished and error columns). A point that cannot
    run has `infeasible` (its reason; null for the others), no replica and no metric."""
    points = []
    for point in scenario_set.points:
        if point.infeasible is not None:
            points.append(
                {
                    "point": point.index,
                    "params": {k: python_value(v) for k, v in point.params.items()},
                    "infeasible": point.infeasible,
                    "replicas": 0,
                    "finished": 0,
                    "errors": 0,
                    "metrics": {},
                }
            )
            continue
        rows = summary[summary["point"] == point.index]
        group = table[table["point"] == point.index]
        metrics = {
            row.metric: {k: _json_number(getattr(row, k)) for k in STATISTICS}
            for row in rows.itertuples()
        }
        points.append(
            {
                "point": point.index,
                "params": {k: python_value(v) for k, v in point.params.items()},
                "infeasible": None,
                "finished": int(group["finished"].sum()),
                "errors": int((group["error"] != "").sum()),
                "metrics": metrics,
            }
        )
    return {
        "scenario": scenario_set.name,
        "replicas": replicas,
        "seed": seed,
        "trainsim_version": __version__,
        "points": points,
    }


def _json_number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def python_value(value: Any) -> Any:
    """A numpy scalar as its Python value (for JSON); anything else as it is."""
    return value.item() if isinstance(value, np.generic) else value
