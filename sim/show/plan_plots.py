"""The figure of a plan (`trainsim plan`): time to train against cost for every point of
the grid, the time-cost Pareto front, the deadline and the chosen configuration.

It reads only the plan document (plan.json as a dict), so a notebook or a report can draw
it from the file. Nothing here imports simpy.
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from sim.decide import answer
from sim.show import palette, plots

# status -> (label, marker, colour, size); drawn in this order, the chosen point on top
STYLES = {
    "infeasible": ("infeasible (misses the deadline)", "X", palette.PLAN["infeasible"], 52),
    "dominated": ("dominated (worse {objective} than a feasible point)", "s",
                  palette.PLAN["dominated"], 34),
    "unproven": ("unproven (meets the deadline by the estimate, not at 95% confidence)", "o",
                 palette.PLAN["unproven"], 42),
    "feasible": ("feasible (meets the deadline)", "o", palette.PLAN["feasible"], 42),
    "chosen": ("chosen", "*", palette.PLAN["chosen"], 320),
}  # fmt: skip
# a panel with at most this many points names each; beyond, the front and the deadline's
LABEL_ALL = 16
# the size of a point label's character (x-small) and line, in points: labels that would
# overlap at this size are joined
LABEL_CHAR_PT = 4.3
LABEL_LINE_PT = 8.5
# points closer to the deadline than this share of the panel's width get their chance of
# meeting it written beside them: at that distance the eye cannot tell the side
AT_DEADLINE = 0.04


def short_label(candidate: dict[str, Any], keys: list[str]) -> str:
    """The varied values of a point, slash-separated in the order of the keys."""
    return "/".join(_value(candidate.get(k)) for k in keys)


def pareto_figure(doc: dict[str, Any]) -> Figure:
    """Every point at (time to train at the plan's quantile, mean cost), marked by status;
    the Pareto front joined by a line and labelled; the deadline as a vertical line with
    the side that misses it shaded; the chosen point starred (the legend names it); the legend outside
    the axes, so that it never hides a point. When a few points lie far away (no spares:
    weeks of waiting for repairs), a second panel zooms in on the deadline and the front."""
    keys = list(doc.get("varied_keys") or [])
    quantile = doc["quantile"]
    drawn = [
        c
        for c in doc["candidates"]
        if _finite(c.get("time_to_train_days_at_quantile")) and _finite(c.get("cost_usd_mean"))
    ]
    window = _zoom_window(doc, drawn)
    fig = Figure(figsize=(13.5 if window else 9.5, 6.4), layout="constrained")
    if window is None:
        panels = [fig.add_subplot()]
    else:
        panels = list(fig.subplots(1, 2, width_ratios=[1, 1.5]))
    for ax in panels:
        _draw(ax, doc, drawn)
    ax = panels[-1]
    if window is not None:
        (x0, x1), (y0, y1) = window
        panels[0].set_title("every point", loc="left", fontsize="small")
        panels[0].indicate_inset([x0, y0, x1 - x0, y1 - y0], edgecolor="black", alpha=0.6)
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_title(
            "near the deadline and the front (the box on the left)", loc="left", fontsize="small"
        )
    _label(ax, doc, drawn, keys)
    cannot = sum(1 for c in doc["candidates"] if not c.get("replicas"))  # infeasible: never ran
    missing = len(doc["candidates"]) - len(drawn) - cannot
    notes = []
    if missing:
        notes.append(
            f"{missing} point(s) not drawn: fewer than {quantile:.0%} of their replicas finished"
        )
    if cannot:
        notes.append(
            f"{cannot} point(s) not drawn: infeasible, they cannot run (plan.json says why)"
        )
    if notes:
        ax.text(
            0.99,
            0.01,
            "\n".join(notes),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize="x-small",
        )
    name = plots.run_label(str(doc.get("scenario", "")), doc.get("overrides") or [])
    title = f"{name}: time to train vs cost of {len(doc['candidates'])} points"
    if keys:
        title += "\npoint labels: " + " / ".join(keys)
    fig.suptitle(title, x=0.01, ha="left", fontsize="medium")
    handles, labels = panels[-1].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=2 if window is None else 3,
        fontsize="small",
        frameon=False,
    )
    return fig


def _draw(ax: Any, doc: dict[str, Any], drawn: list[dict]) -> None:
    """One panel: the points by status, the front, the deadline and the axes' labels."""
    deadline, quantile = doc["deadline_days"], doc["quantile"]
    keys = list(doc.get("varied_keys") or [])
    for status, (label, marker, colour, size) in STYLES.items():
        group = [c for c in drawn if c["status"] == status]
        if not group:
            continue
        label = label.format(objective=answer.metric_words(doc.get("objective", "cost_usd")))
        label += f": {short_label(group[0], keys)}" if status == "chosen" else f": {len(group)}"
        ax.scatter(
            [c["time_to_train_days_at_quantile"] for c in group],
            [c["cost_usd_mean"] for c in group],
            marker=marker,
            s=size,
            color=colour,
            edgecolors="black" if status == "chosen" else "none",
            linewidths=0.8,
            alpha=1.0 if status in ("chosen", "feasible") else 0.75,
            label=label,
            zorder=4 if status == "chosen" else 3,
        )
    front = doc.get("pareto") or []
    if front:
        ax.plot(
            [p["time_to_train_days_at_quantile"] for p in front],
            [p["cost_usd_mean"] for p in front],
            color="black",
            linewidth=1.0,
            marker="o",
            markersize=11,
            markerfacecolor="none",
            label=f"Pareto front (time, cost): {len(front)}",
            zorder=2,
        )
    ax.axvline(
        deadline,
        color="black",
        linestyle="--",
        linewidth=1.0,
        label=f"deadline {deadline:g} days (the shaded side misses it)",
        zorder=1,
    )
    ax.margins(x=0.05, y=0.1)
    left, right = ax.get_xlim()
    ax.axvspan(
        deadline,
        max(right, deadline) + (right - left),
        color=palette.PLAN["deadline"],
        alpha=0.06,
        lw=0,
    )
    ax.set_xlim(left, right)
    ax.set_xlabel(f"time to train, {_quantile_name(quantile)} over replicas (days)")
    ax.set_ylabel("mean cost (USD)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _usd_tick(ax, value)))
    ax.grid(alpha=0.3)


def _zoom_window(
    doc: dict[str, Any], drawn: list[dict]
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """x and y limits around the deadline, the front and the chosen point, or None when
    such a window would show nearly everything anyway."""
    if len(drawn) < 2:
        return None
    xs = [c["time_to_train_days_at_quantile"] for c in drawn]
    ys = [c["cost_usd_mean"] for c in drawn]
    core = [p["time_to_train_days_at_quantile"] for p in doc.get("pareto") or []]
    core.append(doc["deadline_days"])
    low, high = min(min(core), min(xs)), max(core)
    pad = 0.3 * max(high - low, 0.05 * high)
    x0, x1 = low - 0.3 * pad, high + pad
    inside = [y for x, y in zip(xs, ys) if x0 <= x <= x1]
    if not inside or len(inside) == len(drawn):
        return None
    y_pad = 0.12 * max(max(inside) - min(inside), 0.005 * max(inside))
    y0, y1 = min(inside) - y_pad, max(inside) + y_pad
    if (x1 - x0) > 0.5 * (max(xs) - min(xs)) and (y1 - y0) > 0.5 * (max(ys) - min(ys)):
        return None  # the window would not make the crowded part much larger
    return (x0, x1), (y0, y1)


def _label(ax: Any, doc: dict[str, Any], drawn: list[dict], keys: list[str]) -> None:
    """Name the points of this panel: every one when there are at most LABEL_ALL, else
    those of the front (the chosen one says so) and those so close to the deadline that
    the eye cannot tell their side, with their chance of meeting it (P(meet)). Labels that
    would overlap are joined into one, its lines in the order of the points' heights."""
    front = {p["point"] for p in doc.get("pareto") or []}
    chosen = (doc.get("chosen") or {}).get("point")
    deadline = doc["deadline_days"]
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    near = AT_DEADLINE * (x1 - x0)
    inside = [
        c
        for c in drawn
        if x0 <= c["time_to_train_days_at_quantile"] <= x1 and y0 <= c["cost_usd_mean"] <= y1
    ]
    named = []
    for c in inside:
        at_deadline = abs(c["time_to_train_days_at_quantile"] - deadline) <= near
        if len(inside) > LABEL_ALL and c["point"] not in front and not at_deadline:
            continue
        text = short_label(c, keys)
        if c["point"] == chosen:
            text += " chosen"
        if at_deadline and _finite(c.get("p_meet")):
            text += f": P(meet) {c['p_meet']:.2f}"
            if c["status"] == "infeasible":
                text += ", misses"
        named.append((c, text))
    for group in _overlapping(ax, named):
        group.sort(key=lambda item: -item[0]["cost_usd_mean"])  # top line: highest point
        anchor = group[0][0]
        infeasible = all(c["status"] == "infeasible" for c, _ in group)
        ax.annotate(
            "\n".join(text for _, text in group),
            (anchor["time_to_train_days_at_quantile"], anchor["cost_usd_mean"]),
            xytext=(8, 4),
            textcoords="offset points",
            fontsize="x-small",
            color=palette.PLAN["infeasible"] if infeasible else "#222222",
            va="bottom" if len(group) == 1 else "top",
            gid="point-label",
        )


def _overlapping(ax: Any, named: list[tuple[dict, str]]) -> list[list[tuple[dict, str]]]:
    """The labels grouped so that no two groups' texts would overlap: a label joins the
    first group whose texts it would cover (by their estimated size in points, placed to
    the upper right of their points), else starts one."""
    figure = ax.get_figure()
    box = ax.get_position()
    width_pt = max(box.width * figure.get_figwidth() * 72, 1.0)
    height_pt = max(box.height * figure.get_figheight() * 72, 1.0)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()

    def where(c: dict) -> tuple[float, float]:
        x = (c["time_to_train_days_at_quantile"] - x0) / ((x1 - x0) or 1.0) * width_pt
        y = (c["cost_usd_mean"] - y0) / ((y1 - y0) or 1.0) * height_pt
        return x, y

    groups: list[list[tuple[dict, str]]] = []
    for c, text in named:
        x, y = where(c)
        for group in groups:
            gx, gy = where(group[0][0])
            lines = len(group) + 1
            # the text to the left reaches right over the other's point, or not
            left_text = max(len(t) for _, t in group) if gx <= x else len(text)
            wide = left_text * LABEL_CHAR_PT + 8
            if abs(gx - x) < wide and abs(gy - y) < lines * LABEL_LINE_PT + 4:
                group.append((c, text))
                break
        else:
            groups.append([(c, text)])
    return groups


def _value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _usd_tick(ax: Any, value: float) -> str:
    """$1.05M, $1.10M: in millions (or thousands) with the decimals the ticks' step needs,
    the same for every tick, so that neighbouring ticks read apart."""
    ticks = [float(t) for t in ax.yaxis.get_majorticklocs()] or [value]
    largest = max(abs(t) for t in ticks)
    scale, suffix = (1e6, "M") if largest >= 1e6 else (1e3, "k") if largest >= 1e3 else (1, "")
    decimals = next(
        (
            d
            for d in range(5)
            if all(abs(round(t / scale, d) - t / scale) < 1e-9 * max(1.0, largest / scale)
                   for t in ticks)
        ),
        4,
    )  # fmt: skip
    return f"${value / scale:,.{decimals}f}{suffix}"


def _quantile_name(quantile: float) -> str:
    percent = quantile * 100
    return f"p{percent:g}" if percent == round(percent, 2) else f"the {quantile:g} quantile"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
