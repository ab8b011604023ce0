"""The plan's figure (pareto.png) reads without a second look: the legend off the points,
the crowded region near the deadline and the front drawn large, every point of the front
named, the points at the deadline said to miss or meet it, the overrides in the title."""

from __future__ import annotations

import itertools

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.transforms import Bbox

from sim.show import palette, plan_plots

NODES, SPARES = "cluster.nodes", "cluster.spare_nodes"
DEADLINE = 16.5


def candidate(point, nodes, spares, days, cost, status, p_meet):
    return {"point": point, NODES: nodes, SPARES: spares, "replicas": 32, "status": status,
            "p_meet": p_meet, "time_to_train_days_at_quantile": days,
            "cost_usd_mean": cost}  # fmt: skip


def plan_doc() -> dict:
    """The shape of `trainsim plan` on llama70b-1k with nodes x spares: far outliers without
    spares, three points just past the deadline, the chosen point well inside it."""
    candidates = [
        candidate(0, 256, 4, 9.53, 1.134e6, "chosen", 1.0),
        candidate(1, 256, 8, 9.18, 1.145e6, "dominated", 1.0),
        candidate(2, 256, 16, 9.18, 1.180e6, "dominated", 1.0),
        candidate(3, 128, 4, 16.61, 1.040e6, "infeasible", 0.81),
        candidate(4, 128, 8, 16.61, 1.071e6, "infeasible", 0.81),
        candidate(5, 128, 16, 16.45, 1.135e6, "unproven", 0.97),
        candidate(6, 64, 4, 31.3, 1.014e6, "infeasible", 0.0),
        candidate(7, 64, 0, 74.8, 1.456e6, "infeasible", 0.0),
        candidate(8, 256, 0, 97.3, 6.663e6, "infeasible", 0.03),
    ]
    front = [candidates[i] for i in (1, 0, 3, 6)]
    return {
        "scenario": "llama70b-1k", "overrides": ["checkpoint.interval_steps=500"],
        "varied_keys": [NODES, SPARES], "objective": "cost_usd", "deadline_days": DEADLINE,
        "quantile": 0.95, "chosen": candidates[0], "candidates": candidates,
        "pareto": [{k: p[k] for k in ("point", NODES, SPARES, "time_to_train_days_at_quantile",
                                      "cost_usd_mean", "p_meet", "status")} for p in front],
    }  # fmt: skip


@pytest.fixture(scope="module")
def drawn():
    doc = plan_doc()
    fig = plan_plots.pareto_figure(doc)
    FigureCanvasAgg(fig).draw()
    return doc, fig, fig.canvas.get_renderer()


def labels(ax) -> list:
    return [t for t in ax.texts if t.get_gid() == "point-label"]


def test_the_legend_stays_off_every_panel(drawn):
    _, fig, renderer = drawn
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        overlap = Bbox.intersection(box, ax.get_window_extent(renderer))
        assert overlap is None or overlap.width * overlap.height == 0


def test_a_zoom_panel_draws_the_deadline_and_the_front_large(drawn):
    doc, fig, _ = drawn
    every, zoom = fig.axes
    (x0, x1), (y0, y1) = zoom.get_xlim(), zoom.get_ylim()
    for p in doc["pareto"]:
        assert x0 <= p["time_to_train_days_at_quantile"] <= x1
        assert y0 <= p["cost_usd_mean"] <= y1
    assert x0 < DEADLINE < x1
    assert not x0 <= 97.3 <= x1  # the far outlier only in the overview
    assert (y1 - y0) < 0.1 * (every.get_ylim()[1] - every.get_ylim()[0])
    ticks = [t.get_text() for t in zoom.get_yticklabels() if t.get_text()]
    assert len(ticks) == len(set(ticks)) > 3  # neighbouring ticks read apart
    assert all(t.startswith("$") and t.endswith("M") for t in ticks)


def test_every_point_of_the_front_is_named_the_chosen_one_says_so(drawn):
    doc, fig, _ = drawn
    zoom = fig.axes[-1]
    text = "\n".join(t.get_text() for t in labels(zoom))
    for p in doc["pareto"]:
        assert plan_plots.short_label(p, doc["varied_keys"]) in text
    assert "256/4 chosen" in text
    (x0, x1), (y0, y1) = zoom.get_xlim(), zoom.get_ylim()
    for label in labels(zoom):
        x, y = label.xy
        assert x0 <= x <= x1 and y0 <= y <= y1  # each next to a point of this panel


def test_points_at_the_deadline_say_whether_they_meet_it(drawn):
    _, fig, _ = drawn
    by_text = {t.get_text(): t for t in labels(fig.axes[-1])}
    missing = [t for text, t in by_text.items() if "128/8: P(meet) 0.81, misses" in text]
    assert len(missing) == 1
    assert to_hex(missing[0].get_color()) == palette.PLAN["infeasible"]
    meets = [text for text in by_text if "128/16: P(meet) 0.97" in text]
    assert len(meets) == 1 and "misses" not in meets[0].split("128/16")[1].split("\n")[0]
    # far from the deadline, an infeasible point off the front is not labelled
    assert not any("64/0" in text for text in by_text)


def test_the_title_names_the_overrides(drawn):
    _, fig, _ = drawn
    title = fig.get_suptitle()
    assert title.startswith("llama70b-1k  --set checkpoint.interval_steps:")
    assert f"{NODES} / {SPARES}" in title


def test_the_infeasible_marker_is_not_the_deadline_line(drawn):
    # the X of a point missing the deadline must stand out on the deadline line
    _, fig, _ = drawn
    zoom = fig.axes[-1]
    (line,) = [line for line in zoom.get_lines() if line.get_label().startswith("deadline")]
    assert to_hex(line.get_color()) != palette.PLAN["infeasible"]


def test_every_point_of_a_small_panel_is_named_and_no_labels_overlap():
    """The shape of the README's plan: 256/16, 64/8 and 64/16 were left unnamed, and
    the labels near the chosen point ran into each other."""
    doc = plan_doc()
    extra = [
        candidate(9, 64, 8, 31.3, 1.074e6, "infeasible", 0.0),
        candidate(10, 64, 16, 31.3, 1.193e6, "infeasible", 0.0),
    ]
    doc["candidates"] = doc["candidates"] + extra
    fig = plan_plots.pareto_figure(doc)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    zoom = fig.axes[-1]
    (x0, x1), (y0, y1) = zoom.get_xlim(), zoom.get_ylim()
    inside = [
        c
        for c in doc["candidates"]
        if x0 <= c["time_to_train_days_at_quantile"] <= x1 and y0 <= c["cost_usd_mean"] <= y1
    ]
    named = "\n".join(t.get_text() for t in labels(zoom))
    for c in inside:
        assert plan_plots.short_label(c, [NODES, SPARES]) in named, c
    boxes = [t.get_window_extent(renderer) for t in labels(zoom)]
    for a, b in itertools.combinations(boxes, 2):
        overlap = Bbox.intersection(a, b)
        assert overlap is None or overlap.width * overlap.height == 0, named
    assert "cost_usd" not in " ".join(t.get_text() for t in fig.legends[0].get_texts())
