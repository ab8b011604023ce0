"""Figures that say what they leave out and keep their notes off the data: a histogram
whose far tail would squeeze the rest stops short of it and counts what lies beyond; the fit's
censoring note sits in a legend under the axes, never over the curves; a bucket that is
zero everywhere is left out of the bars and named in the legend's title; the checkpoint
trade-off draws the stall, the lost work, their sum and the cost against the interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from sim.data import fit, logs
from sim.show import palette, plots
from sim.show.fit_plots import draw_lifetimes, lifetime_figure
from tests.conftest import ROOT

INTERVAL = "checkpoint.interval_steps"


def rendered(fig: Figure):
    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def overlap_area(a: Bbox, b: Bbox) -> float:
    inter = Bbox.intersection(a, b)
    return 0.0 if inter is None else inter.width * inter.height


def bar_total(ax) -> float:
    return sum(p.get_height() for p in ax.patches)


# ---------------------------------------------------------------------------- histograms


def test_a_far_tail_is_cut_off_the_axis_and_counted_beside_it():
    rng = np.random.default_rng(3)
    alone = rng.normal(24.0, 2.0, 60)
    with_log = np.append(rng.normal(45.0, 12.0, 59), 215.0)  # the forecast's one far replica
    fig = Figure(layout="constrained")
    ax = fig.add_subplot()
    edge = plots.draw_histograms(
        ax, [("scenario alone", alone, palette.SERIES[0]), ("log", with_log, palette.SERIES[1])],
        start=10.0,
    )  # fmt: skip
    assert edge is not None and edge < 215.0 and ax.get_xlim()[1] == pytest.approx(edge)
    assert ax.get_xlim()[0] == 10.0
    assert edge >= max(alone.max(), np.sort(with_log)[-2])  # everything else is drawn
    (note,) = [t for t in ax.texts if t.get_gid() == "beyond"]
    assert note.get_text() == "1 replica at 215 d →"
    assert note.get_color() == palette.SERIES[1]  # in the colour of its series
    assert bar_total(ax) == len(alone) + len(with_log) - 1  # none dropped unsaid


def test_several_far_values_are_counted_with_their_range_and_no_tail_cuts_nothing():
    values = np.concatenate([np.linspace(20.0, 30.0, 50), [300.0, 420.0]])
    fig = Figure()
    ax = fig.add_subplot()
    plots.draw_histograms(ax, [("runs", values, palette.SERIES[0])], what="run")
    (note,) = [t for t in ax.texts if t.get_gid() == "beyond"]
    assert note.get_text() == "2 runs at 300–420 d →"
    fig = Figure()
    ax = fig.add_subplot()
    spread = np.linspace(20.0, 60.0, 40)
    assert plots.draw_histograms(ax, [("runs", spread, palette.SERIES[0])]) is None
    assert not ax.texts and ax.get_xlim()[1] >= spread.max()
    assert bar_total(ax) == len(spread)


def test_one_series_wide_spread_is_not_another_series_outlier():
    """A tight series beside a wide one: the wide one's values are within its own fence,
    drawn, though far beyond the tight one's."""
    tight = np.linspace(20.0, 22.0, 50)
    wide = np.linspace(20.0, 130.0, 50)
    fig = Figure()
    ax = fig.add_subplot()
    series = [("tight", tight, palette.SERIES[0]), ("wide", wide, palette.SERIES[1])]
    assert plots.draw_histograms(ax, series) is None
    assert bar_total(ax) == 100 and not ax.texts


# ---------------------------------------------------------------------------- the fit's figure


@pytest.fixture(scope="module")
def fitted_classes():
    log = logs.read_log(ROOT / "examples" / "incidents.csv", nodes=64, gpus_per_node=8,
                        start="2026-03-01T00:00:00Z", end="2026-04-30T00:00:00Z")  # fmt: skip
    return {c.name: c for c in fit.fit_log(log, seed=0).classes}


@pytest.mark.parametrize("name", ["host", "gpu_xid"])
def test_the_censoring_note_is_in_the_legend_under_the_axes(fitted_classes, name):
    figures = [lifetime_figure(fitted_classes[name])]
    notebook = Figure(figsize=(13, 4.2), layout="constrained")  # the notebook's two panels
    for ax, other in zip(notebook.subplots(1, 2), ["host", "gpu_xid"], strict=True):
        draw_lifetimes(fitted_classes[other], ax)
    figures.append(notebook)
    for fig in figures:
        renderer = rendered(fig)
        for ax in fig.axes:
            assert not ax.texts  # no note over the curves
            legend = ax.get_legend()
            texts = [t.get_text() for t in legend.get_texts()]
            assert any("censored" in t for t in texts), texts
            box = legend.get_window_extent(renderer)
            assert overlap_area(box, ax.get_window_extent(renderer)) == 0  # off the data
            assert overlap_area(box, ax.xaxis.label.get_window_extent(renderer)) == 0
            assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)


# ---------------------------------------------------------------------------- zero buckets


def test_a_bucket_zero_everywhere_is_left_out_and_named_in_the_legend_title():
    rows = []
    for point, interval in enumerate((250, 1000)):
        for replica in range(3):
            rows.append({"point": point, "replica": replica, INTERVAL: interval,
                         "ideal_hours": 100.0, "slowdown_hours": 0.0,
                         "lost_work_hours": 1.0 + point, "checkpoint_stall_hours": 2.0 - point,
                         "downtime_hours": 3.0})  # fmt: skip
    fig = plots.wall_time_breakdown(pd.DataFrame(rows), [INTERVAL])
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert "slowdown" not in labels and {"lost work", "checkpoint stall", "downtime"} <= set(labels)
    assert legend.get_title().get_text() == "none in this run: slowdown"


# ---------------------------------------------------------------------------- the trade-off


def tradeoff_summary() -> pd.DataFrame:
    intervals = [100, 250, 450, 1000, 2000, 4000]
    stall = [9.1, 3.6, 2.0, 0.9, 0.45, 0.23]
    lost = [0.5, 1.2, 2.1, 4.8, 9.7, 19.4]
    cost = [1.080e6, 1.067e6, 1.065e6, 1.070e6, 1.082e6, 1.108e6]
    rows = []
    for metric, means in (("checkpoint_stall_hours", stall), ("lost_work_hours", lost),
                          ("cost_usd", cost)):  # fmt: skip
        rows += [{INTERVAL: i, "metric": metric, "mean": m, "sem": 0.01 * m}
                 for i, m in zip(intervals, means, strict=True)]  # fmt: skip
    return pd.DataFrame(rows)


def test_the_checkpoint_tradeoff_draws_stall_lost_work_their_sum_and_the_cost():
    summary = tradeoff_summary()
    fig = plots.checkpoint_tradeoff(summary, INTERVAL, {"Young": 440.0, "Daly": 448.0})
    hours_ax, cost_ax = fig.axes
    lines = {line.get_label(): line for line in hours_ax.get_lines()}
    stall = summary[summary.metric == "checkpoint_stall_hours"]["mean"].to_numpy()
    lost = summary[summary.metric == "lost_work_hours"]["mean"].to_numpy()
    assert list(lines["checkpoint stall"].get_ydata()) == pytest.approx(stall)
    assert list(lines["lost work"].get_ydata()) == pytest.approx(lost)
    assert list(lines["checkpoint stall + lost work"].get_ydata()) == pytest.approx(stall + lost)
    assert lines["checkpoint stall"].get_color() == palette.bucket_colour("checkpoint_stall")
    assert lines["lost work"].get_color() == palette.bucket_colour("lost_work")
    assert hours_ax.get_ylim()[0] == 0
    (best,) = [line for line in cost_ax.get_lines() if line.get_gid() == "best"]
    assert best.get_xdata()[0] == 450 and best.get_ydata()[0] == pytest.approx(1.065e6)
    for ax in (hours_ax, cost_ax):  # Young and Daly within 5%: one mark, on both panels
        assert len([line for line in ax.get_lines() if line.get_gid() == "theory"]) == 1
        assert ax.get_xscale() == "log"
    (legend,) = fig.legends
    renderer = rendered(fig)
    for ax in fig.axes:
        assert overlap_area(legend.get_window_extent(renderer), ax.get_tightbbox(renderer)) == 0
