"""The planner's racing logic on synthetic data: the Wilson interval, the elimination rule
(`judge`), the rounds (`race` with a fake evaluator), the Pareto front and the outcome."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sim.decide import plan_outcome, planner, racing
from sim.decide.racing import Sample, judge, race, wilson_interval
from sim.model.scenario_set import ScenarioError

Z = racing.Z95


def sample(met, objective, replicas=None) -> Sample:
    met = np.asarray(met, dtype=bool)
    ids = np.arange(met.size) if replicas is None else np.asarray(replicas)
    return Sample(ids, met, np.asarray(objective, dtype=float))


def noise(n: int, scale: float, seed: int = 0) -> np.ndarray:
    return scale * np.random.default_rng(seed).standard_normal(n)


# --------------------------------------------------------------------------- Wilson


def test_wilson_interval_closed_forms_and_symmetry():
    # no success: [0, z²/(n+z²)]; every trial a success: [n/(n+z²), 1]
    assert wilson_interval(0, 32) == pytest.approx((0.0, Z**2 / (32 + Z**2)))
    assert wilson_interval(32, 32) == pytest.approx((32 / (32 + Z**2), 1.0))
    for k in range(0, 41, 5):
        low, high = wilson_interval(k, 40)
        assert 0 <= low <= k / 40 <= high <= 1
        mirror = wilson_interval(40 - k, 40)
        assert (low, high) == pytest.approx((1 - mirror[1], 1 - mirror[0]))
    assert wilson_interval(0, 0) == (0.0, 1.0)
    # a textbook value (Newcombe 1998, 81 of 263): 0.2553 to 0.3662
    assert wilson_interval(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)


def test_the_interval_narrows_with_replicas():
    widths = [np.subtract(*wilson_interval(int(0.97 * n), n)[::-1]) for n in (32, 128, 512)]
    assert widths[0] > widths[1] > widths[2]


# --------------------------------------------------------------------------- judge

N = 200


def test_a_point_whose_upper_bound_is_below_the_quantile_is_infeasible():
    samples = {
        0: sample(np.arange(N) < 100, 100 + noise(N, 1)),  # P(meet) 0.5
        1: sample(np.ones(N), 120 + noise(N, 1)),  # P(meet) 1
    }
    verdict = judge(samples, quantile=0.95, direction="min")
    assert verdict.infeasible == {0} and verdict.incumbent == 1
    assert verdict.dominated == frozenset()  # an infeasible point is out, not dominated


def test_dominance_needs_a_clearly_feasible_incumbent():
    worse = 110 + noise(N, 1)
    # 0.955 is above the quantile but its lower bound is not: no incumbent, nobody dominated
    borderline = {
        0: sample(np.arange(N) < 191, 100 + noise(N, 1)),
        1: sample(np.arange(N) < 191, worse),
    }
    verdict = judge(borderline, quantile=0.95, direction="min")
    assert verdict.incumbent is None and not verdict.dominated and not verdict.infeasible
    assert not verdict.settled
    clear = {0: sample(np.ones(N), 100 + noise(N, 1)), 1: sample(np.ones(N), worse)}
    verdict = judge(clear, quantile=0.95, direction="min")
    assert verdict.incumbent == 0 and verdict.dominated == {1} and verdict.settled


def test_pairing_by_replica_finds_a_small_difference_under_large_noise():
    shared = 1e6 + noise(N, 5e4)  # common random numbers: the same noise at both points
    samples = {
        0: sample(np.ones(N), shared),
        1: sample(np.ones(N), shared + 500 + noise(N, 10, seed=1)),
    }
    # unpaired, the two 95% intervals overlap almost entirely ...
    low0, high0 = samples[0].objective_ci()
    low1, high1 = samples[1].objective_ci()
    assert low1 < high0 and low0 < high1
    # ... paired, the difference is clear
    difference, low, high = racing.paired_difference(samples[1], samples[0], "min")
    assert difference == pytest.approx(500, abs=5) and low > 0
    assert judge(samples, 0.95, "min").dominated == {1}


def test_pairs_only_common_replicas():
    a = sample(np.ones(4), [10.0, 20.0, 30.0, 40.0], replicas=[0, 1, 2, 3])
    b = sample(np.ones(3), [12.0, 22.0, 99.0], replicas=[0, 1, 5])
    difference, low, high = racing.paired_difference(b, a, "min")
    assert difference == 2.0 and low == high == 2.0  # replicas 0 and 1 only


def test_a_better_point_of_undecided_feasibility_keeps_the_race_open():
    samples = {
        0: sample(np.ones(N), 100 + noise(N, 1)),  # clearly feasible
        1: sample(np.arange(N) < 191, 90 + noise(N, 1)),  # cheaper, P(meet) 0.955: undecided
    }
    verdict = judge(samples, 0.95, "min")
    assert verdict.incumbent == 0 and not verdict.dominated and not verdict.settled


def test_settled_when_the_rest_is_within_the_precision():
    base = 1000 + noise(N, 10)
    samples = {0: sample(np.ones(N), base), 1: sample(np.ones(N), base + noise(N, 0.01, seed=2))}
    assert judge(samples, 0.95, "min", precision=1e-3).settled  # within ±$1 of 1000
    samples[1] = sample(np.ones(N), base + noise(N, 20, seed=2))
    assert not judge(samples, 0.95, "min", precision=1e-3).settled


def test_goodput_is_maximised():
    samples = {
        0: sample(np.ones(N), 0.90 + noise(N, 0.001)),
        1: sample(np.ones(N), 0.95 + noise(N, 0.001, seed=1)),
    }
    verdict = judge(samples, 0.95, "max")
    assert verdict.incumbent == 1 and verdict.dominated == {0}


# --------------------------------------------------------------------------- race


class Fake:
    """A fake Monte Carlo: point p meets the deadline with probability P[p] and costs
    COST[p] plus noise shared by replica id (common random numbers)."""

    P = {0: 0.0, 1: 0.6, 2: 1.0, 3: 1.0, 4: 1.0}
    COST = {0: 80.0, 1: 90.0, 2: 100.0, 3: 103.0, 4: 130.0}

    def __init__(self):
        self.calls: list[tuple[list[int], int, int]] = []

    def __call__(self, points: list[int], start: int, stop: int) -> pd.DataFrame:
        self.calls.append((list(points), start, stop))
        rows = []
        for replica in range(start, stop):
            rng = np.random.default_rng(replica)  # the same draws at every point
            u, shared = rng.random(), rng.normal(0, 10)
            for point in points:
                days = 10.0 if u < self.P[point] else 30.0
                rows.append(
                    {
                        "point": point,
                        "replica": replica,
                        "error": "",
                        "finished": True,
                        "time_to_train_days": days,
                        "cost_usd": self.COST[point] + shared + 0.1 * point * u,
                    }
                )
        return pd.DataFrame(rows)


def test_the_race_drops_the_infeasible_early_and_keeps_the_cheapest_feasible():
    fake = Fake()
    result = race(range(5), fake, 20.0, 0.95, "cost_usd", "min", first=16, most=256)
    # replica ranges are contiguous and every round asks only for points still in the race
    assert [(start, stop) for _, start, stop in fake.calls][:3] == [(0, 16), (16, 32), (32, 64)]
    assert fake.calls[0][0] == [0, 1, 2, 3, 4]
    assert result.dropped[0] == ("infeasible", 1)  # P(meet) 0: out after the first batch
    assert result.dropped[1][0] == "infeasible"
    assert result.dropped[3][0] == "dominated" and result.dropped[4][0] == "dominated"
    assert result.active == [2] and result.stop_reason == "one point is left"
    later = [points for points, start, _ in fake.calls if start > 0]
    assert all(0 not in points for points in later)
    counts = result.rows.groupby("point")["replica"].nunique()
    assert counts[0] == 16 and counts[2] > counts[0] and counts[2] <= 256
    assert counts.sum() == len(result.rows)


def test_the_race_stops_at_the_replica_budget():
    fake = Fake()
    fake.P = {p: 0.95 for p in range(5)}  # never decided: the budget stops it
    result = race(range(5), fake, 20.0, 0.95, "cost_usd", "min", first=8, most=40)
    assert [stop for _, _, stop in fake.calls] == [8, 16, 32, 40]
    assert "most replicas" in result.stop_reason


def test_a_round_where_every_replica_raised_is_an_error():
    def broken(points, start, stop):
        return pd.DataFrame(
            {"point": points, "replica": start, "error": "boom", "finished": False,
             "time_to_train_days": math.nan, "cost_usd": math.nan}
        )  # fmt: skip

    with pytest.raises(RuntimeError, match="every replica of round 1 raised.*boom"):
        race([0, 1], broken, 20.0, 0.95, "cost_usd", "min", first=4, most=8)


# --------------------------------------------------------------------------- outcome


def record(point: int, days: float, cost: float, status: str = "feasible") -> dict:
    return {
        "point": point,
        "k": point,
        "time_to_train_days_at_quantile": days,
        "cost_usd_mean": cost,
        "p_meet": 1.0,
        "status": status,
    }


def test_the_pareto_front_keeps_exactly_the_points_nothing_beats():
    records = [
        record(0, 10, 300),
        record(1, 12, 200),
        record(2, 12, 250),  # beaten by 1
        record(3, 15, 100),
        record(4, 16, 100),  # beaten by 3 (same cost, slower)
        record(5, 9, 400),
        record(6, math.inf, 50),  # never reaches the quantile: not on the front
    ]
    front = plan_outcome.pareto_front(records, ["k"])
    assert [p["point"] for p in front] == [5, 0, 1, 3]
    assert [p["k"] for p in front] == [5, 0, 1, 3]


def test_vary_items_are_checked_for_their_shape():
    assert planner.parse_vary("s.yaml", ["cluster.nodes=1,2"]) == ["cluster.nodes=1,2"]
    for items, named in [
        (["cluster.nodes"], "cluster.nodes"),
        (["cluster.nodes=1,,2"], "cluster.nodes"),
        (["cluster.nodes=1", "cluster.nodes=2"], "cluster.nodes"),
        (["=1,2"], "=1,2"),
    ]:
        with pytest.raises(ScenarioError) as caught:
            planner.parse_vary("s.yaml", items)
        assert named in str(caught.value) and "--vary" in str(caught.value)
