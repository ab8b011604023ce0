"""`analysis.optimize`: the direction of each metric, ties, and paired differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.decide import analysis
from sim.model.columns import unit_of

KEY = "checkpoint.interval_steps"


def table(values: dict[int, np.ndarray], metric: str) -> pd.DataFrame:
    """A replica table with one row per (swept value, replica)."""
    rows = []
    for point, (value, xs) in enumerate(values.items()):
        for replica, x in enumerate(xs):
            rows.append({"point": point, "replica": replica, KEY: value, metric: x, "error": ""})
    return pd.DataFrame(rows)


def noisy(center: float, n: int = 200, spread: float = 0.001) -> np.ndarray:
    return center + spread * np.random.default_rng(0).standard_normal(n)


def test_goodput_is_maximised_and_times_minimised():
    goodput = table({100: noisy(0.97), 1000: noisy(0.98), 20000: noisy(0.78)}, "goodput")
    best = analysis.optimize(goodput, KEY, "goodput")
    assert best.direction == "max" and best.best == 1000 and best.runner_up == 100
    assert best.difference == pytest.approx(0.01, rel=1e-6) and best.difference_ci[0] > 0
    assert list(best.points["verdict"]) == ["best", "worse", "worse"]

    days = table({100: noisy(16.5), 1000: noisy(16.3), 20000: noisy(20.0)}, "time_to_train_days")
    assert analysis.optimize(days, KEY, "time_to_train_days").best == 1000
    costs = table({100: noisy(2e6), 1000: noisy(1e6), 20000: noisy(3e6)}, "cost_usd")
    assert analysis.optimize(costs, KEY, "cost_usd").best == 1000


def test_direction_can_be_overridden_both_ways():
    t = table({1: noisy(1.0), 2: noisy(2.0)}, "failures")
    assert analysis.optimize(t, KEY, "failures").best == 1
    assert analysis.optimize(t, KEY, "failures", direction="max").best == 2
    g = table({1: noisy(0.9), 2: noisy(0.8)}, "goodput")
    assert analysis.optimize(g, KEY, "goodput", direction="min").best == 2
    with pytest.raises(ValueError, match="direction"):
        analysis.optimize(g, KEY, "goodput", direction="up")


def test_percentile_of_a_maximised_metric_pairs_the_right_tail():
    # p5 of goodput: the value whose bad tail is higher is better
    a = np.linspace(0.90, 0.99, 200)  # p5 ~0.9045
    b = np.linspace(0.85, 1.00, 200)  # higher mean, worse tail: p5 ~0.8575
    best = analysis.optimize(table({1: a, 2: b}, "goodput"), KEY, "goodput", "p5")
    assert best.best == 1 and best.difference == pytest.approx(
        np.percentile(a, 5) - np.percentile(b, 5)
    )
    assert best.difference > 0


def test_ties_name_no_single_best():
    same = noisy(16.0)
    t = table({250: same, 500: same, 1000: same + 0.5}, "time_to_train_days")
    best = analysis.optimize(t, KEY, "time_to_train_days")
    assert best.best is None and best.tied == [250, 500]
    assert list(best.points["verdict"]) == ["tied for best", "tied for best", "worse"]
    assert best.runner_up == 1000 and best.difference == pytest.approx(0.5)
    everything = analysis.optimize(table({1: same, 2: same}, "goodput"), KEY, "goodput")
    assert everything.best is None and everything.runner_up is None


def test_swept_integers_stay_integers():
    best = analysis.optimize(table({4: noisy(1.0), 8: noisy(2.0)}, "wall_hours"), KEY, "wall_hours")
    assert [type(v) for v in best.points[KEY]] == [int, int] and isinstance(best.best, int)


def test_indistinguishable_when_the_paired_interval_includes_zero():
    rng = np.random.default_rng(1)
    base = 16.0 + rng.standard_normal(50)
    t = table({1: base, 2: base + 0.01 * rng.standard_normal(50)}, "time_to_train_days")
    verdicts = list(analysis.optimize(t, KEY, "time_to_train_days").points["verdict"])
    assert verdicts == ["best", "indistinguishable"]


@pytest.mark.parametrize(
    ("metric", "unit"),
    [
        ("cost_usd", "USD"),
        ("time_to_train_days", "days"),
        ("lost_work_hours", "h"),
        ("lost_gpu_hours", "GPU-h"),
        ("checkpoint_GB_written", "GB"),
        ("storage_peak_TB", "TB"),
        ("goodput", ""),
        ("failures", ""),
    ],
)
def test_units_follow_the_metric_names(metric, unit):
    assert unit_of(metric) == unit
