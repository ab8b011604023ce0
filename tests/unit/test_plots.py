"""The figures show what they claim: every colour in a legend that stays off the data,
totals equal to the table's means, the axis scale, theory marks, the best point, the
heatmap's cells and the CDF's percentiles and counts. Small synthetic tables with the
real column names, plus one tiny real run through the library."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from sim.engine.ledger import DOWNTIME_PARTS as LEDGER_DOWNTIME_PARTS
from sim.model import columns
from sim.model.columns import better_direction
from sim.model.scenario import load_document
from sim.runs import summaries
from sim.runs.api import run_scenario
from sim.runs.montecarlo import COLUMNS
from sim.show import palette, plots
from sim.show.run_figures import FIGURE_COLUMNS, write_run_figures
from tests.conftest import TINY, merge

INTERVAL = "checkpoint.interval_steps"
SPARES = "cluster.spare_nodes"
GPUS, SPARE_GPUS, GPU_HOUR_USD = 1024, 64, 2.5


def replica_table(params: list[dict], replicas: int = 40, unfinished: int = 0) -> pd.DataFrame:
    """A replica table with every public column, one point per entry of `params`, whose
    rows satisfy the identities (wall = buckets, downtime = parts, cost = cost parts).
    The first `unfinished` replicas of each point did not finish."""
    rng = np.random.default_rng(7)
    rows = []
    for point, values in enumerate(params):
        for replica in range(replicas):
            row = {column: 0.0 for column in COLUMNS} | {
                "scenario": "synthetic",
                "point": point,
                "replica": replica,
                "seed": 1,
                "error": "",
                **values,
            }
            buckets = {
                "ideal": 384.0,
                "slowdown": 0.0,
                "lost_work": rng.exponential(2.0 + point),
                "checkpoint_stall": 4.0 / (1 + point),
            }
            parts = {
                "detect": rng.exponential(0.5),
                "node_wait": rng.exponential(3.0) * (point % 2),
                "restart": rng.exponential(1.0),
                "checkpoint_load": rng.exponential(0.1),
            }  # the other parts stay zero: nothing of the kind happened
            for part, hours in parts.items():
                row[f"{part}_hours"] = hours
            buckets["downtime"] = sum(parts.values())
            for bucket, hours in buckets.items():
                row[f"{bucket}_hours"] = hours
                row[f"cost_{bucket}_usd"] = GPUS * GPU_HOUR_USD * hours
            wall = sum(buckets.values())
            row["cost_idle_spares_usd"] = SPARE_GPUS * GPU_HOUR_USD * wall
            row["cost_usd"] = sum(row[c] for c in columns.COST_COLUMNS)
            row["wall_hours"] = wall
            row["goodput"] = buckets["ideal"] / wall
            row["finished"] = replica >= unfinished
            row["time_to_train_days"] = wall / 24.0 if row["finished"] else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def rendered(fig: Figure):
    """Lay the figure out and draw it (no file) so that extents are the final ones."""
    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def overlap_area(a: Bbox, b: Bbox) -> float:
    inter = Bbox.intersection(a, b)
    return 0.0 if inter is None else inter.width * inter.height


def one_key(values=(100, 250, 500, 1000, 2000, 4000)) -> list[dict]:
    return [{INTERVAL: v} for v in values]


def two_keys() -> list[dict]:
    return [{INTERVAL: i, SPARES: s} for i in (250, 500, 1000, 2000) for s in (0, 2, 8)]


# ---------------------------------------------------------------------------- columns


def test_shared_column_names_follow_the_engine_and_the_table():
    assert list(columns.DOWNTIME_COLUMNS) == [
        part.removesuffix("_s") + "_hours" for part in LEDGER_DOWNTIME_PARTS
    ], "sim/model/columns.py and sim/engine/ledger.py list different downtime parts"
    assert set(columns.DOWNTIME_COLUMNS) <= set(COLUMNS)
    assert set(columns.COST_COLUMNS) <= set(COLUMNS)
    assert set(FIGURE_COLUMNS) <= set(COLUMNS)
    assert {c for c, _, _ in plots.DOWNTIME_SPLIT} == set(columns.DOWNTIME_COLUMNS)
    assert [c for c, _, _ in plots.COST_BREAKDOWN] == list(columns.COST_COLUMNS)


def test_plots_do_not_import_simpy():
    code = "import sys, sim.show.plots; assert 'simpy' not in sys.modules, 'simpy imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------- bar charts

BAR_FIGURES = [plots.wall_time_breakdown, plots.downtime_split, plots.cost_breakdown]


SWEEPS = {
    "none": ([], [{}], ["synthetic"]),
    "one key": ([INTERVAL], one_key(), ["100", "250", "500", "1000", "2000", "4000"]),
    "two keys": (
        [INTERVAL, SPARES],
        two_keys(),
        [f"{i}, {s}" for i in (250, 500, 1000, 2000) for s in (0, 2, 8)],
    ),
}


@pytest.mark.parametrize("draw", BAR_FIGURES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("sweep", SWEEPS)
def test_bars_have_a_legend_off_the_axes_and_points_named_by_their_values(draw, sweep):
    keys, params, ticks = SWEEPS[sweep]
    fig = draw(replica_table(params), keys)
    renderer = rendered(fig)
    (legend,) = fig.legends
    texts = {t.get_text() for t in legend.get_texts()}
    colours = {tuple(h.get_facecolor()) for h in legend.legend_handles}
    for ax in fig.axes:
        for bars in ax.containers:  # every colour drawn is named
            assert bars.get_label() in texts
            assert tuple(bars.patches[0].get_facecolor()) in colours
        # nothing of the legend over the data, the ticks or the axis labels
        assert overlap_area(legend.get_window_extent(renderer), ax.get_tightbbox(renderer)) == 0
        # the swept values under the bars, the keys' names under them
        labels = ax.get_xticklabels()
        assert [t.get_text() for t in labels] == ticks
        assert ax.get_xlabel() == ", ".join(keys)
        boxes = [t.get_window_extent(renderer) for t in labels]
        for left, right in zip(boxes, boxes[1:], strict=False):
            if labels[0].get_rotation() == 0:  # upright: side by side, never on each other
                assert overlap_area(left, right) == 0
            else:  # turned (many points): still in order, one after the other
                assert left.x0 < right.x0 and left.x1 < right.x1


def stacked_sums(ax) -> np.ndarray:
    return np.sum([[p.get_height() for p in bars.patches] for bars in ax.containers], axis=0)


def test_cost_bars_add_up_to_the_mean_bill_which_is_printed():
    table = replica_table(one_key())
    fig = plots.cost_breakdown(table, [INTERVAL])
    whole = fig.axes[0]
    mean_cost = table.groupby("point")["cost_usd"].mean().to_numpy()
    assert stacked_sums(whole) == pytest.approx(mean_cost, rel=1e-12)
    totals = [t.get_text() for t in whole.texts if t.get_gid() == "total"]
    assert totals == [plots.usd(v) for v in mean_cost]
    # the right panel: what was paid beyond the ideal compute
    beyond = (
        table.groupby("point")["cost_usd"].mean() - table.groupby("point")["cost_ideal_usd"].mean()
    )
    assert stacked_sums(fig.axes[1]) == pytest.approx(beyond.to_numpy(), rel=1e-9)
    assert "$" in whole.yaxis.get_major_formatter()(1.2e6, 0)


def test_cost_bars_leave_out_what_no_run_paid_for_and_say_so():
    table = replica_table(one_key())  # no slowdown anywhere
    fig = plots.cost_breakdown(table, [INTERVAL])
    for ax in fig.axes:
        assert "cost_slowdown_usd" not in {bars.patches[0].get_gid() for bars in ax.containers}
    legend = fig.legends[0]
    assert "slowdown" not in {t.get_text() for t in legend.get_texts()}
    assert "slowdown" in legend.get_title().get_text()


def test_downtime_split_adds_up_and_says_which_parts_never_happened():
    table = replica_table(one_key())
    fig = plots.downtime_split(table, [INTERVAL])
    ax = fig.axes[0]
    assert stacked_sums(ax) == pytest.approx(
        table.groupby("point")["downtime_hours"].mean().to_numpy(), rel=1e-12
    )
    drawn = {bars.patches[0].get_gid() for bars in ax.containers}
    assert drawn == {"detect_hours", "node_wait_hours", "restart_hours", "checkpoint_load_hours"}
    title = fig.legends[0].get_title().get_text()
    for part in ("elastic rescale", "checkpoint tier down", "maintenance", "health checks"):
        assert part in title


# ---------------------------------------------------------------------------- sweep curves


def summary_of(means: dict[float, float], metric: str, key: str = INTERVAL) -> pd.DataFrame:
    return pd.DataFrame(
        [{key: k, "metric": metric, "mean": v, "sem": 0.01} for k, v in means.items()]
    )


@pytest.mark.parametrize(
    ("values", "scale"),
    [((100, 250, 500, 1000, 4000), "log"), ((500, 1000, 2000, 4000), "linear"),
     ((100, 900), "log"), ((100, 800), "linear")],
)  # fmt: skip
def test_log_axis_only_when_the_values_span_more_than_8x(values, scale):
    fig = plots.sweep_curve(summary_of({v: 16.0 for v in values}, "time_to_train_days"),
                            INTERVAL, "time_to_train_days")  # fmt: skip
    ax = fig.axes[0]
    assert ax.get_xscale() == scale
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(v) for v in values]


def theory_lines(fig: Figure) -> list:
    return [line for line in fig.axes[0].get_lines() if line.get_gid() == "theory"]


def legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_coinciding_young_and_daly_are_one_mark_with_its_unit():
    summary = summary_of({100: 16.5, 500: 16.3, 2000: 16.6}, "time_to_train_days")
    fig = plots.sweep_curve(
        summary, INTERVAL, "time_to_train_days", {"Young": 449.2, "Daly": 447.6}
    )
    (line,) = theory_lines(fig)
    assert line.get_xdata()[0] == pytest.approx(447.6)
    marks = [t for t in legend_texts(fig) if "Young" in t or "Daly" in t]
    assert marks == ["Young ≈ Daly: 448 steps"]

    apart = plots.sweep_curve(summary, INTERVAL, "time_to_train_days", {"Young": 450, "Daly": 380})
    assert sorted(line.get_xdata()[0] for line in theory_lines(apart)) == [380, 450]
    assert [t for t in legend_texts(apart) if "Young" in t or "Daly" in t] == [
        "Young: 450 steps",
        "Daly: 380 steps",
    ]
    minutes = plots.sweep_curve(
        summary_of({10: 1.0, 100: 2.0}, "goodput", "checkpoint.interval_minutes"),
        "checkpoint.interval_minutes", "goodput", {"Young": 42.0, "Daly": 41.5},
    )  # fmt: skip
    assert "Young ≈ Daly: 41.5 min" in legend_texts(minutes)


@pytest.mark.parametrize(
    ("metric", "best_x"), [("goodput", 1000), ("time_to_train_days", 100), ("cost_usd", 100)]
)
def test_the_best_point_follows_the_metric_direction(metric, best_x):
    summary = summary_of({100: 0.95, 1000: 0.98, 4000: 0.97}, metric)
    fig = plots.sweep_curve(summary, INTERVAL, metric)
    (star,) = [line for line in fig.axes[0].get_lines() if line.get_gid() == "best"]
    assert star.get_xdata()[0] == best_x
    word = "highest" if better_direction(metric) == "max" else "lowest"
    assert any(t.startswith(f"best ({word} mean): {best_x:,} steps") for t in legend_texts(fig))


# ---------------------------------------------------------------------------- heatmaps


@pytest.mark.parametrize("metric", ["time_to_train_days", "goodput"])
def test_heatmap_cells_say_the_means_of_the_table_and_outline_the_best(metric):
    table = replica_table(two_keys())
    summary = summaries.summarize(table, [INTERVAL, SPARES])
    fig = plots.sweep_heatmap(summary, [INTERVAL, SPARES], metric)
    rendered(fig)
    ax = fig.axes[0]
    means = table.groupby([SPARES, INTERVAL])[metric].mean().unstack(INTERVAL)
    decimals = plots.decimals_for(means.to_numpy())
    cells = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
        for t in ax.texts
        if t.get_gid() == "cell"
    }
    assert len(cells) == means.size
    for (i, j), text in cells.items():
        expected = means.iloc[i, j]
        assert text == f"{expected:.{decimals}f}"
        assert float(text) == pytest.approx(expected, abs=0.51 * 10**-decimals)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["250", "500", "1000", "2000"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "2", "8"]
    best = means.stack().idxmax() if metric == "goodput" else means.stack().idxmin()
    (outline,) = [p for p in ax.patches if p.get_gid() == "best"]
    row, column = list(means.index).index(best[0]), list(means.columns).index(best[1])
    assert outline.get_xy() == (column - 0.5, row - 0.5)
    assert f"interval_steps={best[1]}, spare_nodes={best[0]}" in ax.get_title()


# ---------------------------------------------------------------------------- CDF


def test_cdf_of_one_point_marks_p50_p95_and_counts_the_replicas():
    table = replica_table([{}], replicas=40, unfinished=3)
    fig = plots.time_to_train_cdf(table)
    ax = fig.axes[0]
    days = table["time_to_train_days"].dropna()
    for name, q in (("p50", 50), ("p95", 95)):
        (line,) = [line for line in ax.get_lines() if line.get_gid() == name]
        value = np.percentile(days, q)
        assert line.get_xdata()[0] == pytest.approx(value)
        assert f"{name} {value:.2f} d" in legend_texts(fig)
    assert "37 of 40 replicas finished" in ax.get_title()
    assert fig.axes[0].get_lines()[0].get_ydata().max() == pytest.approx(37 / 40)


def test_cdf_of_a_sweep_marks_each_point_and_counts_where_some_did_not_finish():
    table = replica_table(one_key((100, 1000, 4000)), replicas=20, unfinished=2)
    fig = plots.time_to_train_cdf(table, [INTERVAL])
    ax = fig.axes[0]
    for point, group in table.groupby("point"):
        days = group["time_to_train_days"].dropna()
        for name, q in (("p50", 50), ("p95", 95)):
            (mark,) = [line for line in ax.get_lines() if line.get_gid() == f"{name}:{point}"]
            assert mark.get_xdata()[0] == pytest.approx(np.percentile(days, q))
    assert "54 of 60 replicas finished over 3 points" in ax.get_title()
    assert "interval_steps=1000 (18/20 finished)" in legend_texts(fig)
    assert {"p50 (of finished)", "p95 (of finished)"} <= set(legend_texts(fig))


def test_cdf_when_no_replica_finished_says_so():
    table = replica_table([{}], replicas=5, unfinished=5)
    fig = plots.time_to_train_cdf(table)
    ax = fig.axes[0]
    assert "0 of 5 replicas finished" in ax.get_title()
    assert any("none of the 5 replicas finished" in t.get_text() for t in ax.texts)


# ---------------------------------------------------------------------------- a run's set


def test_write_figures_picks_curves_for_one_key_and_heatmaps_for_two(tmp_path, monkeypatch):
    # which figures, not their pixels (the other tests draw them): saving is the slow part
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **_: Path(path).write_bytes(b""))
    base = {"time_to_train_cdf.png", "lost_work.png", "wall_time_breakdown.png",
            "downtime_split.png", "cost_breakdown.png"}  # fmt: skip
    for keys, params, extra in [
        ([], [{}], set()),
        ([INTERVAL], one_key(), {f"sweep_{m}.png" for m in plots.SWEEP_METRICS}),
        ([INTERVAL, SPARES], two_keys(), {f"heatmap_{m}.png" for m in plots.HEATMAP_METRICS}),
    ]:
        table = replica_table(params, replicas=10)
        out = tmp_path / f"keys{len(keys)}"
        paths = plots.write_figures(table, summaries.summarize(table, keys), out, keys)
        assert {p.name for p in paths} == base | extra
        assert {p.name for p in out.iterdir()} == base | extra


def test_write_figures_skips_the_breakdowns_an_older_table_lacks(tmp_path):
    table = replica_table([{}], replicas=5)
    older = table.drop(columns=[*columns.DOWNTIME_COLUMNS, *columns.COST_COLUMNS])
    paths = plots.write_figures(older, summaries.summarize(table), tmp_path, [])
    assert {p.name for p in paths} == {
        "time_to_train_cdf.png",
        "lost_work.png",
        "wall_time_breakdown.png",
    }


def test_a_real_two_key_sweep_writes_its_heatmaps(tmp_path, monkeypatch):
    # the run reads only FIGURE_COLUMNS from its table: enough for every figure it names
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **_: Path(path).write_bytes(b""))
    document = merge(
        TINY,
        {
            # a failure or two per run; without a spare the job waits for the repaired node
            "failures": [{"name": "node", "scope": "node", "mtbf_hours": 1.0,
                          "detect_minutes": 1, "replace": True, "repair_hours": 0.2}],
            "recovery": {"restart_minutes": 1},
        },
    )  # fmt: skip
    scenario_set = load_document(document, "tiny", params=[f"{INTERVAL}=50,200", f"{SPARES}=0,1"])
    outcome = run_scenario(
        scenario_set, replicas=6, workers=1, executor="serial", out=tmp_path, progress=False,
        figures=write_run_figures,
    )  # fmt: skip
    figures = {p.name for p in (outcome.run_dir / "figures").iterdir()}
    assert {"heatmap_time_to_train_days.png", "downtime_split.png", "cost_breakdown.png"} <= figures
    table = pd.read_parquet(outcome.run_dir / "replicas.parquet")
    fig = plots.sweep_heatmap(outcome.summary, [INTERVAL, SPARES], "cost_usd")
    means = table.groupby([SPARES, INTERVAL])["cost_usd"].mean().unstack(INTERVAL)
    cells = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
        for t in fig.axes[0].texts
        if t.get_gid() == "cell"
    }
    assert cells == {(i, j): plots.usd(v) for (i, j), v in np.ndenumerate(means.to_numpy())}


# ---------------------------------------------------------------------------- one palette


def _bar_colours(fig: Figure) -> dict[str, set[str]]:
    """Column (a bar's gid) -> the hex colours its bars have, over every axes of a figure."""
    found: dict[str, set[str]] = {}
    for ax in fig.axes:
        for bars in ax.containers:
            for patch in bars.patches:
                found.setdefault(patch.get_gid(), set()).add(to_hex(patch.get_facecolor()))
    return found


def _bucket_of(column: str) -> str:
    return column.removeprefix("cost_").removesuffix("_usd").removesuffix("_hours")


def test_every_figure_draws_a_bucket_in_the_palette_colour_and_the_same_across_figures():
    table = replica_table(one_key((250, 1000)))
    sized = replica_table([{"cluster.nodes": 64}, {"cluster.nodes": 128}])
    sized.loc[sized["point"] == 1, "ideal_hours"] = 192.0  # twice the nodes: half the ideal
    figures = {
        "wall": plots.wall_time_breakdown(table, [INTERVAL]),
        "wall, ideal differs": plots.wall_time_breakdown(sized, ["cluster.nodes"]),
        "cost": plots.cost_breakdown(table, [INTERVAL]),
        "downtime": plots.downtime_split(table, [INTERVAL]),
    }
    seen: dict[str, dict[str, set[str]]] = {}  # bucket or part -> figure -> colours
    for name, fig in figures.items():
        for column, colours in _bar_colours(fig).items():
            seen.setdefault(_bucket_of(column), {})[name] = colours
    for bucket in [*columns.TIME_BUCKETS, "idle_spares"]:
        if not table[f"cost_{bucket}_usd"].any():  # zero in every run: no figure draws it
            assert bucket not in seen, bucket
            continue
        assert bucket in seen, f"no figure draws {bucket}"
        for name, colours in seen[bucket].items():
            assert colours == {palette.bucket_colour(bucket)}, (bucket, name, colours)
    assert set(seen["lost_work"]) == {"wall", "wall, ideal differs", "cost"}
    assert seen["ideal"].keys() == {"wall, ideal differs", "cost"}
    for part in ("detect", "node_wait", "restart", "checkpoint_load"):
        assert seen[part] == {"downtime": {palette.downtime_colour(part)}}
    # a curve of a bucket's metric is drawn in the bucket's colour
    summary = summary_of({250: 1.0, 1000: 3.0}, "lost_work_hours")
    curve = plots.sweep_curve(summary, INTERVAL, "lost_work_hours").axes[0]
    (mean,) = [line for line in curve.get_lines() if line.get_label() == "mean"]
    assert to_hex(mean.get_color()) == palette.bucket_colour("lost_work")


def _lab(colour: str) -> np.ndarray:
    """CIE L*a*b* (D65) of an sRGB colour: distances in it follow what the eye tells apart."""
    rgb = np.array(to_rgb(colour))
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ rgb / np.array([0.95047, 1.0, 1.08883])  # fmt: skip
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_no_two_buckets_or_downtime_parts_share_a_colour():
    # a colour names one thing: no downtime part looks like a bucket (orange was slowdown in
    # one figure and waiting for nodes in another), and every part is named
    assert set(palette.DOWNTIME) == set(columns.DOWNTIME_PARTS)
    assert set(palette.BUCKETS) == {*columns.TIME_BUCKETS, "idle_spares"}
    named = {**{k: c for k, (_, c) in palette.BUCKETS.items()},
             **{k: c for k, (_, c) in palette.DOWNTIME.items()}}  # fmt: skip
    for (a, colour_a), (b, colour_b) in itertools.combinations(named.items(), 2):
        distance = float(np.linalg.norm(_lab(colour_a) - _lab(colour_b)))
        assert distance > 15, f"{a} and {b} look alike ({colour_a}, {colour_b}: ΔE {distance:.0f})"
    # ... and a part is never a shade of a bucket: another hue, or clearly lighter or darker
    # (the old tab20 parts had the buckets' hues: orange, red, blue, purple at their lightness)
    for part, (_, colour) in palette.DOWNTIME.items():
        for bucket, (_, bucket_colour) in palette.BUCKETS.items():
            (l1, a1, b1), (l2, a2, b2) = _lab(colour), _lab(bucket_colour)
            if min(np.hypot(a1, b1), np.hypot(a2, b2)) < 15:
                continue  # a grey has no hue to share
            hue = abs(np.degrees(np.arctan2(b1, a1) - np.arctan2(b2, a2))) % 360
            assert min(hue, 360 - hue) >= 20 or abs(l1 - l2) >= 20, (part, bucket)


# ---------------------------------------------------------------------------- wall time


def test_wall_time_shows_the_hours_beyond_ideal_from_zero_and_prints_the_wall_time():
    table = replica_table(one_key((250, 1000, 4000)))
    fig = plots.wall_time_breakdown(table, [INTERVAL])
    rendered(fig)
    (ax,) = fig.axes  # every point has the same ideal: one panel, the overheads
    means = table.groupby("point")[["wall_hours", "ideal_hours"]].mean()
    beyond = (means["wall_hours"] - means["ideal_hours"]).to_numpy()
    assert stacked_sums(ax) == pytest.approx(beyond, rel=1e-9)
    assert ax.get_ylim()[0] == 0  # from zero: heights compare
    assert "ideal_hours" not in {bars.patches[0].get_gid() for bars in ax.containers}
    assert "ideal compute (16.00 days at every point)" in ax.get_title()
    over, days = plots.decimals_for(beyond, 3), plots.decimals_for(means["wall_hours"] / 24)
    totals = [t.get_text() for t in ax.texts if t.get_gid() == "total"]
    assert totals == [
        f"+{h:.{over}f} h\n= {w / 24:.{days}f} d" for h, w in zip(beyond, means["wall_hours"])
    ]


def test_wall_time_draws_the_whole_from_zero_when_the_ideal_differs_by_point():
    table = replica_table([{"cluster.nodes": 64}, {"cluster.nodes": 128}])
    half = table["point"] == 1
    table.loc[half, "ideal_hours"] = 192.0
    table.loc[half, "wall_hours"] -= 192.0
    whole, beyond = plots.wall_time_breakdown(table, ["cluster.nodes"]).axes
    days = table.groupby("point")["wall_hours"].mean().to_numpy() / 24
    assert stacked_sums(whole) == pytest.approx(days, rel=1e-9)
    assert whole.get_ylim()[0] == 0 and "ideal differs" in whole.get_title()
    assert len(stacked_sums(beyond)) == 2


# ---------------------------------------------------------------------------- labels


def test_run_label_names_the_overrides_and_the_keys_swept_with_one_value():
    label = plots.run_label(
        "llama70b-1k",
        ["cluster.spare_nodes=0", "checkpoint.mode=async"],
        {"cluster.spare_nodes": [0], "checkpoint.keep_last": [2], INTERVAL: [250, 500]},
    )
    assert label == (  # the overrides' keys: a value may be a whole YAML document
        "llama70b-1k  --set cluster.spare_nodes  --set checkpoint.mode  checkpoint.keep_last=2"
    )
    assert plots.run_label("llama70b-1k") == "llama70b-1k"


def test_a_runs_figures_say_what_was_overridden(tmp_path, monkeypatch):
    """Through the library, as `trainsim run --set` does: the overrides reach run.json and
    head every figure; without a sweep they also name the point."""
    drawn: dict[str, Figure] = {}

    def keep(fig, path, **_):
        drawn[Path(path).name] = fig
        Path(path).write_bytes(b"")

    monkeypatch.setattr(Figure, "savefig", keep)
    document = merge(TINY, {"failures": [{"name": "node", "scope": "node", "mtbf_hours": 1.0,
                                          "detect_minutes": 1, "repair_hours": 0.2}]})  # fmt: skip
    scenario_set = load_document(document, "tiny", overrides=[f"{SPARES}=0"])
    outcome = run_scenario(
        scenario_set, replicas=4, workers=1, executor="serial", out=tmp_path, progress=False,
        figures=write_run_figures,
    )  # fmt: skip
    manifest = json.loads((outcome.run_dir / "run.json").read_text())
    assert manifest["overrides"] == [f"{SPARES}=0"]
    label = f"{scenario_set.name}  --set {SPARES}"
    assert {"time_to_train_cdf.png", "wall_time_breakdown.png", "downtime_split.png"} <= set(drawn)
    for name, fig in drawn.items():
        assert fig.get_suptitle() == label, name
    assert label in legend_texts(drawn["time_to_train_cdf.png"])
    ticks = drawn["wall_time_breakdown.png"].axes[0].get_xticklabels()
    assert [t.get_text() for t in ticks] == [label]


# ---------------------------------------------------------------------------- issue 27 §4


def test_a_metric_no_sweep_is_chosen_on_has_no_best_star():
    """The shortest checkpoint interval always loses the least work: no 'best' there."""
    summary = summary_of({100: 0.5, 1000: 2.0, 4000: 6.0}, "lost_work_hours")
    fig = plots.sweep_curve(summary, INTERVAL, "lost_work_hours")
    assert not [line for line in fig.axes[0].get_lines() if line.get_gid() == "best"]
    assert not any(t.startswith("best") for t in legend_texts(fig))


def far_ideal_table(ideal_hours: float) -> pd.DataFrame:
    """One point whose replicas finish between 150 and 152 days (a 405B-like run)."""
    table = replica_table([{}], replicas=40)
    days = np.linspace(150.0, 152.0, len(table))
    table["time_to_train_days"] = days
    table["wall_hours"] = days * 24.0
    table["ideal_hours"] = ideal_hours
    return table


def test_cdf_names_a_far_ideal_at_the_edge_instead_of_squeezing_the_curve():
    fig = plots.time_to_train_cdf(far_ideal_table(146.6 * 24.0))
    rendered(fig)
    ax = fig.axes[0]
    left, right = ax.get_xlim()
    assert 149.0 < left < 150.0 and 152.0 < right < 153.0  # the curve fills the axis
    assert not [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    (note,) = [t for t in ax.texts if t.get_gid() == "ideal-far"]
    assert "ideal 146.60 d" in note.get_text()


def test_cdf_draws_a_near_ideal_off_the_left_spine():
    fig = plots.time_to_train_cdf(far_ideal_table(149.0 * 24.0))
    ax = fig.axes[0]
    (ideal,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert ideal.get_xdata()[0] == pytest.approx(149.0)
    left, right = ax.get_xlim()
    assert left < 149.0 - 0.02 * (right - left)  # visibly inside the axes, not on its edge
    assert not [t for t in ax.texts if t.get_gid() == "ideal-far"]


def test_wall_time_leaves_out_parts_that_are_zero_everywhere_and_reads_days_from_a_day():
    table = replica_table(one_key((250, 1000)))
    assert (table["slowdown_hours"] == 0).all()
    fig = plots.wall_time_breakdown(table, [INTERVAL])
    (ax,) = fig.axes
    assert "slowdown_hours" not in {bars.patches[0].get_gid() for bars in ax.containers}
    assert "slowdown" not in legend_texts(fig)
    assert ax.get_ylabel().endswith("(hours)")  # ~10 h beyond the ideal
    long = table.assign(downtime_hours=table["downtime_hours"] + 900.0)
    long["wall_hours"] += 900.0
    fig = plots.wall_time_breakdown(long, [INTERVAL])
    (ax,) = fig.axes
    assert ax.get_ylabel().endswith("(days)")
    beyond = (long.groupby("point")["wall_hours"].mean() - 384.0).to_numpy() / 24.0
    assert stacked_sums(ax) == pytest.approx(beyond, rel=1e-9)
    totals = [t.get_text() for t in ax.texts if t.get_gid() == "total"]
    assert all(t.startswith("+") and t.split("\n")[0].endswith(" d") for t in totals)
