"""Summaries of replica tables and the checkpoint-interval theory to compare with.

`summarize` gives mean, std, standard error and percentiles per metric and
sweep point; Young, Daly and Daly's expected wall time are re-exported from
`sim.perf` so notebooks find the theory and the statistics in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from sim import __version__, perf
from sim.montecarlo import COLUMNS
from sim.perf import daly_expected_wall_s, daly_interval_s, young_interval_s
from sim.scenario import Scenario, ScenarioSet

__all__ = [
    "METRICS",
    "STATISTICS",
    "daly_expected_wall_s",
    "daly_interval_s",
    "interval_marks",
    "better_direction",
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
    return pd.DataFrame(records)


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
    return pd.DataFrame([r for point, _ in groups for r in records[point]])


def summary_json(
    scenario_set: ScenarioSet,
    table: pd.DataFrame,
    summary: pd.DataFrame,
    replicas: int,
    seed: int | None = None,
) -> dict[str, Any]:
    """The documented `--json` document: scenario, replicas, and per point its params and
    metrics (`table` needs only the point, finished and error columns)."""
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
    return {
        "scenario": scenario_set.name,
        "replicas": replicas,
        "seed": seed,
        "trainsim_version": __version__,
        "points": points,
    }


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


@dataclass(frozen=True)
class Optimum:
    """The sweep point with the best statistic of a metric, and how sure we are of it.

    `best` is the value with the best statistic, or None when several tie (`tied` lists
    them; a unique best is `tied == [best]`); `points` has,
    per swept value, the statistic, its 95% CI, the paired difference to the best
    (worse is positive) with its 95% CI, and a verdict: best, tied, indistinguishable
    (the difference's CI includes 0) or worse.
    """

    key: str
    metric: str
    statistic: str
    direction: str  # max | min
    best: Any  # the swept value with the best statistic; None when values tie
    tied: list[Any]  # the swept values sharing the best statistic (one when unique)
    best_value: float
    best_ci: tuple[float, float]
    runner_up: Any  # the best of the rest (None when every value ties)
    runner_up_value: float
    difference: float  # how much worse the runner-up is (paired, same replicas); >= 0
    difference_ci: tuple[float, float]
    points: pd.DataFrame  # per swept value, best first


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


def _paired_difference(
    worse: np.ndarray, best: np.ndarray, statistic: str, rng: np.random.Generator
) -> tuple[float, float, float]:
    """statistic(worse) − statistic(best) with a 95% CI, pairing replica by replica."""
    if statistic == "mean":
        diff = worse - best
        mean = float(diff.mean())
        half = 1.96 * diff.std(ddof=1) / math.sqrt(diff.size)
        return mean, mean - half, mean + half
    q = float(statistic.lstrip("p"))
    point = float(np.percentile(worse, q) - np.percentile(best, q))
    idx = rng.integers(0, best.size, size=(1000, best.size))
    boot = np.percentile(worse[idx], q, axis=1) - np.percentile(best[idx], q, axis=1)
    return point, float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


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
    table: pd.DataFrame,
    key: str,
    metric: str = "time_to_train_days",
    statistic: str = "mean",
    direction: str | None = None,
) -> Optimum:
    """The swept value of `key` with the best `statistic` (mean, p50, p95, ...) of `metric`:
    the highest for goodput and effective MFU, the lowest for times and costs, unless
    `direction` ('max' or 'min') says otherwise.

    Replicas share random numbers across points, so each difference to the best is
    paired replica by replica: its interval is much tighter than the two CIs. Values
    whose statistic equals the best's (to float noise) tie: none of them is called
    the best alone.
    """
    check_statistic(statistic)
    direction = direction or better_direction(metric)
    if direction not in ("max", "min"):
        raise ValueError(f"direction must be 'max' or 'min', not {direction!r}")
    sign = -1.0 if direction == "max" else 1.0  # internally: lower signed statistic is better
    ok = table[table["error"] == ""] if "error" in table else table
    wide = ok.pivot_table(index="replica", columns=key, values=metric, aggfunc="first")
    wide = wide.dropna()  # a replica counts where it finished at every point
    if len(wide) < 2 or wide.shape[1] < 2:
        raise ValueError(
            f"need at least two swept values of {key} with finished replicas to compare"
        )
    rng = np.random.default_rng(0)
    stats = {value: _statistic(wide[value].to_numpy(), statistic) for value in wide.columns}
    order = sorted(wide.columns, key=lambda v: sign * stats[v])
    leader = order[0]
    scale = max(1.0, abs(stats[leader]))
    tied = [v for v in order if abs(stats[v] - stats[leader]) <= 1e-12 * scale]
    best_x = wide[leader].to_numpy()
    rows = []
    for value in order:
        x = wide[value].to_numpy()
        low, high = _ci(x, statistic, rng)
        diff, diff_low, diff_high = _paired_difference(x, best_x, statistic, rng)
        if sign < 0:  # maximised: being worse means being lower
            diff, diff_low, diff_high = -diff, -diff_high, -diff_low
        if value in tied:
            verdict = "best" if len(tied) == 1 else "tied for best"
        elif diff_low <= 0.0:
            verdict = "indistinguishable"
        else:
            verdict = "worse"
        rows.append(
            {
                key: _json_value(value),
                statistic: stats[value],
                "ci_low": low,
                "ci_high": high,
                "difference": diff,
                "difference_ci_low": diff_low,
                "difference_ci_high": diff_high,
                "verdict": verdict,
            }
        )
    points = pd.DataFrame(rows)
    points[key] = pd.Series([r[key] for r in rows], dtype=object)  # keep ints as ints
    first = points.iloc[0]
    rest = points.iloc[len(tied) :]
    if len(rest):
        runner = rest.iloc[0]
        runner_up, runner_value = runner[key], float(runner[statistic])
        difference = float(runner["difference"])
        difference_ci = (float(runner["difference_ci_low"]), float(runner["difference_ci_high"]))
    else:
        runner_up, runner_value, difference, difference_ci = None, math.nan, 0.0, (0.0, 0.0)
    return Optimum(
        key,
        metric,
        statistic,
        direction,
        _json_value(leader) if len(tied) == 1 else None,
        [_json_value(v) for v in tied],
        float(first[statistic]),
        (float(first.ci_low), float(first.ci_high)),
        runner_up,
        runner_value,
        difference,
        difference_ci,
        points,
    )
