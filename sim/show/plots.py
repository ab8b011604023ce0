"""Figures from replica and summary tables (matplotlib, object API, no global state).

Each function returns a `Figure` meant to answer its question at a glance: legends
sit outside the data, units are in the labels, the best sweep point is marked where
the metric is one a sweep is chosen on.
`write_figures` saves the standard set of a run. Nothing here imports simpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter

from sim.model.columns import COST_PARTS, DOWNTIME_PARTS, TIME_BUCKETS, better_direction, unit_of
from sim.show import palette

CHAR_PT = 5.5  # rough width of a character of the "small" font, in points

CDF_POINTS = 4000  # steps drawn per CDF: enough for any screen, whatever the replica count

# Young and Daly closer than this (relative) are drawn as one mark: two lines a few
# pixels apart read as a rendering glitch, not as two theories
MARKS_COINCIDE = 0.05

# points whose ideal compute differs by at most this share draw only the overheads
SAME_IDEAL = 1e-3

# swept values spanning more than this ratio get a log x axis
LOG_SPAN = 8.0

# a histogram's axis stops before values beyond the upper quartile + this many IQRs
# (Tukey's far out), naming how many lie beyond
TAIL_FENCE_IQR = 3.0

# (column, label, colour) of each time bucket and cost part, and of each part of downtime:
# the colours are sim.show.palette's, the same in every figure, the report and the notebooks
BREAKDOWN = [
    (f"{bucket}_hours", palette.bucket_label(bucket), palette.bucket_colour(bucket))
    for bucket in TIME_BUCKETS
]
COST_BREAKDOWN = [
    (f"cost_{part}_usd", palette.bucket_label(part), palette.bucket_colour(part))
    for part in COST_PARTS
]
DOWNTIME_SPLIT = [
    (f"{part}_hours", palette.downtime_label(part), palette.downtime_colour(part))
    for part in DOWNTIME_PARTS
]

# the metrics a one-key sweep draws as curves, and a two-key sweep as heatmaps
SWEEP_METRICS = ["time_to_train_days", "goodput", "cost_usd", "lost_work_hours"]
HEATMAP_METRICS = ["time_to_train_days", "goodput", "cost_usd"]

# the metrics a sweep is chosen on, whose best point a curve stars; the others explain
# (the shortest checkpoint interval trivially loses the least work: no "best" there)
OBJECTIVE_METRICS = frozenset({"time_to_train_days", "goodput", "cost_usd", "effective_mfu"})

# an ideal time further left of the first finish than this many spans of the finish
# times is named at the axis' edge, not drawn: a line there squeezes the curve aside
FAR_IDEAL_SPANS = 1.0

# the replica-table columns `write_figures` reads (besides the swept keys and, without a
# sweep, `scenario`): a caller can read just these from disk
TABLE_COLUMNS = list(
    dict.fromkeys(
        [
            "point",
            "finished",
            "time_to_train_days",
            "lost_work_hours",
            *(column for column, _, _ in BREAKDOWN),
            *(column for column, _, _ in DOWNTIME_SPLIT),
            "cost_usd",
            *(column for column, _, _ in COST_BREAKDOWN),
        ]
    )
)


# ---------------------------------------------------------------------------- labels


def _value_text(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return f"{value:g}"
    return str(value.item() if isinstance(value, np.generic) else value)


def _short(key: str) -> str:
    return key.split(".")[-1]


def _point_params(table: pd.DataFrame, swept_keys: list[str]) -> pd.DataFrame:
    """One row per point (sorted): its swept values, or its scenario without a sweep."""
    columns = swept_keys or (["scenario"] if "scenario" in table else [])
    if not columns:
        return pd.DataFrame(index=pd.Index(sorted(table["point"].unique()), name="point"))
    return table.groupby("point", sort=True, observed=True)[columns].first()


def _series_labels(table: pd.DataFrame, swept_keys: list[str]) -> dict[int, str]:
    """Legend text per point: `interval_steps=500, spare_nodes=8`, or the scenario's name."""
    params = _point_params(table, swept_keys)
    if swept_keys:
        return {
            point: ", ".join(f"{_short(k)}={_value_text(row[k])}" for k in swept_keys)
            for point, row in params.iterrows()
        }
    if "scenario" in params:
        return {point: str(row["scenario"]) for point, row in params.iterrows()}
    return {point: f"point {point}" for point in params.index}


def _point_ticks(table: pd.DataFrame, swept_keys: list[str]) -> tuple[dict[int, str], str]:
    """Tick text per point (the swept values only) and the axis label naming the keys."""
    if not swept_keys:
        return _series_labels(table, swept_keys), ""
    params = _point_params(table, swept_keys)
    ticks = {
        point: ", ".join(_value_text(row[k]) for k in swept_keys)
        for point, row in params.iterrows()
    }
    return ticks, ", ".join(swept_keys)


def _set_point_ticks(ax: Axes, x: np.ndarray, ticks: list[str], axis_label: str) -> None:
    # one tick (a run without a sweep: its caption) has nothing to collide with
    crowded = len(ticks) > 6 or (len(ticks) > 1 and sum(len(t) for t in ticks) > 48)
    ax.set_xticks(
        x,
        ticks,
        fontsize="small",
        rotation=40 if crowded else 0,
        ha="right" if crowded else "center",
        rotation_mode="anchor",
    )
    ax.set_xlabel(axis_label)
    if len(ticks) == 1:  # one bar: a bar's width, not the whole axes
        ax.set_xlim(-1.5, 1.5)


def _series_style(index: int, count: int) -> tuple[Any, str]:
    """Colour and line style of series `index` of `count`: distinct for up to 20 series
    (tab10, then tab20 when 10 would repeat), then the colours again with dashes."""
    colours = palette.SERIES[:10] if count <= 10 else palette.SERIES
    return colours[index % len(colours)], ("-", "--", ":")[(index // len(colours)) % 3]


def _legend_below(fig: Figure, handles: Sequence[Any], labels: Sequence[str], **kwargs) -> Any:
    """A figure legend under the axes: it never hides data, whatever the bars' heights."""
    return fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=min(len(labels), kwargs.pop("ncols", 4)) or 1,
        fontsize="small",
        frameon=False,
        **kwargs,
    )


def _key_unit(key: str) -> str:
    """The unit a swept key's name carries, for marks drawn in its units."""
    for suffix, unit in (
        ("_steps", "steps"),
        ("_minutes", "min"),
        ("_hours", "h"),
        ("_days", "d"),
    ):
        if key.endswith(suffix):
            return unit
    return ""


def _amount(value: float, unit: str) -> str:
    if unit == "steps":
        return f"{value:,.0f} steps"
    return f"{value:.3g} {unit}".rstrip()


def usd(value: float) -> str:
    """A dollar amount to four significant figures: $1.069M, $44.87k, $512."""
    size = abs(value)
    if size >= 1e6:
        return f"${value / 1e6:,.4g}M"
    if size >= 1e3:
        return f"${value / 1e3:.4g}k"
    return f"${value:,.0f}"


def _usd_tick(value: float, _position: Any = None) -> str:
    size = abs(value)
    if size >= 1e6:
        return f"${value / 1e6:g}M"
    if size >= 1e3:
        return f"${value / 1e3:g}k"
    return f"${value:g}"


def decimals_for(values: np.ndarray, digits: int = 4) -> int:
    """Decimals giving the largest of `values` `digits` significant figures, the same for
    all (16.32 and 40.12 days; 0.9848 goodput), so that neighbours' differences show."""
    finite = np.abs(values[np.isfinite(values)])
    largest = float(finite.max()) if finite.size else 0.0
    if largest == 0.0:
        return 2
    return int(min(6, max(0, digits - 1 - math.floor(math.log10(largest)))))


def metric_text(value: float, metric: str, decimals: int) -> str:
    """How a figure writes a metric's value (a heatmap cell, the best sweep point)."""
    if not math.isfinite(value):
        return "–"
    if unit_of(metric) == "USD":
        return usd(value)
    return f"{value:.{decimals}f}"


def _metric_label(metric: str) -> str:
    """`mean time to train (days)` for time_to_train_days: the unit once, in brackets."""
    unit = unit_of(metric)
    name = metric
    for suffix in ("_days", "_hours", "_usd", "_TB", "_GB"):
        name = name.removesuffix(suffix)
    return f"mean {name.replace('_', ' ')}" + (f" ({unit})" if unit else "")


# ---------------------------------------------------------------------------- distributions


def time_to_train_cdf(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    """Share of replicas finished by each time (unfinished ones keep the curve below 1),
    with p50 and p95 of the finished replicas marked, and the replica counts stated."""
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    swept_keys = swept_keys or []
    labels = _series_labels(table, swept_keys)
    groups = list(table.groupby("point", sort=True))
    single = len(groups) == 1
    finished = table["time_to_train_days"].notna()
    finished_total, total = int(finished.sum()), len(table)
    # per-point counts only where they say something the title does not
    counts = not single and finished_total < total
    ideal: dict[int, float] = {}
    for index, (point, group) in enumerate(groups):
        days = np.sort(group["time_to_train_days"].dropna().to_numpy(dtype=float))
        label = f"{labels[point]} ({days.size}/{len(group)} finished)" if counts else labels[point]
        if days.size == 0:
            ax.plot([], [], color="lightgrey", label=label)
            continue
        ideal[point] = float(group.loc[group["time_to_train_days"].notna(), "ideal_hours"].iloc[0])
        share = np.arange(1, days.size + 1) / len(group)
        p50, p95 = np.percentile(days, [50, 95])  # as summary.csv: finished replicas, linear
        x, y = days, share
        if days.size > CDF_POINTS:  # past a few thousand steps a line looks the same
            keep = np.unique(np.linspace(0, days.size - 1, CDF_POINTS).astype(int))
            x, y = days[keep], share[keep]
        colour, style = _series_style(index, len(groups))
        ax.step(x, y, where="post", label=label, color=colour, linestyle=style)
        if single:
            ax.axvline(p50, color=colour, linestyle=":", label=f"p50 {p50:.2f} d", gid="p50")
            ax.axvline(p95, color=colour, linestyle="-.", label=f"p95 {p95:.2f} d", gid="p95")
        else:
            for name, value, marker in (("p50", p50, "o"), ("p95", p95, "^")):
                reached = np.searchsorted(days, value, side="right") / len(group)
                ax.plot(
                    [value],
                    [reached],
                    marker=marker,
                    color=colour,
                    linestyle="none",
                    markeredgecolor="black",
                    gid=f"{name}:{point}",
                )
    if not single and finished_total:
        for name, marker in (("p50", "o"), ("p95", "^")):
            ax.plot(
                [],
                [],
                marker=marker,
                color="white",
                markeredgecolor="black",
                linestyle="none",
                label=f"{name} (of finished)",
            )
    ideal_days = sorted({round(v / 24.0, 9) for v in ideal.values()})
    done_days = table["time_to_train_days"].dropna().to_numpy(dtype=float)
    near, far = _ideal_near_and_far(ideal_days, done_days)
    if len(ideal_days) == 1 and near:
        ax.axvline(near[0], color="grey", linestyle="--", label=f"ideal {near[0]:.2f} d")
    elif near:  # the ideal time differs by point: one grey line per point
        for value in near:
            ax.axvline(value, color="grey", linestyle="--", linewidth=0.8)
        ax.plot([], [], color="grey", linestyle="--", label="ideal (per point)")
    if far:
        days = ", ".join(f"{value:.2f}" for value in far)
        ax.annotate(
            f"◀ ideal {days} d (left of the axis)",
            xy=(0.01, 0.97),
            xycoords="axes fraction",
            ha="left",
            va="top",
            fontsize="small",
            color="dimgrey",
            gid="ideal-far",
        )
    if done_days.size:  # an ideal drawn at the left edge would hide in the spine
        left = min([float(done_days.min()), *near])
        right = float(done_days.max())
        pad = 0.04 * max(right - left, 1e-3 * max(right, 1.0))
        ax.set_xlim(left - pad, right + pad)
    if finished_total:
        handles, texts = ax.get_legend_handles_labels()
        _legend_below(fig, handles, texts, ncols=2 if len(texts) > 4 else 4)
    else:
        ax.text(
            0.5,
            0.5,
            f"none of the {total} replicas finished\nwithin simulation.horizon_days",
            transform=ax.transAxes,
            ha="center",
            va="center",
        )
        ax.set_xticks([])  # no times to show
    where = "" if single else f" over {len(groups)} points"
    ax.set_title(f"Time to train: {finished_total} of {total} replicas finished{where}")
    ax.set_xlabel("time to train (days)")
    ax.set_ylabel("share of replicas finished")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    return fig


def _ideal_near_and_far(ideal_days: list[float], done_days: np.ndarray) -> tuple[list, list]:
    """The ideal times to draw as lines (near the finish times) and those to name only
    (further left of the first finish than FAR_IDEAL_SPANS spans of the finish times)."""
    if not done_days.size:
        return list(ideal_days), []
    first, last = float(done_days.min()), float(done_days.max())
    span = max(last - first, 1e-3 * max(last, 1.0))
    far = [v for v in ideal_days if first - v > FAR_IDEAL_SPANS * span]
    return [v for v in ideal_days if v not in far], far


def lost_work_distribution(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    swept_keys = swept_keys or []
    labels = _series_labels(table, swept_keys)
    groups = [
        (point, g["lost_work_hours"].dropna()) for point, g in table.groupby("point", sort=True)
    ]
    if len(groups) <= 3:
        for index, (point, values) in enumerate(groups):
            colour = _series_style(index, len(groups))[0]
            ax.hist(values, bins=40, alpha=0.6, label=labels[point], color=colour)
        ax.set_xlabel("lost work per run (hours)")
        ax.set_ylabel("replicas")
        if len(groups) > 1:
            _legend_below(fig, *ax.get_legend_handles_labels())
    else:
        ticks, axis_label = _point_ticks(table, swept_keys)
        x = np.arange(1, len(groups) + 1)
        ax.boxplot([v.to_numpy() for _, v in groups], positions=x)
        _set_point_ticks(ax, x, [ticks[p] for p, _ in groups], axis_label)
        ax.set_ylabel("lost work per run (hours)")
    ax.grid(alpha=0.3)
    ax.set_title("Lost work (rolled-back compute and aborted writes)")
    return fig


def far_out_edge(values: np.ndarray) -> float | None:
    """Where a histogram's axis stops so that a far tail does not squeeze the bulk: the
    largest value within Tukey's far-out fence (the upper quartile + 3 interquartile
    ranges), or None when no value lies beyond it."""
    finite = values[np.isfinite(values)]
    if finite.size < 4:
        return None
    q25, q75 = np.quantile(finite, [0.25, 0.75])
    fence = q75 + TAIL_FENCE_IQR * (q75 - q25)
    if not (finite > fence).any():
        return None
    return float(finite[finite <= fence].max())


def draw_histograms(
    ax: Axes,
    series: Sequence[tuple[str, Any, str]],
    bins: int = 30,
    start: float | None = None,
    unit: str = "d",
    what: str = "replica",
) -> float | None:
    """Overlaid histograms of (label, values, colour) on `ax`, on shared bins. A far tail
    (beyond a series' `far_out_edge`) would leave the bulk a sliver: the axis stops short
    of it and an arrow at the right edge says, per series, how many values lie beyond and
    where (`1 replica at 352 d →`): none is dropped unsaid. The axis reaches the largest
    value within any series' own fence. Returns its clip edge (None: everything drawn)."""
    arrays = [(label, np.asarray(values, dtype=float), colour) for label, values, colour in series]
    arrays = [(label, v[np.isfinite(v)], colour) for label, v, colour in arrays]
    arrays = [(label, v, colour) for label, v, colour in arrays if v.size]
    if not arrays:
        return None
    pooled = np.concatenate([v for _, v, _ in arrays])
    low = float(pooled.min()) if start is None else min(start, float(pooled.min()))
    # each series against its own fence: one series' spread is not another's outlier
    edges = [far_out_edge(v) for _, v, _ in arrays]
    high = max(float(v.max()) if edge is None else edge for edge, (_, v, _) in zip(edges, arrays))
    pad = 0.02 * max(high - low, 1e-9)
    grid = np.linspace(low, high + pad, bins + 1)
    beyond_notes = 0
    for label, values, colour in arrays:
        ax.hist(values[values <= grid[-1]], bins=grid, alpha=0.6, color=colour, label=label)
        far = np.sort(values[values > grid[-1]])
        if not far.size:
            continue
        plural = what if far.size == 1 else f"{what}s"
        where = _amount(far[0], unit) if far.size == 1 else (
            f"{far[0]:.3g}–{_amount(far[-1], unit)}"
        )  # fmt: skip
        ax.annotate(
            f"{far.size} {plural} at {where} →", xy=(0.99, 0.55 - 0.08 * beyond_notes),
            xycoords="axes fraction", ha="right", va="center", fontsize="small", color=colour,
            gid="beyond",
        )  # fmt: skip
        beyond_notes += 1
    ax.set_xlim(low, grid[-1])
    return float(grid[-1]) if (pooled > grid[-1]).any() else None


# ---------------------------------------------------------------------------- breakdowns


def _stacked_bars(
    ax: Axes,
    means: pd.DataFrame,
    parts: list[tuple[str, str, str]],
    scale: float = 1.0,
) -> np.ndarray:
    """Bars of the parts' means stacked per point; returns the tops."""
    x = np.arange(len(means))
    bottom = np.zeros(len(means))
    for column, name, colour in parts:
        values = means[column].to_numpy(dtype=float) / scale
        ax.bar(x, values, bottom=bottom, label=name, color=colour, gid=column)
        bottom += values
    return bottom


def _totals_on_bars(ax: Axes, tops: np.ndarray, texts: list[str]) -> None:
    """Each bar's total above it; upright while they fit side by side, else turned. The
    y axis gets the headroom the texts need (margins would not: a zero-height top part
    makes the bar's top a sticky edge)."""
    position, figure = ax.get_position(), ax.get_figure()
    assert figure is not None
    width_pt = position.width * figure.get_figwidth() * 72
    lines = [line for text in texts for line in text.split("\n")]
    rows = max((text.count("\n") + 1 for text in texts), default=1)
    longest_pt = (max(map(len, lines), default=0) + 1) * CHAR_PT
    upright = len(texts) * longest_pt <= width_pt
    for x, (top, text) in enumerate(zip(tops, texts, strict=True)):
        ax.text(
            x,
            top,
            text,
            ha="center",
            va="bottom",
            fontsize="small",
            rotation=0 if upright else 90,
            gid="total",
        )
    highest = float(np.max(tops, initial=0.0))
    if highest > 0:
        height_pt = position.height * figure.get_figheight() * 72
        text_pt = (1.5 + 2.0 * rows) * CHAR_PT if upright else longest_pt
        ax.set_ylim(0, highest * (1 + 1.3 * text_pt / max(height_pt - text_pt, text_pt)))


def _drawn_parts(
    means: pd.DataFrame, parts: list[tuple[str, str, str]]
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """The parts some point has any of, and the names of those zero at every point (left
    out of the bars and the legend, which names them in its title: `_absent_title`)."""
    drawn = [part for part in parts if float(means[part[0]].abs().max()) > 0]
    return drawn, [part[1] for part in parts if part not in drawn]


def _absent_title(absent: list[str]) -> dict[str, Any]:
    """The legend's title naming the parts left out, as `_legend_below`'s keywords."""
    if not absent:
        return {}
    return {"title": f"none in this run: {', '.join(absent)}", "title_fontsize": "small"}


def _bars_figsize(points: int, base_width: float) -> tuple[float, float]:
    """Wider for many points, so that each bar keeps room for its tick text."""
    return (base_width + 0.45 * max(0, points - 6), 4.8)


def wall_time_breakdown(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    """What each point's mean wall time spent beyond the ideal compute, stacked by bucket,
    from zero, with the overhead and the wall time it adds up to printed on each bar. The
    ideal compute (days, where bars of the whole would hide the hours that differ) is a
    number in the title when every point shares it; when it differs by point (a sweep of
    the cluster's size), a left panel draws the whole wall time from zero, ideal included.
    A bucket that is zero at every point is left out (of the legend too); the overhead is
    in the unit its largest bar reads best in (hours, or days from a day, as the answer)."""
    swept_keys = swept_keys or []
    ticks, axis_label = _point_ticks(table, swept_keys)
    means = table.groupby("point", sort=True)[[c for c, _, _ in BREAKDOWN]].mean()
    ideal = means["ideal_hours"].to_numpy(dtype=float)
    wall = means.sum(axis=1).to_numpy(dtype=float)
    shared = bool(np.ptp(ideal) <= SAME_IDEAL * max(float(np.max(ideal, initial=0.0)), 1e-9))
    overhead_parts, absent = _drawn_parts(means, BREAKDOWN[1:])
    parts = [BREAKDOWN[0], *overhead_parts]  # the ideal always; the rest where some point has any
    points = len(means)
    fig = Figure(figsize=_bars_figsize(points, 8 if shared else 11), layout="constrained")
    if shared:
        axes, overheads = [], fig.add_subplot()
    else:
        whole, overheads = fig.subplots(1, 2, width_ratios=[1, 2])
        axes = [whole]
    x = np.arange(points)
    wall_days = wall / 24.0
    decimals = decimals_for(wall_days)
    if not shared:
        tops = _stacked_bars(whole, means, parts, 24.0)
        _totals_on_bars(whole, tops, [f"{t:.{decimals}f} d" for t in tops])
        whole.set_ylabel("mean wall time per run (days)")
        whole.set_title("Wall time, from zero (the ideal differs by point)", fontsize="medium")
    beyond_hours = (wall - ideal) if points else np.zeros(0)
    days = bool(points) and float(np.max(np.abs(beyond_hours))) >= 24.0
    unit, short, scale = ("days", "d", 24.0) if days else ("hours", "h", 1.0)
    tops = _stacked_bars(overheads, means, parts[1:], scale)
    over = decimals_for(tops, 3)
    _totals_on_bars(
        overheads,
        tops,
        [
            f"+{t:.{over}f} {short}\n= {d:.{decimals}f} d"
            for t, d in zip(tops, wall_days, strict=True)
        ],
    )
    overheads.set_ylabel(f"mean per run beyond the ideal compute ({unit})")
    for ax in [*axes, overheads]:
        _set_point_ticks(ax, x, [ticks[p] for p in means.index], axis_label)
        ax.grid(alpha=0.3, axis="y")
    if shared and points:
        overheads.set_title(
            f"Wall time beyond the ideal compute ({ideal[0] / 24.0:.{decimals}f} days"
            + (" at every point)" if points > 1 else ")")
            + f"\nabove each bar: {unit} beyond ideal = mean wall time",
            fontsize="medium",
        )
    else:
        overheads.set_title(
            f"Beyond the ideal compute ({unit})\nabove each bar: {unit} beyond ideal = "
            "mean wall time",
            fontsize="medium",
        )
    source = axes[0] if axes else overheads
    _legend_below(fig, *source.get_legend_handles_labels(), ncols=5, **_absent_title(absent))
    return fig


def downtime_split(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    """Mean downtime per run stacked by its cause (the parts sum to downtime_hours)."""
    fig = Figure(figsize=_bars_figsize(table["point"].nunique(), 9), layout="constrained")
    ax = fig.add_subplot()
    swept_keys = swept_keys or []
    ticks, axis_label = _point_ticks(table, swept_keys)
    means = table.groupby("point", sort=True)[
        [c for c, _, _ in DOWNTIME_SPLIT] + ["downtime_hours"]
    ].mean()
    drawn, absent = _drawn_parts(means, DOWNTIME_SPLIT)
    tops = _stacked_bars(ax, means, drawn)
    totals = means["downtime_hours"].to_numpy(dtype=float)
    _totals_on_bars(ax, np.maximum(tops, totals), [f"{t:.3g} h" for t in totals])
    x = np.arange(len(means))
    _set_point_ticks(ax, x, [ticks[p] for p in means.index], axis_label)
    ax.set_ylabel("mean downtime per run (hours)")
    ax.grid(alpha=0.3, axis="y")
    ax.set_title("Downtime by cause")
    if drawn:
        _legend_below(fig, *ax.get_legend_handles_labels(), **_absent_title(absent))
    else:
        ax.text(
            0.5, 0.5, "no downtime in any replica", transform=ax.transAxes, ha="center", va="center"
        )
    return fig


def cost_breakdown(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    """Mean cost per run stacked by what it paid for, with the total printed; the right
    panel zooms into what the run paid beyond the ideal compute."""
    fig = Figure(figsize=_bars_figsize(table["point"].nunique(), 11), layout="constrained")
    whole, beyond = fig.subplots(1, 2, width_ratios=[1, 2])
    swept_keys = swept_keys or []
    ticks, axis_label = _point_ticks(table, swept_keys)
    means = table.groupby("point", sort=True)[
        [c for c, _, _ in COST_BREAKDOWN] + ["cost_usd"]
    ].mean()
    x = np.arange(len(means))
    bill = means["cost_usd"].to_numpy(dtype=float)  # printed as billed, not as the parts' sum
    drawn, absent = _drawn_parts(means, COST_BREAKDOWN)
    for ax, parts in [(whole, drawn), (beyond, [p for p in drawn if p != COST_BREAKDOWN[0]])]:
        tops = _stacked_bars(ax, means, parts)
        totals = bill if ax is whole else tops
        _totals_on_bars(ax, np.maximum(tops, totals), [usd(t) for t in totals])
        _set_point_ticks(ax, x, [ticks[p] for p in means.index], axis_label)
        ax.yaxis.set_major_formatter(FuncFormatter(_usd_tick))
        ax.set_ylabel("mean cost per run (USD)")
        ax.grid(alpha=0.3, axis="y")
    whole.set_title("Cost per run")
    beyond.set_title("Cost beyond ideal compute")
    _legend_below(fig, *whole.get_legend_handles_labels(), ncols=3, **_absent_title(absent))
    return fig


# ---------------------------------------------------------------------------- sweeps


def theory_marks(marks: dict[str, float] | None, key: str) -> list[tuple[str, float, str]]:
    """(label, value, line style) of each interval mark; Young and Daly within
    `MARKS_COINCIDE` of each other become one mark, at Daly's value."""
    marks = dict(marks or {})
    unit = _key_unit(key)
    young, daly = marks.get("Young"), marks.get("Daly")
    if (
        young is not None
        and daly is not None
        and abs(young - daly) <= MARKS_COINCIDE * max(abs(young), abs(daly))
    ):
        del marks["Young"], marks["Daly"]
        lines = [(f"Young ≈ Daly: {_amount(daly, unit)}", daly, "--")]
    else:
        lines = []
    styles = {"Young": ":", "Daly": "--"}
    lines += [
        (f"{name}: {_amount(value, unit)}", value, styles.get(name, "-."))
        for name, value in marks.items()
    ]
    return lines


def sweep_curve(
    summary: pd.DataFrame,
    key: str,
    metric: str,
    marks: dict[str, float] | None = None,
    ylabel: str | None = None,
) -> Figure:
    """A metric's mean against a swept value, with a 95% confidence band, the best value
    (per `better_direction`) starred for a metric a sweep is chosen on (OBJECTIVE_METRICS),
    and Young's and Daly's intervals marked. Infeasible
    values (summary rows with an `infeasible` reason) are not drawn; a note names them."""
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    rows = summary[summary["metric"] == metric].sort_values(key)
    skipped = infeasible_rows(summary)
    if len(skipped):
        ax.text(
            0.01,
            0.01,
            "not drawn, infeasible: "
            + ", ".join(f"{_short(key)}={_value_text(v)}" for v in skipped[key]),
            transform=ax.transAxes,
            fontsize="x-small",
            va="bottom",
            gid="infeasible",
        )
    x = rows[key].to_numpy(dtype=float)
    mean = rows["mean"].to_numpy(dtype=float)
    half = 1.96 * rows["sem"].to_numpy(dtype=float)
    colour = palette.metric_colour(metric)
    ax.plot(x, mean, marker="o", label="mean", color=colour)
    ax.fill_between(
        x, mean - half, mean + half, alpha=0.25, label="95% CI of the mean", color=colour
    )
    for label, value, style in theory_marks(marks, key):
        ax.axvline(value, color="black", linestyle=style, label=label, gid="theory")
    if np.isfinite(mean).any() and metric in OBJECTIVE_METRICS:
        direction = better_direction(metric)
        best = int(np.nanargmax(mean) if direction == "max" else np.nanargmin(mean))
        unit = _key_unit(key)
        where = _amount(x[best], unit) if unit else _value_text(rows[key].iloc[best])
        value = metric_text(mean[best], metric, decimals_for(mean))
        if unit_of(metric) not in ("", "USD"):
            value += f" {unit_of(metric)}"
        ax.plot(
            [x[best]],
            [mean[best]],
            marker="*",
            markersize=16,
            color=palette.BEST,
            markeredgecolor="black",
            linestyle="none",
            zorder=5,
            gid="best",
            label=f"best ({'highest' if direction == 'max' else 'lowest'} mean): {where} → {value}",
        )
    if np.all(x > 0) and x.max() / x.min() > LOG_SPAN:
        ax.set_xscale("log")
    if len(x) <= 12:  # the swept values themselves as ticks, not powers of ten
        ax.set_xticks(x, [_value_text(v) for v in rows[key]], fontsize="small")
        ax.minorticks_off()
    ax.set_xlabel(key)
    ax.set_ylabel(ylabel or _metric_label(metric))
    if unit_of(metric) == "USD":
        ax.yaxis.set_major_formatter(FuncFormatter(_usd_tick))
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels, ncols=3)
    return fig


def checkpoint_tradeoff(
    summary: pd.DataFrame, key: str, marks: dict[str, float] | None = None
) -> Figure:
    """The checkpoint interval's trade-off against a swept checkpoint key: on the left the
    mean checkpoint stall and lost work per run (hours, 95% bands) and their sum, which
    short intervals spend on writes and long ones on rolled-back work; on the right the
    mean cost per run, its lowest starred. Young's and Daly's intervals marked on both."""
    fig = Figure(figsize=(12.0, 4.6), layout="constrained")
    hours_ax, cost_ax = fig.subplots(1, 2)

    def means(metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = summary[summary["metric"] == metric].sort_values(key)
        return (
            rows[key].to_numpy(dtype=float),
            rows["mean"].to_numpy(dtype=float),
            1.96 * rows["sem"].to_numpy(dtype=float),
        )

    parts = {bucket: means(f"{bucket}_hours") for bucket in ("checkpoint_stall", "lost_work")}
    for bucket, (x, mean, half) in parts.items():
        colour = palette.bucket_colour(bucket)
        hours_ax.plot(x, mean, marker="o", color=colour, label=palette.bucket_label(bucket))
        hours_ax.fill_between(x, mean - half, mean + half, color=colour, alpha=0.2)
    both = parts["checkpoint_stall"][1] + parts["lost_work"][1]
    hours_ax.plot(x, both, linestyle="--", marker=".", color=palette.TOTAL,
                  label="checkpoint stall + lost work", gid="sum")  # fmt: skip
    hours_ax.set_ylabel("mean hours per run")
    hours_ax.set_ylim(bottom=0)
    hours_ax.set_title("Stall against lost work", fontsize="medium")
    x, cost, half = means("cost_usd")
    cost_ax.plot(x, cost, marker="o", color=palette.TOTAL, label="mean cost per run")
    cost_ax.fill_between(x, cost - half, cost + half, color=palette.TOTAL, alpha=0.2,
                         label="95% CI of the mean")  # fmt: skip
    if np.isfinite(cost).any():
        best = int(np.nanargmin(cost))
        where = _amount(x[best], _key_unit(key))
        cost_ax.plot([x[best]], [cost[best]], marker="*", markersize=16, color=palette.BEST,
                     markeredgecolor="black", linestyle="none", zorder=5, gid="best",
                     label=f"lowest: {where} → {usd(cost[best])}")  # fmt: skip
    cost_ax.yaxis.set_major_formatter(FuncFormatter(_usd_tick))
    cost_ax.set_ylabel("mean cost per run (USD)")
    cost_ax.set_title("What it costs", fontsize="medium")
    for ax in (hours_ax, cost_ax):
        for label, value, style in theory_marks(marks, key):
            ax.axvline(value, color="black", linestyle=style, label=label, gid="theory")
        if np.all(x > 0) and x.max() / x.min() > LOG_SPAN:
            ax.set_xscale("log")
        if len(x) <= 12:
            ax.set_xticks(x, [_value_text(v) for v in x], fontsize="small")
            ax.minorticks_off()
        ax.set_xlabel(key)
        ax.grid(alpha=0.3)
    handles, labels = hours_ax.get_legend_handles_labels()
    more = [(h, t) for h, t in zip(*cost_ax.get_legend_handles_labels()) if t not in labels]
    _legend_below(fig, [*handles, *(h for h, _ in more)], [*labels, *(t for _, t in more)],
                  ncols=3)  # fmt: skip
    return fig


def sweep_heatmap(
    summary: pd.DataFrame,
    keys: Sequence[str],
    metric: str,
    label: str | None = None,
) -> Figure:
    """A metric's mean over a two-key sweep: `keys[0]` across, `keys[1]` down; each cell
    says its value, the best cell (per `better_direction`) is outlined, and colours run
    from worse (dark) to better (bright). A cell of an infeasible point says so, blank."""
    across, down = keys
    rows = summary[summary["metric"] == metric]
    grid = rows.set_index([down, across])["mean"].unstack(across)
    skipped = infeasible_rows(summary)
    blocked = set(zip(skipped[down], skipped[across]))
    if blocked:
        grid = grid.reindex(
            index=grid.index.union(pd.Index(skipped[down].unique())),
            columns=grid.columns.union(pd.Index(skipped[across].unique())),
        )
    grid = grid.sort_index().sort_index(axis=1)
    values = grid.to_numpy(dtype=float)
    direction = better_direction(metric)
    fig = Figure(
        figsize=(max(6.0, 1.1 * grid.shape[1] + 3.0), max(3.8, 0.6 * grid.shape[0] + 2.5)),
        layout="constrained",
    )
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="viridis" if direction == "max" else "viridis_r", aspect="auto")
    decimals = decimals_for(values)
    for (i, j), value in np.ndenumerate(values):
        r, g, b, _ = image.cmap(image.norm(value)) if math.isfinite(value) else (1, 1, 1, 1)
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
        infeasible = (grid.index[i], grid.columns[j]) in blocked
        ax.text(
            j,
            i,
            "infeasible" if infeasible else metric_text(value, metric, decimals),
            ha="center",
            va="center",
            fontsize="small",
            color="white" if dark else "black",
            gid="cell",
        )
    title = label or _metric_label(metric)
    if np.isfinite(values).any():
        flat = int(np.nanargmax(values) if direction == "max" else np.nanargmin(values))
        i, j = np.unravel_index(flat, values.shape)
        ax.add_patch(
            Rectangle(
                (j - 0.5, i - 0.5),
                1,
                1,
                fill=False,
                edgecolor=palette.BEST_OUTLINE,
                linewidth=3,
                gid="best",
            )
        )
        title += (
            f"\nbest ({'highest' if direction == 'max' else 'lowest'}, outlined): "
            f"{_short(across)}={_value_text(grid.columns[j])}, "
            f"{_short(down)}={_value_text(grid.index[i])}"
        )
    ax.set_xticks(range(grid.shape[1]), [_value_text(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [_value_text(v) for v in grid.index])
    ax.set_xlabel(across)
    ax.set_ylabel(down)
    ax.set_title(title, fontsize="medium")
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(_metric_label(metric))
    if unit_of(metric) == "USD":
        bar.formatter = FuncFormatter(_usd_tick)
        bar.update_ticks()
    return fig


def infeasible_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's rows of points that cannot run (a non-empty `infeasible` reason)."""
    if "infeasible" not in summary:
        return summary.iloc[0:0]
    reason = summary["infeasible"]
    return summary[reason.notna() & (reason.astype(str) != "")]


# ---------------------------------------------------------------------------- a run's set


# a caption longer than this drops its last keys for "+N more": it must fit the figure
CAPTION_CHARS = 90


def run_label(name: str, overrides: Sequence[str] = (), sweep: dict[str, Any] | None = None) -> str:
    """What a run's figures are of: the scenario's name, the key of each `--set` (not its
    value, which may be a whole YAML list of failure classes), and each key swept with one
    value (`--param k=v`, so on no axis), one line of at most CAPTION_CHARS:
    `llama70b-1k  --set failures  --set cluster.spare_nodes  checkpoint.keep_last=2`."""
    given = list(dict.fromkeys(item.partition("=")[0].strip() for item in overrides))
    fixed = []
    for key, values in (sweep or {}).items():
        if not isinstance(values, list) or len(values) != 1 or key in given:
            continue
        value = _value_text(values[0])
        short = "\n" not in value and len(value) <= 20
        fixed.append(f"{key}={value}" if short else key)
    parts = [*(f"--set {key}" for key in given), *fixed]
    label = "  ".join([name, *parts])
    kept = len(parts)
    while len(label) > CAPTION_CHARS and kept > 0:  # drop keys from the end, count them
        kept -= 1
        label = "  ".join([name, *parts[:kept], f"(+{len(parts) - kept} more)"])
    return label


def caption(fig: Figure, label: str) -> None:
    """`label` above the figure, small and to the left: which run, what it overrode."""
    fig.suptitle(label, x=0.01, ha="left", fontsize="small", color=palette.CAPTION, gid="run")


def write_figures(
    table: pd.DataFrame,
    summary: pd.DataFrame,
    directory: Path,
    swept_keys: list[str],
    marks: dict[str, dict[str, float]] | None = None,
    label: str | None = None,
    means: pd.DataFrame | None = None,
) -> list[Path]:
    """The standard figures of a run, as PNG files in `directory`: distributions and
    breakdowns per point; curves against a single swept key, heatmaps over two.
    A table without the downtime or cost parts (an older run) skips their figures.
    `label` (`run_label`: the scenario and what was overridden) heads every figure, and
    names the point of a run without a sweep. `means` (one row per point: its swept
    values and the mean of each breakdown column over its replicas) feeds the bar figures
    instead of `table`, which then needs only the distributions' columns (`TABLE_COLUMNS`
    less the breakdowns): a caller need not hold every column of every replica."""
    directory.mkdir(parents=True, exist_ok=True)
    ok = table[table["error"] == ""] if "error" in table else table
    if label and not swept_keys:
        ok = ok.assign(scenario=label)
    bars = ok
    if means is not None:
        bars = means.assign(scenario=label) if label and not swept_keys else means
    figures: dict[str, Callable[[], Figure]] = {
        "time_to_train_cdf.png": lambda: time_to_train_cdf(ok, swept_keys),
        "lost_work.png": lambda: lost_work_distribution(ok, swept_keys),
        "wall_time_breakdown.png": lambda: wall_time_breakdown(bars, swept_keys),
    }
    if all(column in bars for column, _, _ in DOWNTIME_SPLIT):
        figures["downtime_split.png"] = lambda: downtime_split(bars, swept_keys)
    if all(column in bars for column, _, _ in COST_BREAKDOWN):
        figures["cost_breakdown.png"] = lambda: cost_breakdown(bars, swept_keys)
    present = set(summary["metric"]) if "metric" in summary else set()
    numeric = [k for k in swept_keys if pd.api.types.is_numeric_dtype(ok[k])]
    if len(swept_keys) == 1 and numeric:
        key = numeric[0]
        for metric in (m for m in SWEEP_METRICS if m in present):
            figures[f"sweep_{metric}.png"] = lambda metric=metric: sweep_curve(
                summary, key, metric, (marks or {}).get(key)
            )
    elif len(swept_keys) == 2:
        for metric in (m for m in HEATMAP_METRICS if m in present):
            figures[f"heatmap_{metric}.png"] = lambda metric=metric: sweep_heatmap(
                summary, swept_keys, metric
            )
    paths = []
    for name, build in figures.items():  # one figure in memory at a time
        path = directory / name
        fig = build()
        if label:
            caption(fig, label)
        fig.savefig(path, dpi=110)
        paths.append(path)
    return paths
