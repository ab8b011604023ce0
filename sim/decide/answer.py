"""The answer of a run in words a manager can repeat, written once for the CLI and the report.

Per sweep point, two lines:

    p50 16.3 days, p95 16.4 days, mean cost $1.07M, goodput 98.5%
    mean 7.3 h beyond the ideal 16.0 days: 2.4 h lost work, 1.8 h checkpoint stalls, 1.9 h down

The overhead beyond ideal is mean(wall_hours) − mean(ideal_hours), which the time identity
splits into the means of slowdown, lost work, checkpoint stall and downtime
(docs/metrics.md); the printed parts are rounded so that they add up to the printed total.
For a sweep, which point is best on time (mean wall time; an unfinished replica counts
at the horizon) and on cost (mean cost), with the paired difference to the runner-up.

Also the one number style every command and the report write values in: money with three
significant digits ($1.07M), a duration in one unit (35 min, 7.2 h, 16.3 days; an estimate
and its interval in the same one), shares as percentages, counts with thousands separators,
plain numbers without an exponent (< 0.001 for a tiny one), metrics named in words.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.decide import analysis
from sim.model.columns import DOWNTIME_COLUMNS, unit_of

# The overhead beyond ideal, in the order the line lists them: (column, words).
PARTS = (
    ("lost_work_hours", "lost work"),
    ("checkpoint_stall_hours", "checkpoint stalls"),
    ("downtime_hours", "down"),
    ("slowdown_hours", "slowdown"),
)

# What each part is, for the legend under the lines.
MEANINGS = {
    "lost work": "training redone after a failure, from the last checkpoint on",
    "checkpoint stalls": "training paused while checkpoints are written",
    "down": "no training: noticing a failure, waiting for nodes, restarting, reading the "
    "checkpoint back",
    "slowdown": "steps slower than planned (fewer GPUs, slow links or nodes)",
}


def legend(lines: list[str]) -> str:
    """What the parts named in `lines` are: 'lost work = …; down = …'."""
    named = [w for w in MEANINGS if any(f" {w}" in line for line in lines)]
    return "; ".join(f"{w} = {MEANINGS[w]}" for w in named)


# --------------------------------------------------------------------------- readable units


def duration_unit(hours: float) -> str:
    """The unit a duration reads best in: min under an hour, h under a day, days beyond."""
    magnitude = abs(hours)
    if magnitude < 1.0 / 60.0:
        return "s"
    if magnitude < 1.0:
        return "min"
    if magnitude < 24.0:
        return "h"
    return "days"


def in_unit(hours: float, unit: str) -> float:
    return {"s": hours * 3600.0, "min": hours * 60.0, "h": hours, "days": hours / 24.0}[unit]


def duration(
    hours: float, signed: bool = False, unit: str | None = None, decimals: int | None = None
) -> str:
    """A duration given in hours, in the one unit it reads best in (or `unit`), with at
    most three significant digits: 35 min, 3.5 min, 7.2 h, 16.3 days, 215 days (one decimal
    below 100 days or hours, or below 10 minutes or seconds), or `decimals` (an interval
    whose ends would read alike); `signed` puts + on positive values."""
    if hours is None or not math.isfinite(hours):
        return "—"
    unit = unit or duration_unit(hours)
    value = in_unit(hours, unit)
    digits = duration_decimals(value, unit) if decimals is None else decimals
    text = f"{value:+,.{digits}f}" if signed else f"{value:,.{digits}f}"
    if float(text.replace(",", "")) == 0:
        text = text.replace("-", "").replace("+", "")
    return f"{text} {unit}"


def duration_decimals(value: float, unit: str) -> int:
    """The decimals `duration` writes a value (in `unit`) with: one below 100 days or hours
    or 10 minutes or seconds, else none."""
    whole_from = 100.0 if unit in ("days", "h") else 10.0
    return 0 if round(abs(value), 1) >= whole_from else 1


def durations(values_hours: list[float], signed: bool = False) -> list[str]:
    """Durations read side by side (an estimate and its interval): all in the one unit the
    largest of them reads best in."""
    finite = [abs(v) for v in values_hours if v is not None and math.isfinite(v)]
    unit = duration_unit(max(finite, default=0.0))
    return [duration(v, signed, unit) for v in values_hours]


def money(usd: float, signed: bool = False, digits: int = 3) -> str:
    """$1.07M, $842k, $530: three significant digits (or `digits`), for reading aloud."""
    if usd is None or not math.isfinite(usd):
        return "—"
    if round(usd) == 0:  # float noise, or under half a dollar: no sign
        return "$0"
    sign = "-" if usd < 0 else ("+" if signed and usd > 0 else "")
    magnitude = abs(usd)
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k"), (1.0, "")):
        if float(_three(magnitude / scale, digits)) >= 1.0 or scale == 1.0:  # $999.9k: $1.00M
            scaled = _three(magnitude / scale, digits) if scale > 1 else f"{magnitude:.0f}"
            return f"{sign}${scaled}{suffix}"
    return f"{sign}${magnitude:.0f}"


def _three(value: float, significant: int = 3) -> str:
    """Three (or `significant`) significant digits without an exponent: 1.07, 84.2, 530."""
    if value <= 0:
        return "0"
    rounded = float(f"{value:.{significant}g}")
    digits = max(0, significant - 1 - int(math.floor(math.log10(rounded))))
    return f"{rounded:.{digits}f}"


# Ratios of 0..1 read as percentages (their differences in percentage points).
PERCENT = frozenset({"finished_fraction", "goodput", "effective_mfu"})


def readable(
    metric: str,
    value: float,
    signed: bool = False,
    unit: str | None = None,
    decimals: int | None = None,
) -> str:
    """A metric's value in the unit it reads best in: durations (…_hours, …_days) as
    s / min / h / days (duration), costs as money ($1.07M), shares (goodput, MFU, finished)
    as percentages with one decimal (`signed` differences in percentage points, pp, with
    two), other quantities with at most 3 significant digits, whole with thousands
    separators from 100, and their unit (GPU-h, GB, TB)."""
    if value is None or not math.isfinite(value):
        return "—"
    metric_unit = unit_of(metric)
    if metric_unit in ("h", "days") and "gpu_hours" not in metric:
        hours = value * 24.0 if metric_unit == "days" else value
        return duration(hours, signed, unit, decimals)
    if metric_unit == "USD":
        return money(value, signed, 3 if decimals is None else decimals)
    sign = "-" if value < 0 else ("+" if signed and value > 0 else "")
    magnitude = abs(value)
    if metric in PERCENT:
        if signed:
            text = f"{magnitude * 100:.2f}"
            return ("0" if float(text) == 0 else sign + text) + " pp"
        return f"{sign}{magnitude * 100:.1f}%"
    text = figure(magnitude, big=100.0, digits=3)
    if text == "0":
        return text
    suffix = f" {metric_unit}" if metric_unit else ""
    return sign + text + suffix


def number(value: float | None) -> str:
    """A plain number (a rate, a shape, a count's mean) with at most 3 significant digits,
    whole with thousands separators from 1,000, a positive one below 0.001 as "< 0.001"
    (never 1.58e-227), a missing one as —."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude < 0.001:
        return "< 0.001" if value > 0 else "> -0.001"
    if magnitude >= 999.5:
        return f"{value:,.0f}"
    return ("-" if value < 0 else "") + _three(magnitude)


def share(fraction: float | None) -> str:
    """A share (a probability, P(meet)) as a whole percentage, with one decimal where the
    whole one would read as all or none when it is not: 100%, 94%, 99.6%."""
    if fraction is None or not math.isfinite(fraction):
        return "—"
    text = f"{fraction:.0%}"
    if text in ("0%", "100%") and fraction not in (0.0, 1.0):
        text = f"{fraction:.1%}"
    return text


def dollars(sign: str, magnitude: float) -> str:
    """A cost in whole dollars with thousands separators ($0 for less than half a dollar)."""
    return "$0" if round(magnitude) == 0 else f"{sign}${magnitude:,.0f}"


def figure(magnitude: float, big: float = 1e4, digits: int = 4) -> str:
    """A non-negative number in a few digits: 0 for float noise (below 1e-9), whole with
    thousands separators from `big`, one decimal from 100, else `digits` significant
    digits."""
    if magnitude < 1e-9:
        return "0"
    if magnitude >= big:
        return f"{magnitude:,.0f}"
    if magnitude >= 100:
        return f"{magnitude:.1f}"
    text = _three(magnitude, digits)  # never an exponent, nor trailing zeros: 8, 0.02
    return text.rstrip("0").rstrip(".") if "." in text else text


def common_unit(metric: str, values: list[float]) -> str | None:
    """The one unit a column of durations reads in (that of its largest value); None for
    a metric that is not a duration."""
    metric_unit = unit_of(metric)
    if metric_unit not in ("h", "days") or "gpu_hours" in metric:
        return None
    scale = 24.0 if metric_unit == "days" else 1.0
    finite = [abs(v) * scale for v in values if v is not None and math.isfinite(v)]
    return duration_unit(max(finite, default=0.0))


def same_decimals(
    values: list[float], metric: str = "", significant: int = 4, distinct: bool = False
) -> list[str]:
    """Numbers read side by side (a row of a summary, a column of a sweep), all with the
    decimals that give the largest `significant` digits, with thousands separators:
    16.43 beside 16.90 (not 16.9), 1,074,882 ± 1,011. Shares (goodput, MFU, finished) as
    percentages; a missing value as —. `distinct`: more decimals where values that differ
    would read alike (the points of a sweep)."""
    decimals = decimals_for(values, metric, significant, distinct)
    return [with_decimals(value, decimals, metric) for value in values]


def decimals_for(
    values: list[float], metric: str = "", significant: int = 4, distinct: bool = False
) -> int:
    """The decimals same_decimals writes `values` with."""
    scale = 100.0 if metric in PERCENT else 1.0
    finite = [abs(v) * scale for v in values if v is not None and math.isfinite(v)]
    largest = max(finite, default=0.0)
    whole_digits = int(math.floor(math.log10(largest))) + 1 if largest >= 1e-9 else 1
    decimals = min(6, max(0, significant - whole_digits))
    if metric in PERCENT:
        decimals = min(decimals, 2)
    if distinct:
        decimals = max(decimals, distinct_decimals(finite, 0))
    return decimals


def with_decimals(value: float | None, decimals: int, metric: str = "") -> str:
    """A number with `decimals` decimals and thousands separators (a share as a percentage,
    -0 as 0, a missing value as —)."""
    if value is None or not math.isfinite(value):
        return "—"
    percent = metric in PERCENT
    text = f"{value * (100 if percent else 1):,.{decimals}f}"
    if float(text.replace(",", "")) == 0:
        text = text.lstrip("-")
    return text + ("%" if percent else "")


def distinct_decimals(values: list[float], least: int = 1) -> int:
    """The fewest decimals (at least `least`, at most 4) at which values that differ read
    differently: p50s of 16.43 and 16.38 days are 16.43 and 16.38, not twice 16.4."""
    finite = sorted({float(v) for v in values if v is not None and math.isfinite(v)})
    for decimals in range(least, 5):
        if len({f"{v:.{decimals}f}" for v in finite}) == len(finite):
            return decimals
    return max(4, least)


def interval_decimals(metric: str, low: float, high: float, unit: str | None) -> int | None:
    """The precision an interval needs so that its ends, when they differ, read apart:
    a duration's decimals in `unit` (at most 3), a cost's significant digits (at most 6);
    None for other metrics (their own rule)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    metric_unit = unit_of(metric)
    if metric_unit == "USD":
        for digits in range(3, 6):
            if low == high or money(low, digits=digits) != money(high, digits=digits):
                return digits
        return 3  # alike to 5 digits: equal, as read
    if metric_unit not in ("h", "days") or "gpu_hours" in metric or unit is None:
        return None
    scale = 24.0 if metric_unit == "days" else 1.0
    ends = [in_unit(low * scale, unit), in_unit(high * scale, unit)]
    least = max(duration_decimals(v, unit) for v in ends)
    decimals = distinct_decimals(ends, least)
    return decimals if decimals <= 3 else least  # ends alike to 3 decimals: equal, as read


def readable_interval(
    metric: str,
    low: float,
    high: float,
    signed: bool = True,
    unit: str | None = None,
    decimals: int | None = None,
) -> str:
    """A 95% CI with both ends in one unit (`unit`, the unit of the estimate it goes with,
    else the one its wider end reads best in), the unit written once, with the decimals
    that tell its ends apart: '-2.1 … -1.1 h' (a difference, `signed`), '16.30 … 16.33
    days'."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    metric_unit = unit_of(metric)
    if unit is None and metric_unit in ("h", "days") and "gpu_hours" not in metric:
        scale = 24.0 if metric_unit == "days" else 1.0
        unit = duration_unit(max(abs(low), abs(high)) * scale)
    if decimals is None:
        decimals = interval_decimals(metric, low, high, unit)
    first = readable(metric, low, signed, unit, decimals)
    last = readable(metric, high, signed, unit, decimals)
    suffix = last.rpartition(" ")[2] if " " in last else ""
    if suffix and first.endswith(" " + suffix):
        first = first[: -len(suffix) - 1]
    return f"{first} … {last}"


def readable_estimate(
    metric: str, value: float, low: float, high: float, signed: bool = False, ci: str = ""
) -> str:
    """An estimate and its interval in one unit (the one the largest of them reads best
    in) and alike in decimals: '49 min (31 … 67 min)', '16.32 days (16.30 … 16.33 days)',
    or with `ci` before the interval '(paired 95% CI 31 … 67 min)'."""
    unit = common_unit(metric, [value, low, high])
    decimals = interval_decimals(metric, low, high, unit)
    interval = readable_interval(metric, low, high, signed, unit, decimals)
    text = readable(metric, value, signed, unit, decimals)
    return f"{text} ({ci + ' ' if ci else ''}{interval})"


def short_keys(keys: list[str]) -> dict[str, str]:
    """Each dotted key by its shortest unique ending: checkpoint.interval_steps →
    interval_steps (storage.checkpoint_tier.write_GB_s stays longer when another key
    also ends in write_GB_s)."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            if not any(k != key and (k == tail or k.endswith("." + tail)) for k in keys):
                out[key] = tail
                break
        else:
            out[key] = key
    return out


def params_text(params: dict[str, Any], keys: list[str] | None = None) -> str:
    """interval_steps=500, spare_nodes=4: the swept values with short keys."""
    names = short_keys(list(keys if keys is not None else params))
    return ", ".join(f"{names[k]}={value_text(params[k])}" for k in names if k in params)


def value_text(value: Any) -> str:
    """A swept value as the user wrote it: 4 not 4.0."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


# --------------------------------------------------------------------------- the answer


@dataclass(frozen=True)
class PointAnswer:
    """One sweep point's answer, from the means and percentiles of its summary."""

    point: int
    params: dict[str, Any]
    replicas: int
    finished: float  # share of replicas that finished
    p50_days: float  # over finished replicas
    p95_days: float
    cost_usd: float  # mean
    goodput: float  # mean
    ideal_hours: float  # mean
    wall_hours: float  # mean
    parts: dict[str, float]  # mean of each PARTS column
    failures: float = math.nan  # mean

    @property
    def overhead_hours(self) -> float:
        """mean(wall) − mean(ideal) = the sum of the parts' means."""
        return self.wall_hours - self.ideal_hours


def point_answers(summary: pd.DataFrame, params: dict[int, dict[str, Any]]) -> list[PointAnswer]:
    """A PointAnswer per point of `summary` (summaries.summarize's shape) that has metric
    rows; `params` gives each point's swept values (points it lacks get none)."""
    answers = []
    rows = summary[summary["metric"].notna()] if "metric" in summary else summary
    for point, group in rows.groupby("point", sort=True):
        stats = group.set_index("metric")

        def stat(metric: str, column: str = "mean", stats: pd.DataFrame = stats) -> float:
            if metric not in stats.index:
                return math.nan
            return float(stats.loc[metric, column])

        answers.append(
            PointAnswer(
                point=int(point),
                params=params.get(int(point), {}),
                replicas=int(stats.loc["finished_fraction", "n"])
                if "finished_fraction" in stats.index
                else 0,
                finished=stat("finished_fraction"),
                p50_days=stat("time_to_train_days", "p50"),
                p95_days=stat("time_to_train_days", "p95"),
                cost_usd=stat("cost_usd"),
                goodput=stat("goodput"),
                ideal_hours=stat("ideal_hours"),
                wall_hours=stat("wall_hours"),
                parts={column: stat(column) for column, _ in PARTS},
                failures=stat("failures"),
            )
        )
    return answers


def rounded_parts(values: list[float], digits: int) -> tuple[float, list[float]]:
    """The total and each value rounded to `digits` decimals so that the rounded values add
    up to the rounded total exactly (largest remainder); values are non-negative."""
    scale = 10**digits
    scaled = [max(0.0, v) * scale for v in values]
    total = round(sum(scaled))
    floors = [math.floor(s) for s in scaled]
    extra = max(0, total - sum(floors))
    order = sorted(range(len(scaled)), key=lambda i: scaled[i] - floors[i], reverse=True)
    for i in order[:extra]:
        floors[i] += 1
    return total / scale, [f / scale for f in floors]


def overhead_text(answer: PointAnswer) -> str:
    """'mean 7.3 h beyond the ideal 16.0 days: 2.4 h lost work, 1.8 h checkpoint stalls,
    1.9 h down' (parts that round to nothing left out; the parts add up to the total)."""
    total_hours = answer.overhead_hours
    if not math.isfinite(total_hours):
        return "no overhead figures (the table lacks the time buckets)"
    unit = duration_unit(total_hours)
    digits = 0 if unit in ("s", "min") else 1
    values = [in_unit(answer.parts[c], unit) for c, _ in PARTS]
    values = [v if math.isfinite(v) else 0.0 for v in values]
    total, parts = rounded_parts(values, digits)
    listed = [
        f"{value:.{digits}f} {unit} {words}" for value, (_, words) in zip(parts, PARTS) if value > 0
    ]
    ideal = f"the ideal {answer.ideal_hours / 24:.1f} days" if answer.finished == 1 else "ideal"
    text = f"mean {total:.{digits}f} {unit} beyond {ideal}"
    return text + (": " + ", ".join(listed) if listed else "")


def fleet_lines(answer: PointAnswer, horizon_days: float) -> list[str]:
    """A fleet run to its horizon (`simulation.until: horizon`): its failures, not a time to
    train (the job on it is a placeholder)."""
    return [
        f"a fleet over {horizon_days:g} days (simulation.until: horizon): mean "
        f"{answer.failures:,.0f} failures a replica; no job to finish",
        "its failures, node by node: run it with --incidents (trainsim fit --check compares "
        "them with a log)",
    ]


def answer_lines(
    answer: PointAnswer,
    horizon_days: float | None = None,
    fleet: bool = False,
) -> list[str]:
    """The point's answer as two lines (without its label), in the one number style of
    docs/metrics.md: days with one decimal, the cost with three significant digits (points
    of a sweep that read alike here differ in the sweep table and the best-on lines). A
    `fleet` (a scenario run to its horizon) says its failures instead."""
    if fleet and horizon_days:
        return fleet_lines(answer, horizon_days)
    first = []
    if answer.finished > 0:
        first.append(f"p50 {answer.p50_days:.1f} days, p95 {answer.p95_days:.1f} days")
    else:
        within = f" within the {horizon_days:g}-day horizon" if horizon_days else ""
        first.append(f"no replica finished{within}")
    first.append(f"mean cost {money(answer.cost_usd)}")
    if math.isfinite(answer.goodput):
        first.append(f"goodput {answer.goodput:.1%}")
    line = ", ".join(first)
    if 0 < answer.finished < 1:
        done = round(answer.finished * answer.replicas)
        within = f" within the {horizon_days:g}-day horizon" if horizon_days else ""
        line += (
            f" ({done:,} of {answer.replicas:,} replicas finished{within}; p50 and p95 over those)"
        )
    return [line, overhead_text(answer)]


def label(answer: PointAnswer, keys: list[str]) -> str:
    return params_text(answer.params, keys) if keys else ""


# --------------------------------------------------------------------------- best of a sweep


@dataclass(frozen=True)
class Best:
    """The best point on one criterion and how it compares with the next best."""

    criterion: str  # "time" | "cost"
    point: int
    value: float  # mean wall hours or mean cost
    tied: list[int]  # other points with the same mean
    runner_up: int | None
    difference: analysis.Difference | None  # runner-up − best, paired by replica
    # the points compared: those whose replicas finish most often (this share of them)
    finished: float = 1.0


CRITERIA = {"time": "wall_hours", "cost": "cost_usd"}


def best_points(rows: pd.DataFrame) -> list[Best]:
    """Best on time (lowest mean wall_hours) and on cost (lowest mean cost_usd) among the
    points of `rows` (columns point, replica, finished, wall_hours, cost_usd; error rows
    already left out) whose replicas finish most often (every one, usually: a point whose
    replicas run out the horizon is neither fast nor cheap), each with the paired
    difference of the runner-up (replicas with the same id drew the same random numbers).
    Empty with fewer than two points."""
    if rows["point"].nunique() < 2:
        return []
    share = rows.groupby("point")["finished"].mean() if "finished" in rows else None
    eligible = None
    if share is not None:  # a point whose replicas run out the horizon costs less: unfair
        eligible = set(share.index[share >= share.max() - 1e-12])
    out = []
    for criterion, column in CRITERIA.items():
        means = rows.groupby("point")[column].mean().dropna()
        if eligible is not None:
            means = means[means.index.isin(eligible)]
        means = means.sort_values(kind="stable")
        if len(means) == 0:
            continue
        leader = int(means.index[0])
        scale = max(1.0, abs(float(means.iloc[0])))
        tied = [int(p) for p in means.index[1:] if abs(means[p] - means.iloc[0]) <= 1e-12 * scale]
        rest = [int(p) for p in means.index[1:] if int(p) not in tied]
        runner = rest[0] if rest else None
        difference = None
        if runner is not None:
            wide = rows.pivot_table(
                index="replica", columns="point", values=column, aggfunc="first"
            )
            both = wide[[leader, runner]].dropna()
            difference = analysis.paired_difference(
                both[leader].to_numpy(), both[runner].to_numpy()
            )
        finished = float(share.max()) if share is not None else 1.0
        out.append(
            Best(criterion, leader, float(means.iloc[0]), tied, runner, difference, finished)
        )
    return out


def best_lines(bests: list[Best], params: dict[int, dict[str, Any]], keys: list[str]) -> list[str]:
    """'best on time: interval_steps=500 (mean 16.3 days); the next, interval_steps=1000,
    takes 1.6 h longer (95% CI 1.0 … 2.2 h)' and the same on cost."""
    lines = []
    for best in bests:
        name = params_text(params.get(best.point, {}), keys) or f"point {best.point}"
        if best.criterion == "time":
            value = f"mean {duration(best.value, unit='days')}"
        else:
            value = f"mean {money(best.value)}"
        if best.tied:
            others = ", ".join(params_text(params.get(p, {}), keys) for p in best.tied)
            lines.append(f"best on {best.criterion}: tied between {name} and {others} ({value})")
            continue
        text = f"best on {best.criterion}: {name} ({value})"
        if best.finished < 1:
            text = (
                f"best on {best.criterion} of the points where most replicas finished "
                f"({best.finished:.0%}): {name} ({value})"
            )
        d = best.difference
        if best.runner_up is not None and d is not None and math.isfinite(d.estimate):
            other = params_text(params.get(best.runner_up, {}), keys)
            if best.criterion == "time":
                estimate, low, high = durations([d.estimate, d.low, d.high])
                more = f"takes {estimate} longer"
            else:
                estimate, low, high = (money(v) for v in (d.estimate, d.low, d.high))
                more = f"costs {estimate} more"
            # an interval's ends in the unit of its estimate, the unit said once
            ci = f"{low.rpartition(' ')[0]} … {high}" if " " in low else f"{low} … {high}"
            if not math.isfinite(d.low):
                ci = "—"
            clear = math.isfinite(d.low) and d.low > 0
            verdict = "" if clear else ": within the noise, more replicas would tell"
            text += f"; the next, {other}, {more} (95% CI {ci}{verdict})"
        elif best.runner_up is None:
            text += (
                "; the only point where every replica finished"
                if best.finished >= 1
                else "; the only point whose replicas finish this often"
            )
        lines.append(text)
    return lines


# --------------------------------------------------------------------------- a whole run

BEST_COLUMNS = ["point", "replica", "finished", "wall_hours", "cost_usd"]


@dataclass(frozen=True)
class RunAnswer:
    """A run's answer: per point its label (empty without a sweep) and two lines, the best
    points of a sweep, and what the parts of the overhead are."""

    points: list[tuple[str, list[str]]]
    best: list[str]

    @property
    def legend(self) -> str:
        return legend([line for _, lines in self.points for line in lines])


def run_answer(
    summary: pd.DataFrame,
    scenario_set: Any,
    rows: pd.DataFrame | None = None,
    only: list[int] | None = None,
) -> RunAnswer:
    """The answer of a run from its summary (summaries.summarize's shape) and its scenario
    set (sim.model.scenario_set.ScenarioSet: each point's swept values and horizon); `rows` (the
    BEST_COLUMNS of the replica table, error rows left out) adds the best points of a
    sweep; `only` limits the points listed (not the search for the best)."""
    keys = scenario_set.varied_keys
    params = {p.index: p.params for p in scenario_set.points}
    answers = point_answers(summary, params)
    listed = []
    for a in answers:
        if only is not None and a.point not in only:
            continue
        simulation = scenario_set.points[a.point].scenario.simulation
        lines = answer_lines(a, simulation.horizon_days, simulation.until == "horizon")
        listed.append((label(a, keys) if len(scenario_set.points) > 1 else "", lines))
    best: list[str] = []
    if rows is not None and len(answers) > 1:
        best = best_lines(best_points(rows), params, keys)
    return RunAnswer(listed, best)


def text_lines(answer: RunAnswer) -> list[str]:
    """The answer as the CLI prints it: 'answer: …' for one point, a block for a sweep."""
    if len(answer.points) == 1 and not answer.points[0][0] and not answer.best:
        first, second = answer.points[0][1]
        lines = [f"answer: {first}", f"  {second}"]
        return lines + ([f"  where {answer.legend}"] if answer.legend else [])
    lines = ["answer (per point: means and percentiles over its replicas):"]
    for name, (first, second) in answer.points:
        lines += [f"  {name}: {first}", f"    {second}"]
    lines += [f"  {line}" for line in answer.best]
    if answer.legend:
        lines.append(f"  where {answer.legend}")
    return lines


def best_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The columns best_points needs, error rows left out."""
    if "error" in table:
        table = table[table["error"].fillna("") == ""]
    return table[[c for c in BEST_COLUMNS if c in table.columns]]


def read_best_rows(path: str | Path) -> pd.DataFrame:
    """best_rows of a replicas.parquet, reading only the columns it needs."""
    import pyarrow.parquet as pq

    names = set(pq.read_schema(path).names)
    wanted = [c for c in (*BEST_COLUMNS, "error") if c in names]
    return best_rows(pd.read_parquet(path, columns=wanted))


# --------------------------------------------------------------------------- a plan, in words


# Words for the parts of a metric's name that are not plain English.
_NAME_WORDS = {"mfu": "MFU", "gpu": "GPU", "GB": "GB", "TB": "TB"}

# The units of docs/metrics.md's names, as a title writes them.
_UNIT_WORDS = {"h": "hours", "days": "days", "USD": "USD", "GPU-h": "GPU-hours"}


def metric_words(metric: str) -> str:
    """A metric's name in words, without its unit: cost_usd → cost, time_to_train_days →
    time to train, effective_mfu → effective MFU, lost_gpu_hours → lost GPU-hours."""
    if metric.endswith("gpu_hours"):
        return (metric.removesuffix("gpu_hours").replace("_", " ") + "GPU-hours").strip()
    base = metric
    for suffix in ("_usd", "_days", "_hours", "_TB", "_GB"):
        base = base.removesuffix(suffix)
    return " ".join(_NAME_WORDS.get(word, word) for word in base.split("_"))


# Names in words of the columns (docs/metrics.md) whose words alone would not say it.
_METRIC_NAMES = {
    "finished_fraction": "finished",
    "wall_hours": "wall time",
    "ideal_hours": "ideal time",
}


def metric_name(metric: str) -> str:
    """A metric's name as a table row names it: docs/metrics.md's column in words, without
    its unit (the values carry it): time_to_train_days → time to train, cost_lost_work_usd →
    cost: lost work, detect_hours → downtime: detect, failures_gpu → failures: gpu."""
    if metric in _METRIC_NAMES:
        return _METRIC_NAMES[metric]
    if metric in DOWNTIME_COLUMNS:
        return "downtime: " + metric_words(metric)
    if metric.startswith("cost_") and metric.endswith("_usd") and metric != "cost_usd":
        return "cost: " + metric_words(metric.removeprefix("cost_"))
    if metric.startswith("failures_"):
        return "failures: " + metric.removeprefix("failures_").replace("_", " ")
    return metric_words(metric)


def metric_title(metric: str) -> str:
    """A metric's name and unit as a column or a sentence names it: 'cost (USD)',
    'time to train (days)', 'goodput'."""
    unit = unit_of(metric)
    words = metric_words(metric)
    if not unit or unit == "GPU-h" or unit in words.split():
        return words
    return f"{words} ({_UNIT_WORDS.get(unit, unit)})"


def objective_words(objective: str) -> str:
    """cost_usd → 'mean cost', time_to_train_days → 'mean time to train'."""
    return "mean " + metric_words(objective)


def objective_value(objective: str, value: Any) -> str:
    if value is None:
        return "—"
    if unit_of(objective) == "USD":
        return money(float(value))
    return readable(objective, float(value))


def _share(value: Any) -> str:
    return "—" if value is None else share(float(value))


def _days(value: Any) -> str:
    return _three(float(value)) if isinstance(value, int | float) else "—"


def plan_closest(plan: dict[str, Any]) -> dict[str, Any] | None:
    """The point that comes closest to the deadline when none meets it: the lowest time to
    train at the quantile (`closest`; a plan.json of an older version: `highest_p_meet`)."""
    return plan.get("closest") or plan.get("highest_p_meet")


def plan_sentence(plan: dict[str, Any]) -> str:
    """The plan's answer in words: the point it chose and why; or the closest one, why
    nothing makes it and what would."""
    keys = list(plan.get("varied_keys") or [])
    goal = "highest" if plan.get("direction") == "max" else "lowest"
    objective = str(plan.get("objective", "cost_usd"))
    deadline, q = plan.get("deadline_days"), plan.get("quantile")
    within = (
        f"training within {deadline:g} days"
        if isinstance(deadline, int | float)
        else "the deadline"
    )
    chance = f"{q:.0%}" if isinstance(q, int | float) else "the quantile"
    chosen = plan.get("chosen")
    if chosen:
        return (
            f"The plan chose {params_text(chosen, keys) or 'point ' + str(chosen.get('point'))}: "
            f"the {goal} {objective_words(objective)} "
            f"({objective_value(objective, chosen.get('objective_mean'))}) among the points with "
            f"at least a {chance} chance of {within} (this one: {_share(chosen.get('p_meet'))}, "
            f"95% CI {_share(chosen.get('p_meet_low'))}–{_share(chosen.get('p_meet_high'))}, "
            f"over {chosen.get('replicas', 0):,} replicas)."
        )
    text = f"No point of the plan has at least a {chance} chance of {within}."
    best = plan_closest(plan)
    if best:
        name = f"p{float(q) * 100:g}" if isinstance(q, int | float) else "quantile"
        text += (
            f" The closest, {params_text(best, keys)}, has a {name} time to train of "
            f"{_days(best.get('time_to_train_days_at_quantile'))} days and makes it in "
            f"{_share(best.get('p_meet'))} of {best.get('replicas', 0):,} replicas."
        )
    why = plan_miss_reason(plan)
    return f"{text} {why}" if why else text


def plan_miss_reason(plan: dict[str, Any], days: Callable[[Any], str] | None = None) -> str:
    """Why no point meets the deadline and what would, from the calculator's ideal time
    (steps x step time, no failure): past the deadline even without failures (more nodes, or
    a later deadline), or within it but for the time failures take (fewer losses, more
    nodes, or a deadline at the closest point's time). Empty without the ideal times.
    `days` writes a number of days (three significant digits unless given)."""
    days = days or _days
    keys = list(plan.get("varied_keys") or [])
    deadline = plan.get("deadline_days")
    ran = [
        c
        for c in plan.get("candidates") or []
        if c.get("replicas") and isinstance(c.get("ideal_days"), int | float)
    ]
    best = plan_closest(plan)
    if not ran or not isinstance(deadline, int | float) or not best:
        return ""
    fastest = min(ran, key=lambda c: c["ideal_days"])
    alike = max(c["ideal_days"] for c in ran) <= fastest["ideal_days"] * (1 + 1e-9)
    where = params_text(fastest, keys)
    where = f" ({where})" if where and not alike else ""
    which = "every configuration here takes" if alike else f"the fastest configuration{where} takes"
    q = plan.get("quantile")
    name = f"p{float(q) * 100:g}" if isinstance(q, int | float) else "time at the quantile"
    at = best.get("time_to_train_days_at_quantile")
    if fastest["ideal_days"] > deadline:
        later = (
            f"a later deadline (the closest point's {name} is {days(at)} days)"
            if isinstance(at, int | float)
            else "a later deadline, with room for failures"
        )
        return (
            f"Even without a failure none can: {which} "
            f"{days(fastest['ideal_days'])} days by the calculator (steps × step time), past "
            f"the {deadline:g}-day deadline. What would: more nodes than any point here (a "
            f"shorter step), or {later}."
        )
    ideal = best.get("ideal_days")
    if not isinstance(ideal, int | float):
        return ""
    taken = f" to {days(at)} days" if isinstance(at, int | float) else " past it"
    later = f"a deadline of {days(at)} days" if isinstance(at, int | float) else "a later deadline"
    return (
        f"Without failures it could: the closest takes {days(ideal)} days by the calculator "
        f"(steps × step time), within the {deadline:g}-day deadline, and failures, restarts "
        f"and checkpoints take its {name}{taken}. What would: losing less to failures (more "
        f"spare nodes, checkpoints more often), more nodes, or {later}."
    )


# The statuses of plan.json, the words the README, docs/metrics.md, the CLI and the report use.
STATUS_MEANINGS = {
    "chosen": "the answer: the best mean objective among the points that meet the deadline",
    "feasible": "meets the deadline (its P(meet)'s 95% CI is above the quantile), not shown "
    "worse than the chosen point",
    "unproven": "meets the deadline by its estimate, but its 95% CI reaches below the "
    "quantile: more replicas would tell",
    "dominated": "{worse} than the chosen point (or than a point that clearly meets the "
    "deadline, when it left the race early)",
    "infeasible": "misses the deadline (or its configuration cannot run)",
}


def _worse(plan: dict[str, Any]) -> str:
    objective = str(plan.get("objective", "cost_usd"))
    return {"cost_usd": "costs more"}.get(objective, f"worse {objective_words(objective)}")


def plan_status(row: dict[str, Any], plan: dict[str, Any]) -> str:
    """A candidate's status: plan.json's word (chosen, feasible, unproven, dominated,
    infeasible; status_legend says what each means), the round it left the race when the
    row has one, and the reason of a point that cannot run."""
    status = str(row.get("status"))
    if not row.get("replicas"):
        return f"infeasible: cannot run: {row.get('reason') or 'infeasible configuration'}"
    if row.get("dropped_round"):
        return f"{status} (out after round {row['dropped_round']})"
    return status


def status_legend(statuses: list[str], plan: dict[str, Any]) -> str:
    """What the status words in `statuses` mean: 'feasible = …; infeasible = …'."""
    named = [s for s in STATUS_MEANINGS if s in statuses]
    return "; ".join(
        f"{s} = {STATUS_MEANINGS[s].format(worse=_worse(plan))}" for s in named if s != "chosen"
    )


def front_role(row: dict[str, Any], plan: dict[str, Any]) -> str:
    """A point of the time–cost front: its status (the same word as in every point's list)
    and how it compares with the chosen point (a table headed 'against the chosen point'):
    'dominated: faster, costs $42.8k more'."""
    chosen = plan.get("chosen")
    candidates = {c.get("point"): c for c in plan.get("candidates") or []}
    full = {**candidates.get(row.get("point"), {}), **row}
    status = str(full.get("status"))
    if status == "chosen" or not chosen:
        return status
    t, c = row.get("time_to_train_days_at_quantile"), row.get("cost_usd_mean")
    t0, c0 = chosen.get("time_to_train_days_at_quantile"), chosen.get("cost_usd_mean")
    if None in (t, c, t0, c0):
        return status
    if t < t0 and c > c0:
        return f"{status}: faster, costs {money(c - c0)} more"
    if t > t0 and c < c0:
        return f"{status}: {money(c0 - c)} cheaper, slower"
    return status
