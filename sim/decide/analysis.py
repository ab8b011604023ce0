"""The statistics that decide between sweep points: the best point of a sweep with its
confidence interval (`optimize`), and the difference of two samples, paired by replica
(common random numbers) or by Welch's t, with Student's t quantile they need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sim.model.columns import better_direction
from sim.runs.arguments import ArgumentError
from sim.runs.summaries import METRICS, python_value

__all__ = [
    "Difference",
    "Optimum",
    "check_statistic",
    "optimize",
    "paired_difference",
    "student_t_quantile",
    "welch_difference",
]


@dataclass(frozen=True)
class Optimum:
    """The sweep point with the best statistic of a metric, and how sure we are of it.

    `best` is the value with the best statistic, or None when several tie (`tied` lists
    them; a unique best is `tied == [best]`); `points` has,
    per swept value, the statistic, its 95% CI, the paired difference to the best
    (worse is positive) with its 95% CI, and a verdict: best, tied, indistinguishable
    (the difference's CI includes 0) or worse; a value that cannot run comes last with
    the verdict infeasible, its reason in `infeasible` (None for the others) and no
    statistic. An infeasible value is never the best.
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
    infeasible: dict[Any, str] | None = None,
) -> Optimum:
    """The swept value of `key` with the best `statistic` (mean, p50, p95, ...) of `metric`:
    the highest for goodput and effective MFU, the lowest for times and costs, unless
    `direction` ('max' or 'min') says otherwise.

    Replicas share random numbers across points, so each difference to the best is
    paired replica by replica: its interval is much tighter than the two CIs. Values
    whose statistic equals the best's (to float noise) tie: none of them is called
    the best alone. `infeasible` maps the values that cannot run (they have no row) to
    their reason: they are listed last, never compared. Arguments of the wrong type, or
    columns the table does not have, raise `sim.runs.arguments.ArgumentError`.
    """
    if not isinstance(table, pd.DataFrame):
        raise ArgumentError(
            "optimize", "table", "expected the replica table (a pandas DataFrame, e.g. "
            f"run_scenario(...).table), not {type(table).__name__}",
        )  # fmt: skip
    swept = [c for c in table.columns if "." in str(c)]  # swept keys are dotted
    if not isinstance(key, str) or key not in table.columns:
        raise ArgumentError(
            "optimize", "key", f"expected a swept key of the table "
            f"({', '.join(swept) or 'it sweeps none'}), not {key!r}",
        )  # fmt: skip
    known = isinstance(metric, str) and (metric in METRICS or metric.startswith("failures_"))
    if not known or metric not in table.columns:  # failures_<class>: per class
        raise ArgumentError(
            "optimize", "metric", f"unknown metric {metric!r}; one of {', '.join(METRICS)}"
            + (" (or failures_<class>)" if known else ""),
        )  # fmt: skip
    if not isinstance(statistic, str):
        raise ArgumentError(
            "optimize",
            "statistic",
            f"expected 'mean' or a percentile like 'p95', not {statistic!r}",
        )
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
                key: python_value(value),
                statistic: stats[value],
                "ci_low": low,
                "ci_high": high,
                "difference": diff,
                "difference_ci_low": diff_low,
                "difference_ci_high": diff_high,
                "verdict": verdict,
                "infeasible": None,
            }
        )
    compared = len(rows)
    for value, reason in (infeasible or {}).items():
        rows.append(
            {
                key: python_value(value),
                **dict.fromkeys(
                    [statistic, "ci_low", "ci_high", "difference"]
                    + ["difference_ci_low", "difference_ci_high"],
                    math.nan,
                ),
                "verdict": "infeasible",
                "infeasible": reason,
            }
        )
    points = pd.DataFrame(rows)
    points[key] = pd.Series([r[key] for r in rows], dtype=object)  # keep ints as ints
    points["infeasible"] = pd.Series([r["infeasible"] for r in rows], dtype=object)
    first = points.iloc[0]
    rest = points.iloc[len(tied) : compared]
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
        python_value(leader) if len(tied) == 1 else None,
        [python_value(v) for v in tied],
        float(first[statistic]),
        (float(first.ci_low), float(first.ci_high)),
        runner_up,
        runner_value,
        difference,
        difference_ci,
        points,
    )


# --------------------------------------------------------------------------- two samples


@dataclass(frozen=True)
class Difference:
    """mean(b) − mean(a) with its 95% confidence interval.

    `method` is "paired" (a[i] and b[i] come from the same replica: the interval is the
    t interval of the differences, df = n − 1) or "welch" (independent samples: Welch's
    t interval, Welch–Satterthwaite df). The interval is NaN when a side has fewer than
    two values; it is the estimate itself when neither side varies.
    """

    method: str
    estimate: float
    low: float
    high: float
    df: float
    n_a: int
    n_b: int


def paired_difference(a: np.ndarray, b: np.ndarray) -> Difference:
    """mean(b − a) ± t(0.975, n − 1) · sd(b − a) / √n over pairs (a[i], b[i])."""
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = d.size
    if n == 0:
        return Difference("paired", math.nan, math.nan, math.nan, math.nan, 0, 0)
    mean = float(d.mean())
    if n < 2:
        return Difference("paired", mean, math.nan, math.nan, math.nan, n, n)
    sd = float(d.std(ddof=1))
    half = student_t_quantile(0.975, n - 1) * sd / math.sqrt(n) if sd > 0 else 0.0
    return Difference("paired", mean, mean - half, mean + half, float(n - 1), n, n)


def welch_difference(a: np.ndarray, b: np.ndarray) -> Difference:
    """mean(b) − mean(a) ± t(0.975, ν) · √(s_a²/n_a + s_b²/n_b), ν by Welch–Satterthwaite."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_a, n_b = a.size, b.size
    if n_a == 0 or n_b == 0:
        return Difference("welch", math.nan, math.nan, math.nan, math.nan, n_a, n_b)
    mean = float(b.mean() - a.mean())
    if n_a < 2 or n_b < 2:
        return Difference("welch", mean, math.nan, math.nan, math.nan, n_a, n_b)
    va, vb = float(a.var(ddof=1)) / n_a, float(b.var(ddof=1)) / n_b
    if va + vb == 0:
        return Difference("welch", mean, mean, mean, math.inf, n_a, n_b)
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    half = student_t_quantile(0.975, df) * math.sqrt(va + vb)
    return Difference("welch", mean, mean - half, mean + half, df, n_a, n_b)


def student_t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` > 0 (possibly fractional) degrees of freedom:
    bisection on the CDF F(t) = 1 − ½·I_{df/(df+t²)}(df/2, ½) for t ≥ 0."""
    if not 0 < p < 1 or not df > 0:
        raise ValueError(f"need 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    if p == 0.5:
        return 0.0
    if df > 1e7:  # indistinguishable from the normal
        return _normal_quantile(p)

    def cdf(t: float) -> float:
        return 1.0 - 0.5 * _regularized_beta(df / (df + t * t), df / 2.0, 0.5)

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2.0 * high
    for _ in range(200):
        mid = 0.5 * (low + high)
        if cdf(mid) < p:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return 0.5 * (low + high)


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def _regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), by the continued fraction (modified Lentz) on whichever side converges."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _regularized_beta(1.0 - x, b, a)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a
