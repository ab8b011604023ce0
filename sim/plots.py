"""Figures from replica and summary tables (matplotlib, object API, no global state).

Each function returns a `Figure`; `write_figures` saves the standard set of a
run. Nothing here imports simpy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

CDF_POINTS = 4000  # steps drawn per CDF: enough for any screen, whatever the replica count

BREAKDOWN = [
    ("ideal_hours", "ideal compute", "#4c72b0"),
    ("slowdown_hours", "slowdown", "#dd8452"),
    ("lost_work_hours", "lost work", "#c44e52"),
    ("checkpoint_stall_hours", "checkpoint stall", "#8172b3"),
    ("downtime_hours", "downtime", "#937860"),
]


def _point_labels(table: pd.DataFrame, swept_keys: list[str]) -> dict[int, str]:
    labels = {}
    for point, group in table.groupby("point", sort=True):
        if swept_keys:
            labels[point] = ", ".join(f"{k.split('.')[-1]}={group[k].iloc[0]}" for k in swept_keys)
        else:
            labels[point] = str(group["scenario"].iloc[0])
    return labels


def time_to_train_cdf(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    labels = _point_labels(table, swept_keys or [])
    for point, group in table.groupby("point", sort=True):
        days = np.sort(group["time_to_train_days"].dropna().to_numpy())
        if days.size == 0:
            continue
        # unfinished replicas keep the CDF below 1: they never reach the end
        share = np.arange(1, days.size + 1) / len(group)
        if days.size > CDF_POINTS:  # past a few thousand steps a line looks the same
            keep = np.unique(np.linspace(0, days.size - 1, CDF_POINTS).astype(int))
            days, share = days[keep], share[keep]
        ax.step(days, share, where="post", label=labels[point])
    finished = table[table["finished"]]
    if len(finished):
        ideal_days = finished["ideal_hours"].iloc[0] / 24.0
        ax.axvline(ideal_days, color="grey", linestyle="--", label=f"ideal {ideal_days:.2f} d")
        ax.legend(fontsize="small")
    else:
        ax.text(
            0.5,
            0.5,
            f"none of the {len(table)} replicas finished\nwithin simulation.horizon_days",
            transform=ax.transAxes,
            ha="center",
            va="center",
        )
    ax.set_xlabel("time to train (days)")
    ax.set_ylabel("share of replicas finished")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title("Time-to-train distribution")
    return fig


def lost_work_distribution(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    labels = _point_labels(table, swept_keys or [])
    groups = [
        (labels[p], g["lost_work_hours"].dropna()) for p, g in table.groupby("point", sort=True)
    ]
    if len(groups) <= 3:
        for label, values in groups:
            ax.hist(values, bins=40, alpha=0.6, label=label)
        ax.set_xlabel("lost work per run (hours)")
        ax.set_ylabel("replicas")
        if len(groups) > 1:
            ax.legend(fontsize="small")
    else:
        ax.boxplot([v.to_numpy() for _, v in groups], tick_labels=[lbl for lbl, _ in groups])
        ax.set_ylabel("lost work per run (hours)")
        ax.tick_params(axis="x", labelrotation=30, labelsize="small")
    ax.grid(alpha=0.3)
    ax.set_title("Lost work (rolled-back compute and aborted writes)")
    return fig


def wall_time_breakdown(table: pd.DataFrame, swept_keys: list[str] | None = None) -> Figure:
    """Mean wall time stacked by where it went; the right panel zooms into the overheads."""
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    whole, overheads = fig.subplots(1, 2, width_ratios=[1, 2])
    labels = _point_labels(table, swept_keys or [])
    means = table.groupby("point", sort=True)[[c for c, _, _ in BREAKDOWN]].mean()
    x = np.arange(len(means))
    ticks = [labels[p] for p in means.index]
    for ax, parts, scale, unit in [
        (whole, BREAKDOWN, 24.0, "days"),
        (overheads, BREAKDOWN[1:], 1.0, "hours"),
    ]:
        bottom = np.zeros(len(means))
        for column, name, colour in parts:
            values = means[column].to_numpy() / scale
            ax.bar(x, values, bottom=bottom, label=name, color=colour)
            bottom += values
        ax.set_xticks(x, ticks, rotation=30 if len(x) > 3 else 0, fontsize="small")
        ax.set_ylabel(f"mean ({unit})")
        ax.grid(alpha=0.3, axis="y")
    whole.set_title("Wall time")
    overheads.set_title("Overheads beyond ideal compute")
    overheads.legend(fontsize="small")
    return fig


def sweep_curve(
    summary: pd.DataFrame,
    key: str,
    metric: str,
    marks: dict[str, float] | None = None,
    ylabel: str | None = None,
) -> Figure:
    """A metric's mean against a swept value, with a 95% confidence band and theory marks."""
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    rows = summary[summary["metric"] == metric].sort_values(key)
    x = rows[key].to_numpy(dtype=float)
    mean = rows["mean"].to_numpy()
    half = 1.96 * rows["sem"].to_numpy()
    ax.plot(x, mean, marker="o", label="mean")
    ax.fill_between(x, mean - half, mean + half, alpha=0.25, label="95% CI")
    styles = {"Young": ":", "Daly": "--"}
    for name, value in (marks or {}).items():
        ax.axvline(
            value, color="black", linestyle=styles.get(name, "-."), label=f"{name}: {value:.4g}"
        )
    ax.set_xlabel(key)
    ax.set_ylabel(ylabel or metric)
    if np.all(x > 0) and x.max() / x.min() > 20:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def write_figures(
    table: pd.DataFrame,
    summary: pd.DataFrame,
    directory: Path,
    swept_keys: list[str],
    marks: dict[str, dict[str, float]] | None = None,
) -> list[Path]:
    """The standard figures of a run, as PNG files in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ok = table[table["error"] == ""] if "error" in table else table
    figures = {
        "time_to_train_cdf.png": time_to_train_cdf(ok, swept_keys),
        "lost_work.png": lost_work_distribution(ok, swept_keys),
        "wall_time_breakdown.png": wall_time_breakdown(ok, swept_keys),
    }
    numeric = [k for k in swept_keys if pd.api.types.is_numeric_dtype(ok[k])]
    if len(swept_keys) == 1 and numeric:
        key = numeric[0]
        for metric, label in [
            ("time_to_train_days", "mean time to train (days)"),
            ("lost_work_hours", "mean lost work (hours)"),
        ]:
            figures[f"sweep_{metric}.png"] = sweep_curve(
                summary, key, metric, (marks or {}).get(key), label
            )
    paths = []
    for name, fig in figures.items():
        path = directory / name
        fig.savefig(path, dpi=110)
        paths.append(path)
    return paths
