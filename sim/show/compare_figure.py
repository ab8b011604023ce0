"""The figure of `trainsim compare`: the two runs' time-to-train distributions of each
matched pair (`sim.decide.compare`), CDFs over all replicas with each run's mean marked."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from sim.decide import answer
from sim.decide.compare import MAX_PANELS, Comparison, default_figure_name, pair_title
from sim.model.scenario_set import ScenarioError
from sim.show import palette
from sim.show.plots import run_label


def figure(comparison: Comparison) -> Figure:
    """The two time-to-train distributions of each matched pair: CDFs over all replicas
    (unfinished ones keep a curve below 1), each run's mean marked."""
    pairs = comparison.pairs[:MAX_PANELS]
    columns = 1 if len(pairs) == 1 else 2
    rows = math.ceil(len(pairs) / columns)
    fig = Figure(figsize=(8.5 if columns == 1 else 13, 4.8 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    colours = palette.RUNS  # not a time bucket's colours: A and B are runs, not buckets
    for ax, pair in zip(axes, pairs):
        for run, days, total in (
            (comparison.a, pair.days_a, pair.replicas_a - pair.errors_a),
            (comparison.b, pair.days_b, pair.replicas_b - pair.errors_b),
        ):
            colour = colours[run.label]
            label = (
                f"{run.label}: {run_label(run.name, run.manifest.get('overrides') or [])} "
                f"({run.run_id})\n{total} replicas, {days.size} finished"
            )
            if days.size == 0:
                ax.plot([], [], color=colour, label=f"{label}: none finished")
                continue
            # the curve starts at 0 and climbs 1/total per finished replica
            x = np.sort(days)
            x = np.concatenate([[x[0]], x])
            share = np.arange(0, days.size + 1) / max(total, 1)
            ax.step(x, share, where="post", color=colour, label=label)
            mean = float(days.mean())
            ax.axvline(
                mean,
                color=colour,
                linestyle="--",
                linewidth=1.2,
                label=f"mean {run.label}: {mean:.3f} days",
            )
        lines = [f"Time to train: {pair_title(comparison, pair)}"]
        d = pair.metric("time_to_train_days").difference
        if math.isfinite(d.estimate):
            interval = (
                f", 95% CI {answer.readable_interval('time_to_train_days', d.low, d.high)}"
                if math.isfinite(d.low)
                else ", no CI"
            )
            method = "paired by replica" if pair.method == "paired" else "Welch's t"
            if pair.method == "paired" and d.n_a < (pair.pairs or 0):
                method += f", over the {d.n_a} finished in both"
            estimate = answer.readable("time_to_train_days", d.estimate, signed=True)
            lines.append(f"B − A = {estimate}{interval} ({method})")
        ax.set_title("\n".join(lines), fontsize="medium")
        ax.set_xlabel("time to train (days)")
        ax.set_ylabel("share of replicas finished")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="lower right")
    for ax in axes[len(pairs) :]:
        ax.set_visible(False)
    if len(comparison.pairs) > MAX_PANELS:
        fig.suptitle(f"the first {MAX_PANELS} of {len(comparison.pairs)} matched pairs")
    return fig


def write_figure(comparison: Comparison, path: str | Path | None = None) -> Path:
    """Save the figure (default: compare-with-<run A>.png in RUN_B) or raise a ScenarioError naming the
    path that cannot be written."""
    path = (
        Path(path)
        if path is not None
        else comparison.b.path / default_figure_name(comparison.a.path)
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the format follows the file's suffix (png, pdf, svg, ...); PNG without one
        figure(comparison).savefig(path, dpi=110, format=None if path.suffix else "png")
    except (OSError, ValueError) as exc:
        raise ScenarioError(
            "--figure",
            str(path),
            f"cannot write the figure there ({getattr(exc, 'strerror', None) or exc}); choose a writable path "
            "with --figure PATH, or --no-figure",
        ) from None
    return path
