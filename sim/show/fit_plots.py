"""The figures of `trainsim fit`: per class the distribution of the times between a node's
failures against the fitted laws, and the per-node failure counts against Poisson and the
lemon mixture. Built as matplotlib `Figure`s (no pyplot state); nothing here imports simpy.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from scipy import stats

from sim.data.estimates import LemonFit
from sim.data.fit import ClassFit, FitResult
from sim.data.fleet_check import Check
from sim.show import palette


def kaplan_meier(observed: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of times between failures when some are cut off by the window's end
    (Kaplan–Meier): at each failure time t, 1 − Π (1 − failures at t / at risk at t)."""
    times = np.concatenate((observed, censored))
    failed = np.concatenate((np.ones(len(observed)), np.zeros(len(censored))))
    order = np.lexsort((1 - failed, times))  # failures before censorings at the same time
    times, failed = times[order], failed[order]
    at_risk = len(times) - np.arange(len(times))
    survival = np.cumprod(np.where(failed == 1, 1 - 1 / at_risk, 1.0))
    keep = failed == 1
    return times[keep], 1 - survival[keep]


def lifetime_figure(fit: ClassFit) -> Figure:
    """The Kaplan–Meier CDF of a class's times between failures of a node (hours), with the
    fitted exponential and Weibull CDFs."""
    fig = Figure(figsize=(6.4, 4.8))
    draw_lifetimes(fit, fig.add_subplot())
    fig.tight_layout()
    return fig


def draw_lifetimes(fit: ClassFit, ax: Axes) -> None:
    """`lifetime_figure` on an axis of the caller's (a notebook's subplots): the log's whole
    lives (between two failures of a component; the first, from the window's start, is a
    residual life and is left out), those cut by the window's end censored."""
    x, cdf = kaplan_meier(fit.observed, fit.censored)
    ax.step(
        x, cdf, where="post", color=palette.TOTAL, label=f"log ({len(fit.observed)} whole lives)"
    )
    grid = np.geomspace(max(float(np.min(x)), 1e-3) / 2, float(np.max(x)) * 2, 200)
    # the exponential's mean on the same lives: every whole and cut time over the failures
    mean_hours = (float(np.sum(fit.observed)) + float(np.sum(fit.censored))) / len(fit.observed)
    life = fit.lifetime
    ax.plot(
        grid,
        1 - np.exp(-grid / mean_hours),
        color=palette.SERIES[0],
        label="exponential" + (f" (AIC {life.aic_exponential:,.1f})" if life is not None else ""),
    )
    if life is not None:
        ax.plot(
            grid,
            stats.weibull_min.cdf(grid, life.shape.value, scale=life.scale_hours),
            color=palette.SERIES[1],
            linestyle="--",
            label=f"Weibull k={life.shape.value:.2f} "
            f"[{life.shape.low:.2f}, {life.shape.high:.2f}] (AIC {life.aic_weibull:,.1f})",
        )
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    if len(fit.censored):  # why the log's curve stops short of 1: a legend line, off the curves
        ax.plot([], [], linestyle="none", gid="censored", label=(
            f"{len(fit.censored)} lives cut by the window's end (censored):\n"
            "the log's curve ends at its longest whole life"
        ))  # fmt: skip
    whose = "a node" if fit.scope in ("gpu", "node") else f"the {fit.scope}"
    ax.set_xlabel(f"hours between two failures of {whose}")
    ax.set_ylabel("P(time between failures <= t)")
    chosen = fit.distribution if fit.lifetime is not None else "exponential (too few failures)"
    ax.set_title(f"{fit.name}: times between failures; written: {chosen}", fontsize=10)
    # under the axes: the curves may reach any corner, the long note would cover one
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2,
              frameon=False)  # fmt: skip
    ax.grid(alpha=0.3)


def counts_figure(lemons: LemonFit) -> Figure:
    """Nodes by their number of failures, against Poisson at the mean and the mixture."""
    fig = Figure(figsize=(6.4, 4.0))
    draw_counts(lemons, fig.add_subplot())
    fig.tight_layout()
    return fig


def draw_counts(lemons: LemonFit, ax: Axes) -> None:
    """`counts_figure` on an axis of the caller's."""
    counts = lemons.counts.astype(int)
    top = int(counts.max()) if len(counts) else 0
    k = np.arange(top + 2)
    seen = np.bincount(counts, minlength=len(k))[: len(k)]
    ax.bar(k, seen, color=palette.CAPTION, alpha=0.6, label=f"{lemons.nodes} nodes")
    mean = float(np.mean(counts)) if len(counts) else 0.0
    ax.plot(
        k,
        lemons.nodes * stats.poisson.pmf(k, mean),
        "o-",
        color=palette.SERIES[0],
        label=f"Poisson, mean {mean:.2f} (dispersion p = {lemons.p_value:.2g})",
    )
    if lemons.mixture is not None:
        m = lemons.mixture
        mix = (1 - m.fraction) * stats.poisson.pmf(k, m.normal) + m.fraction * stats.poisson.pmf(
            k, m.lemon
        )
        ax.plot(
            k,
            lemons.nodes * mix,
            "s--",
            color=palette.SERIES[1],
            label=f"mixture: {m.fraction:.1%} lemons at {min(m.multiplier, 1000):.1f}x",
        )
    if lemons.spread == "gamma":
        shape = 1.0 / lemons.node_cv.value**2
        ax.plot(
            k,
            lemons.nodes * stats.nbinom.pmf(k, shape, shape / (shape + mean)),
            "^--",
            color=palette.SERIES[2],
            label=f"gamma spread: CV {lemons.node_cv.value:.2f} (negative binomial)",
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # failures come whole
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("failures of a node in the window (node-attributable classes)")
    ax.set_ylabel("nodes")
    verdict = {
        "lemons": "overdispersed: lemons",
        "gamma": "overdispersed: a gamma spread of the nodes' rates",
    }.get(lemons.spread, "not overdispersed: nodes alike")
    ax.set_title(f"Failures per node: {verdict}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=110, format="png")
    return buffer.getvalue()


def write_fit_figures(
    result: FitResult, out: Path, write: Callable[[Path, bytes], None] | None = None
) -> list[Path]:
    """`lifetimes-<class>.png` for each class with a fitted law, `node-counts.png` when the
    dispersion test ran; each written by `write(path, png)` (the CLI's writes a new regular
    file, never through a link; default: a plain write)."""
    write = write or (lambda path, data: path.write_bytes(data))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fit in result.classes:
        if len(fit.observed) == 0 or not math.isfinite(float(np.sum(fit.observed))):
            continue  # no component failed twice: no whole life to draw
        path = out / f"lifetimes-{fit.name}.png"
        write(path, _png(lifetime_figure(fit)))
        written.append(path)
    if result.lemons is not None:
        path = out / "node-counts.png"
        write(path, _png(counts_figure(result.lemons)))
        written.append(path)
    return written


def check_figure(check: Check) -> Figure:
    """The log against the model run back: nodes by their failure count (the log's, and the
    replicas' mean with their 5-95% range), and the failures so far over the window (the
    log's, the replicas' mean and range)."""
    fig = Figure(figsize=(11.0, 4.2))
    counts_ax, time_ax = fig.subplots(1, 2)
    top = int(max(check.log_counts.max(initial=0), *(c.max(initial=0) for c in check.model_counts)))
    top = min(top, int(np.quantile(check.log_counts, 0.995)) * 2 + 5)
    edges = np.arange(top + 2) - 0.5
    model = np.array([np.histogram(np.minimum(c, top), edges)[0] for c in check.model_counts])
    k = np.arange(top + 1)
    counts_ax.fill_between(
        k, np.quantile(model, 0.05, axis=0), np.quantile(model, 0.95, axis=0), step="mid",
        color=palette.SERIES[0], alpha=0.25, label="model: 5-95% of replicas",
    )  # fmt: skip
    counts_ax.step(k, model.mean(axis=0), where="mid", color=palette.SERIES[0],
                   label=f"model: mean of {check.replicas} replicas")  # fmt: skip
    logged = np.histogram(np.minimum(check.log_counts, top), edges)[0].astype(float)
    logged[logged == 0] = np.nan  # no node with that count: no dot
    counts_ax.plot(k, logged, "o", color=palette.TOTAL, markersize=4, label="log")
    counts_ax.set_yscale("symlog", linthresh=1.0)
    counts_ax.set_xlabel(f"failures of a node in the window (the last bar: {top} or more)")
    counts_ax.set_ylabel("nodes")
    counts_ax.set_title("Failures per node", fontsize=10)
    counts_ax.legend(fontsize=8)
    counts_ax.grid(alpha=0.3)

    days = np.linspace(0.0, check.window_h, 200)
    so_far = np.array([np.searchsorted(t, days, side="right") for t in check.model_times])
    x = days / 24.0
    time_ax.fill_between(
        x, np.quantile(so_far, 0.05, axis=0), np.quantile(so_far, 0.95, axis=0),
        color=palette.SERIES[0], alpha=0.25, label="model: 5-95% of replicas",
    )  # fmt: skip
    time_ax.plot(x, so_far.mean(axis=0), color=palette.SERIES[0], label="model: mean")
    time_ax.plot(x, np.searchsorted(check.log_times, days, side="right"), color=palette.TOTAL,
                 label="log")  # fmt: skip
    for quarter in (1, 2, 3):
        time_ax.axvline(check.window_h * quarter / 4 / 24.0, color="0.8", lw=0.8, zorder=0)
    time_ax.set_xlabel("days since the window's start (grey: its quarters)")
    time_ax.set_ylabel("failures so far")
    time_ax.set_title("Failures over the window", fontsize=10)
    time_ax.legend(fontsize=8, loc="lower right")
    time_ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def write_check_figure(
    check: Check, out: Path, write: Callable[[Path, bytes], None] | None = None
) -> Path:
    """`check.png` under `out` (written as `write_fit_figures` writes)."""
    write = write or (lambda path, data: path.write_bytes(data))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "check.png"
    write(path, _png(check_figure(check)))
    return path
