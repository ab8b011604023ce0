"""The race that finds a plan, pure of how replicas are run.

Every point starts with a small batch of replicas; round by round the batch doubles for the
points still in the race. A point leaves it when it is clearly infeasible (the upper 95%
Wilson bound of its P(meet) is below the quantile) or clearly dominated (its paired
difference to the best clearly feasible point has a 95% CI above zero). Replica r is the
same at every point (common random numbers), which is what makes paired differences tight.
`judge` is the elimination rule as a pure function; `race` runs the rounds on any evaluator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.decide import analysis

FIRST_REPLICAS = 32  # every point's first batch
MAX_REPLICAS = 512  # a point never gets more
PRECISION = 0.001  # points within ±0.1% of the incumbent's objective are as good as tied
Z95 = 1.959963984540054  # two-sided 95%: each bound alone is one-sided 97.5%


# --------------------------------------------------------------------------- statistics


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (0, 1 when there is no trial). Unlike
    the normal interval it stays inside [0, 1] and is not empty when every trial succeeds."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


@dataclass(frozen=True)
class Sample:
    """The replicas of one point run so far (error rows left out), in replica order."""

    replicas: np.ndarray  # replica ids, ascending
    met: np.ndarray  # bool: finished within the deadline
    objective: np.ndarray  # float; NaN where a replica has no value (time of an unfinished one)

    @property
    def n(self) -> int:
        return int(self.replicas.size)

    @property
    def p_meet(self) -> float:
        return float(self.met.mean()) if self.n else math.nan

    def p_meet_interval(self, z: float = Z95) -> tuple[float, float]:
        return wilson_interval(int(self.met.sum()), self.n, z)

    @property
    def objective_mean(self) -> float:
        values = self.objective[np.isfinite(self.objective)]
        return float(values.mean()) if values.size else math.nan

    def objective_ci(self) -> tuple[float, float]:
        """95% t interval of the objective's mean (NaN with fewer than two values)."""
        values = self.objective[np.isfinite(self.objective)]
        if values.size < 2:
            return math.nan, math.nan
        mean = float(values.mean())
        t = analysis.student_t_quantile(0.975, values.size - 1)
        half = t * float(values.std(ddof=1)) / math.sqrt(values.size)
        return mean - half, mean + half


def samples_of(table: pd.DataFrame, deadline_days: float, objective: str) -> dict[int, Sample]:
    """One Sample per point of a replica table (columns: point, replica, error, finished,
    time_to_train_days and the objective). Unfinished replicas miss the deadline."""
    ok = table[table["error"] == ""] if "error" in table else table
    samples = {}
    for point, rows in ok.groupby("point", sort=True):
        rows = rows.sort_values("replica")
        days = rows["time_to_train_days"].to_numpy(dtype=float, na_value=np.nan)
        met = rows["finished"].to_numpy(dtype=bool) & (days <= deadline_days)
        values = rows[objective].to_numpy(dtype=float, na_value=np.nan)
        samples[int(point)] = Sample(rows["replica"].to_numpy(dtype=np.int64), met, values)
    return samples


def paired_difference(worse: Sample, best: Sample, direction: str) -> tuple[float, float, float]:
    """How much worse `worse` is than `best` in the objective (positive: worse), with a 95%
    t interval, pairing replica by replica over the replicas both have a value for (the
    interval is NaN with fewer than two pairs)."""
    _, i, j = np.intersect1d(worse.replicas, best.replicas, return_indices=True)
    sign = -1.0 if direction == "max" else 1.0
    x, y = sign * worse.objective[i], sign * best.objective[j]
    keep = np.isfinite(x) & np.isfinite(y)
    difference = analysis.paired_difference(y[keep], x[keep])  # mean(x - y)
    return difference.estimate, difference.low, difference.high


def quantile_days(sample_days: np.ndarray, finished: np.ndarray, q: float) -> float:
    """The q-quantile of time to train with unfinished replicas never finishing (inf): an
    order statistic (inverted CDF), so that P(meet) >= q exactly when it is <= the deadline."""
    if sample_days.size == 0:
        return math.nan
    days = np.where(finished, sample_days, np.inf)
    return float(np.quantile(days, q, method="inverted_cdf"))


# --------------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class Verdict:
    """What one round's evidence says about the points still in the race."""

    infeasible: frozenset[int]  # the upper bound of P(meet) is below the quantile
    dominated: frozenset[int]  # worse than the incumbent, paired 95% CI above zero
    incumbent: int | None  # the clearly feasible point with the best objective mean
    settled: bool  # every other point left is within ±precision of the incumbent


def judge(
    samples: Mapping[int, Sample],
    quantile: float,
    direction: str,
    precision: float = PRECISION,
    z: float = Z95,
) -> Verdict:
    """The elimination rule, a pure function of the points' samples so far.

    A point is clearly feasible when the lower Wilson bound of its P(meet) is at least the
    quantile, clearly infeasible when the upper bound is below it. The incumbent is the
    clearly feasible point with the best objective mean; a point whose paired difference
    to it has a CI entirely above zero (worse) is dominated. The race is settled when there
    is an incumbent and every other point left has its paired difference known to lie
    within ±precision × |incumbent mean| (nothing left to find at that precision).
    """
    sign = -1.0 if direction == "max" else 1.0
    bounds = {p: s.p_meet_interval(z) for p, s in samples.items()}
    infeasible = frozenset(p for p, (_, high) in bounds.items() if high < quantile)
    feasible = [p for p, (low, _) in bounds.items() if low >= quantile]
    scored = [p for p in feasible if math.isfinite(samples[p].objective_mean)]
    if not scored:
        return Verdict(infeasible, frozenset(), None, False)
    incumbent = min(scored, key=lambda p: (sign * samples[p].objective_mean, p))
    tolerance = precision * abs(samples[incumbent].objective_mean)
    dominated, settled = set(), True
    for point, sample in samples.items():
        if point == incumbent or point in infeasible:
            continue
        _, low, high = paired_difference(sample, samples[incumbent], direction)
        if low > 0:
            dominated.add(point)
        elif not (low >= -tolerance and high <= tolerance):  # NaN (too few pairs): not settled
            settled = False
    return Verdict(infeasible, frozenset(dominated), incumbent, settled)


# --------------------------------------------------------------------------- the race

# Runs replicas [start, stop) of the given points; returns their rows (RACE_COLUMNS at least).
Evaluate = Callable[[list[int], int, int], pd.DataFrame]


@dataclass(frozen=True)
class Round:
    number: int  # from 1
    points: int  # in the race during this round
    replicas: int  # each of them has after it
    infeasible: list[int]  # dropped at its end
    dominated: list[int]


@dataclass
class Race:
    """The race's evidence and course: every evaluated row and who left when."""

    rows: pd.DataFrame
    rounds: list[Round]
    dropped: dict[int, tuple[str, int]]  # point -> (status, round)
    active: list[int]  # still in the race at the end
    verdict: Verdict  # of the last round
    stop_reason: str


def race(
    points: Sequence[int],
    evaluate: Evaluate,
    deadline_days: float,
    quantile: float,
    objective: str,
    direction: str,
    first: int = FIRST_REPLICAS,
    most: int = MAX_REPLICAS,
    precision: float = PRECISION,
    on_round: Callable[[Round], None] | None = None,
) -> Race:
    """Successive halving of the grid: every point gets `first` replicas, then the points
    still in the race get twice as many each round (at most `most`), until the race is
    settled, at most one point is left and decided, or the budget is spent."""
    active = list(points)
    dropped: dict[int, tuple[str, int]] = {}
    rounds: list[Round] = []
    frames: list[pd.DataFrame] = []
    have, target, number = 0, min(first, most), 0
    while True:
        number += 1
        rows = evaluate(list(active), have, target)
        if len(rows) and (rows["error"] != "").all():
            first_error = rows["error"].iloc[0]
            raise RuntimeError(f"every replica of round {number} raised; the first: {first_error}")
        frames.append(rows)
        have = target
        table = pd.concat(frames, ignore_index=True)
        samples = samples_of(table[table["point"].isin(active)], deadline_days, objective)
        verdict = judge(samples, quantile, direction, precision)
        out_infeasible = sorted(p for p in active if p in verdict.infeasible)
        out_dominated = sorted(p for p in active if p in verdict.dominated)
        for point in out_infeasible:
            dropped[point] = ("infeasible", number)
        for point in out_dominated:
            dropped[point] = ("dominated", number)
        rounds.append(Round(number, len(active), have, out_infeasible, out_dominated))
        if on_round is not None:
            on_round(rounds[-1])
        active = [p for p in active if p not in dropped]
        if not active:
            reason = "no point is left: every point is clearly infeasible"
        elif verdict.settled and len(active) == 1:
            reason = "one point is left"
        elif verdict.settled:
            reason = (
                f"the points left are within ±{precision * 100:g}% of the best mean "
                "(the precision target)"
            )
        elif have >= most:
            reason = f"the points left reached the most replicas a point may get ({most})"
        else:
            target = min(most, 2 * have)
            continue
        return Race(table, rounds, dropped, active, verdict, reason)
