"""The fleet-level parts of a fit: the power-law trend of the fleet's failures with its age
(Crow-AMSAA), and repairs that do not hold (a hazard just after a node's return beyond the
class's own). docs/fitting.md gives every formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from sim.data.estimates import LEVEL, Estimate, profile_edge
from sim.engine.aging import FleetAge

HOURS_PER_DAY = 24.0
MIN_TREND_EVENTS = 30  # the power law needs this many node failures
MIN_REFAIL_REPAIRS = 20  # repairs of a class before its recurrences are fitted
REFAIL_WINDOW_H = 30 * 24.0  # the time after a return in which recurrences are looked for
REFAIL_MAX_H = 7 * 24.0  # a recurrence comes within days (longer: the class's own law)
BETA_RANGE = (0.01, 5.0)  # the trend's shapes searched (the schema's cluster.aging.beta)


# --------------------------------------------------------------------------- the trend


@dataclass(frozen=True)
class TrendFit:
    """A power law λ(a) ∝ a^(β−1) of the fleet's failures at fleet age a, fitted on the
    failure times of a window from fleet age `start_h` to `start_h + window_h`."""

    beta: Estimate
    start_h: float
    window_h: float
    loglik: float
    loglik_flat: float
    written: bool  # the interval excludes 1 and the AIC prefers the trend

    @property
    def rated_h(self) -> float:
        """The age the written rates hold at: the window's end (the fleet as it is now)."""
        return self.start_h + self.window_h

    def operational(self, t_h: np.ndarray | float) -> np.ndarray | float:
        """U(t): the integral of the multiplier (a/rated)^(β−1) from the window's start (the
        engine's `FleetAge`, in hours)."""
        if not self.written:
            return t_h
        return FleetAge(self.start_h, self.rated_h, self.beta.value).operational(np.asarray(t_h))

    @property
    def mean_multiplier(self) -> float:
        """The window's mean multiplier, U(T)/T: the exposure in the rated fleet's time."""
        return float(self.operational(self.window_h)) / self.window_h

    def mean_multiplier_at(self, beta: float) -> float:
        """`mean_multiplier` had the trend's shape been `beta` (its interval's ends)."""
        age = FleetAge(self.start_h, self.rated_h, beta)
        return float(age.operational(self.window_h)) / self.window_h

    def doc(self) -> dict[str, Any]:
        return {
            "beta": self.beta.doc(),
            "fleet_age_at_start_days": self.start_h / HOURS_PER_DAY,
            "rated_at_days": self.rated_h / HOURS_PER_DAY,
            "loglik": self.loglik,
            "loglik_flat": self.loglik_flat,
            "written": self.written,
        }


def _power_law_loglik(
    beta: float, n: int, sum_log_age: float, start: float, window: float
) -> float:
    """The profile log-likelihood of the power-law process of shape β on n failures (at
    fleet ages a₀ + tᵢ, `sum_log_age` = Σ log((a₀+tᵢ)/(a₀+T)), fleet age `start` = a₀ at the
    window's start), its scale maximised in closed form:
    n·log(n/D) + n·log β + (β−1)·Σ log(a₀+tᵢ) − n, D = (a₀+T)^β − a₀^β."""
    top = start + window
    # D/top^β, kept in scale: the ages are thousands of hours
    d = 1.0 - (start / top) ** beta
    if d <= 0:
        return -math.inf
    return (
        n * math.log(n / d)
        + n * math.log(beta)
        + (beta - 1.0) * sum_log_age
        - n
        - n * math.log(top)
    )


def fit_trend(
    times_h: np.ndarray, window_h: float, start_h: float, level: float = LEVEL, free: int = 1
) -> TrendFit:
    """Crow-AMSAA by maximum likelihood: the fleet's failures a Poisson process of intensity
    θ·β·a^(β−1) in fleet age a (time-truncated at the window's end), θ profiled out. A
    fleet's failures bunch more than a Poisson process's (a decreasing hazard, nodes unlike
    each other, recurrences), so the likelihood is read as a quasi-likelihood: φ, the
    Pearson statistic of the counts in `TREND_BINS` stretches of the window against the
    fitted trend over its degrees of freedom (at least 1), divides every log-likelihood
    difference. β's interval is where the profile is within φ·χ²₁(level)/2 of its maximum;
    the trend is written when that interval excludes 1 and the ratio against a flat rate,
    over φ, is significant at the level on its `free` parameters (β, and the fleet's age
    when it was searched for: χ² of 2 degrees of freedom)."""
    times = np.asarray(times_h, dtype=float)
    times = np.clip(times, 1e-6, window_h)  # a failure at the window's opening instant
    n = len(times)

    sum_log_age = float(np.sum(np.log((start_h + times) / (start_h + window_h))))

    def profile(log_b: float) -> float:
        return _power_law_loglik(math.exp(log_b), n, sum_log_age, start_h, window_h)

    bounds = (math.log(BETA_RANGE[0]), math.log(BETA_RANGE[1]))
    best = optimize.minimize_scalar(lambda v: -profile(v), bounds=bounds, method="bounded")
    at, top = float(best.x), -float(best.fun)
    flat = profile(0.0)
    phi = _dispersion(times, window_h, start_h, math.exp(at))
    cut = top - phi * stats.chi2.ppf(level, 1) / 2

    low, high = (math.exp(profile_edge(profile, at, bound, cut, 1e-7)) for bound in bounds)
    written = not low <= 1.0 <= high and 2 * (top - flat) / phi > stats.chi2.ppf(level, free)
    return TrendFit(Estimate(math.exp(at), low, high, n), start_h, window_h, top, flat, written)


TREND_BINS = 20  # stretches of the window the trend's dispersion is measured on


def _dispersion(times: np.ndarray, window: float, start: float, beta: float) -> float:
    """The Pearson statistic of the failures in `TREND_BINS` equal stretches of the window
    against the power law's expected counts, over its degrees of freedom (at least 1)."""
    edges = np.linspace(0.0, window, TREND_BINS + 1)
    top = start + window
    cumulative = ((start + edges) / top) ** beta - (start / top) ** beta
    expected = len(times) * np.diff(cumulative) / cumulative[-1]
    observed = np.histogram(times, edges)[0]
    used = expected > 0
    pearson = float(np.sum((observed[used] - expected[used]) ** 2 / expected[used]))
    return max(1.0, pearson / max(int(np.count_nonzero(used)) - 2, 1))


def fit_trend_from_log(
    times_h: np.ndarray, window_h: float, start_h: float | None, level: float = LEVEL
) -> TrendFit:
    """`fit_trend` at the fleet age given, or, when it is not known, at the age of the window's
    start that maximises the likelihood: 0 (the log starts with the fleet) or one of a grid
    from a thousandth of the window to a hundred windows (an old fleet's trend is flat)."""
    if start_h is not None:
        return fit_trend(times_h, window_h, start_h, level)
    grid = [0.0, *(window_h * np.geomspace(1e-3, 100.0, 31)).tolist()]
    fits = [fit_trend(times_h, window_h, start, level, free=2) for start in grid]
    at = max(range(len(fits)), key=lambda i: (fits[i].loglik, -i))
    if at == 0:
        return fits[0]
    # between the grid's neighbours of the best, the age that maximises the likelihood
    low, high = math.log(grid[max(at - 1, 1)]), math.log(grid[min(at + 1, len(grid) - 1)])
    found = optimize.minimize_scalar(
        lambda v: -fit_trend(times_h, window_h, math.exp(v), level, free=2).loglik,
        bounds=(low, high),
        method="bounded",
        options={"xatol": 1e-3},
    )
    refined = fit_trend(times_h, window_h, math.exp(float(found.x)), level, free=2)
    return refined if refined.loglik >= fits[at].loglik else fits[at]


# --------------------------------------------------------------------------- recurrences


@dataclass(frozen=True)
class RefailFit:
    """Repairs of a class that do not hold: with probability p a node's return from the
    repair of a failure of the class is followed by the class's failure again after an
    exponential time of mean `hours` in service, on top of the node's own hazard."""

    prob: Estimate
    hours: Estimate
    repairs: int
    loglik: float
    loglik_none: float
    written: bool  # p = 0 rejected by the likelihood ratio

    def doc(self) -> dict[str, Any]:
        return {
            "prob": self.prob.doc(),
            "hours": self.hours.doc(),
            "repairs": self.repairs,
            "loglik": self.loglik,
            "loglik_none": self.loglik_none,
            "written": self.written,
        }


@dataclass(frozen=True)
class Baseline:
    """The class's own hazard on each return's node after the return, at the return's gap:
    `hazard` h₀(g) and `cumulative` H₀(g) (its law restarted by the repair, at the node's
    pace and the fleet's age then)."""

    hazard: np.ndarray
    cumulative: np.ndarray


def _refail_loglik(p: float, r: float, gaps: np.ndarray, seen: np.ndarray, base: Baseline) -> float:
    """Each return's time to the node's next failure of the class (`gaps`, hours; `seen`
    false where the node was still up when it was cut), with the class's own hazard `base`
    and a recurrence that comes with probability p after an exponential time of mean r:
    S(g) = (1 − p + p·e^{−g/r})·e^{−H₀(g)}, f(g) = (p/r·e^{−g/r} + h₀(g)·(1 − p +
    p·e^{−g/r}))·e^{−H₀(g)}."""
    decay = np.exp(-gaps / r)
    survive = 1.0 - p + p * decay
    density = p / r * decay + base.hazard * survive
    return float(
        np.sum(np.where(seen, np.log(np.maximum(density, 1e-300)), np.log(survive)))
        - np.sum(base.cumulative)
    )


def fit_refail(
    gaps: np.ndarray, seen: np.ndarray, base: Baseline, level: float = LEVEL
) -> RefailFit:
    """(p, r) by maximum likelihood (`_refail_loglik`); p's interval from its profile, r's
    from its own; written when the likelihood ratio against p = 0 (one-sided: p ≥ 0, so
    χ²₁ at twice the level's tail) rejects no recurrences."""
    gaps = np.maximum(np.asarray(gaps, dtype=float), 1e-3)
    n = len(gaps)
    none = _refail_loglik(0.0, 1.0, gaps, seen, base)

    def negative(x: np.ndarray) -> float:
        p = 1.0 / (1.0 + math.exp(-min(max(x[0], -30.0), 30.0)))
        return -_refail_loglik(p, math.exp(min(x[1], math.log(REFAIL_MAX_H))), gaps, seen, base)

    best = None
    for p0, r0 in ((0.05, 6.0), (0.2, 24.0), (0.1, 2.0), (0.3, 72.0)):
        found = optimize.minimize(
            negative, [math.log(p0 / (1 - p0)), math.log(r0)], method="Nelder-Mead",
            options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 4000},
        )  # fmt: skip
        if best is None or found.fun < best.fun:
            best = found
    p = 1.0 / (1.0 + math.exp(-best.x[0]))
    r = min(math.exp(best.x[1]), REFAIL_MAX_H)
    top = -float(best.fun)
    cut = top - stats.chi2.ppf(level, 1) / 2

    def p_profile(value: float) -> float:
        found = optimize.minimize_scalar(
            lambda lr: -_refail_loglik(value, math.exp(lr), gaps, seen, base),
            bounds=(math.log(0.01), math.log(REFAIL_MAX_H)),
            method="bounded",
        )
        return -float(found.fun)

    def r_profile(value: float) -> float:
        found = optimize.minimize_scalar(
            lambda x: -_refail_loglik(1 / (1 + math.exp(-x)), value, gaps, seen, base),
            bounds=(-12.0, 8.0),
            method="bounded",
        )
        return -float(found.fun)

    p_low, p_high = (profile_edge(p_profile, p, bound, cut) for bound in (0.0, 0.999))
    r_low, r_high = (profile_edge(r_profile, r, bound, cut) for bound in (0.01, REFAIL_MAX_H))
    # p ≥ 0 sits on the boundary under the null: the ratio is half χ²₀, half χ²₁
    # quick recurrences only: a time at the bound is a slow excess the class's law misses
    written = (
        2 * (top - none) > stats.chi2.ppf(1 - 2 * (1 - level), 1)
        and p > 0.001
        and r_high < REFAIL_MAX_H
    )
    return RefailFit(
        Estimate(p, p_low, p_high, n), Estimate(r, r_low, r_high, n), n, top, none, written
    )


def return_gaps(
    times: np.ndarray,
    nodes: np.ndarray,
    repairs: np.ndarray,
    same_class: np.ndarray,
    window_h: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every failure of the class (`same_class`) of a named node: its return (the
    failure's time plus its repair), the time from there to the node's next failure of the
    class, cut at `REFAIL_WINDOW_H` or the window's end, and whether that failure was seen.
    Returns (index of the failure, return time, gap, seen, index of the next failure or -1);
    a failure logged while the node was still in repair leaves its return out (the node was
    never back in service before it). `times`, `nodes` sorted by node then time."""
    out_index, out_return, out_gap, out_seen, out_next = [], [], [], [], []
    class_rows = np.flatnonzero(same_class & (nodes >= 0))
    by_node: dict[int, list[int]] = {}
    for row in class_rows.tolist():
        by_node.setdefault(int(nodes[row]), []).append(row)
    for rows in by_node.values():
        for k, row in enumerate(rows):
            back = times[row] + (repairs[row] if repairs[row] == repairs[row] else 0.0)
            if back >= window_h:
                continue
            limit = min(back + REFAIL_WINDOW_H, window_h)
            if k + 1 < len(rows) and times[rows[k + 1]] < back:
                continue  # the node failed again before its repair ended: no return to time
            if k + 1 < len(rows) and times[rows[k + 1]] <= limit:
                gap, seen, following = times[rows[k + 1]] - back, True, rows[k + 1]
            else:
                gap, seen, following = limit - back, False, -1
            out_next.append(following)
            out_index.append(row)
            out_return.append(back)
            out_gap.append(gap)
            out_seen.append(seen)
    return (
        np.array(out_index, dtype=np.int64),
        np.array(out_return, dtype=float),
        np.array(out_gap, dtype=float),
        np.array(out_seen, dtype=bool),
        np.array(out_next, dtype=np.int64),
    )


def recurrence_weights(
    fit: RefailFit, gaps: np.ndarray, seen: np.ndarray, base: Baseline
) -> np.ndarray:
    """Each seen next failure's posterior probability of being a recurrence (0 for cut
    gaps): p/r·e^{−g/r} over the density of `_refail_loglik`."""
    p, r = fit.prob.value, fit.hours.value
    decay = np.exp(-np.maximum(gaps, 1e-3) / r)
    own = p / r * decay
    density = own + base.hazard * (1.0 - p + p * decay)
    return np.where(seen, own / np.maximum(density, 1e-300), 0.0)
