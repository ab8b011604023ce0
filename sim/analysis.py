"""Summaries of replica tables and the checkpoint-interval theory to compare with.

`summarize` gives mean, std, standard error and percentiles per metric and
sweep point; Young, Daly and Daly's expected wall time are re-exported from
`sim.perf` so notebooks find the theory and the statistics in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sim import perf
from sim.montecarlo import COLUMNS
from sim.perf import daly_expected_wall_s, daly_interval_s, young_interval_s
from sim.scenario import Scenario, ScenarioSet

__all__ = [
    "METRICS",
    "STATISTICS",
    "daly_expected_wall_s",
    "daly_interval_s",
    "interval_marks",
    "optimize",
    "summarize",
    "summary_json",
    "young_interval_s",
]

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
    seconds = {name: perf.theory_interval_s(scenario, name.lower()) for name in ("Young", "Daly")}
    if not all(math.isfinite(v) for v in seconds.values()):
        return {}
    if swept_key == "checkpoint.interval_steps":
        step_s = perf.step_time_s(scenario)
        return {k: v / step_s for k, v in seconds.items()}
    if swept_key == "checkpoint.interval_minutes":
        return {k: v / 60.0 for k, v in seconds.items()}
    return {}


@dataclass(frozen=True)
class Optimum:
    """The sweep point with the best statistic of a metric, and how sure we are of it."""

    key: str
    metric: str
    statistic: str
    best: Any  # the swept value
    best_value: float
    best_ci: tuple[float, float]
    runner_up: Any
    runner_up_value: float
    difference: float  # runner-up minus best (paired, same replicas)
    difference_ci: tuple[float, float]
    points: pd.DataFrame  # per swept value: the statistic and its 95% CI


def _statistic(values: np.ndarray, statistic: str) -> float:
    if statistic == "mean":
        return float(values.mean())
    return float(np.percentile(values, float(statistic.lstrip("p"))))


def _ci(
    values: np.ndarray, statistic: str, rng: np.random.Generator, draws: int = 1000
) -> tuple[float, float]:
    """95% CI: normal for the mean, bootstrap for percentiles (fixed seed: reproducible)."""
    if statistic == "mean":
        half = 1.96 * values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else math.nan
        return float(values.mean() - half), float(values.mean() + half)
    samples = rng.choice(values, size=(draws, values.size), replace=True)
    stats = np.percentile(samples, float(statistic.lstrip("p")), axis=1)
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def check_statistic(statistic: str) -> None:
    """'mean' or a percentile 'pNN' (0-100)."""
    number = statistic[1:]
    if statistic != "mean" and not (
        statistic.startswith("p")
        and number.replace(".", "", 1).isdigit()
        and 0 <= float(number) <= 100
    ):
        raise ValueError(f"statistic must be 'mean' or a percentile like 'p95', not {statistic!r}")


def optimize(
    table: pd.DataFrame, key: str, metric: str = "time_to_train_days", statistic: str = "mean"
) -> Optimum:
    """The swept value of `key` with the lowest `statistic` (mean, p50, p95, ...) of `metric`.

    Replicas share random numbers across points, so the difference to the runner-up
    is paired replica by replica: its interval is much tighter than the two CIs.
    """
    check_statistic(statistic)
    ok = table[table["error"] == ""] if "error" in table else table
    wide = ok.pivot_table(index="replica", columns=key, values=metric, aggfunc="first")
    wide = wide.dropna()  # a replica counts where it finished at every point
    if len(wide) < 2 or wide.shape[1] < 2:
        raise ValueError(
            f"need at least two swept values of {key} with finished replicas to compare"
        )
    rng = np.random.default_rng(0)
    rows = []
    for value in wide.columns:
        x = wide[value].to_numpy()
        low, high = _ci(x, statistic, rng)
        rows.append(
            {key: value, statistic: _statistic(x, statistic), "ci_low": low, "ci_high": high}
        )
    points = pd.DataFrame(rows).sort_values(statistic, kind="stable").reset_index(drop=True)
    best, runner = points[key].iloc[0], points[key].iloc[1]
    a, b = wide[best].to_numpy(), wide[runner].to_numpy()
    if statistic == "mean":
        diff = b - a
        difference = float(diff.mean())
        half = 1.96 * diff.std(ddof=1) / math.sqrt(diff.size)
        difference_ci = (difference - half, difference + half)
    else:
        q = float(statistic.lstrip("p"))
        difference = float(np.percentile(b, q) - np.percentile(a, q))
        idx = rng.integers(0, a.size, size=(1000, a.size))
        boot = np.percentile(b[idx], q, axis=1) - np.percentile(a[idx], q, axis=1)
        difference_ci = (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
    row = points.iloc[0]
    return Optimum(
        key,
        metric,
        statistic,
        _json_value(best),
        float(row[statistic]),
        (float(row.ci_low), float(row.ci_high)),
        _json_value(runner),
        float(points[statistic].iloc[1]),
        difference,
        difference_ci,
        points,
    )
