"""The estimators a fit is made of: rates with exact Poisson intervals (and renewal counts'
extra variance for Weibull classes), exponential against Weibull lifetimes with censoring,
repair-time laws, the dispersion test and the two-component Poisson mixture of lemons
(EM, bootstrap), and the gamma spread of rates.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special, stats

LEVEL = 0.95
DISPERSION_ALPHA = 0.05  # counts overdispersed when the test's p-value is below this
BOOTSTRAP = 200  # resamples of the nodes for the mixture's intervals


@dataclass(frozen=True)
class Estimate:
    """A fitted number, its 95% interval and the events behind it."""

    value: float
    low: float
    high: float
    events: int

    def covers(self, truth: float) -> bool:
        return self.low <= truth <= self.high

    def doc(self) -> dict[str, float | int]:
        return {"value": self.value, "low": self.low, "high": self.high, "events": self.events}


def poisson_rate(events: int, exposure: float, level: float = LEVEL) -> Estimate:
    """Events per unit of exposure with the exact (Garwood) interval:
    [χ²(α/2; 2k)/2, χ²(1−α/2; 2k+2)/2] / exposure."""
    alpha = 1.0 - level
    low = stats.chi2.ppf(alpha / 2, 2 * events) / 2 if events > 0 else 0.0
    high = stats.chi2.ppf(1 - alpha / 2, 2 * events + 2) / 2
    return Estimate(events / exposure, float(low) / exposure, float(high) / exposure, events)


@dataclass(frozen=True)
class Lives:
    """A class's lives in the window (hours), each component (a node; the job for a class
    without nodes) a renewal process long in service: `first` runs from the window's start
    to the component's first failure (a residual life: the component was already running),
    `first_cut` is the whole window of a component that never failed (a residual life,
    censored), `whole` runs between two failures, `whole_cut` from the last failure to the
    window's end (censored). Failures of one component at one time are merged (`ties`)."""

    whole: np.ndarray
    whole_cut: np.ndarray
    first: np.ndarray
    first_cut: np.ndarray
    ties: int = 0

    @property
    def observed(self) -> np.ndarray:
        return np.concatenate((self.first, self.whole))

    @functools.cached_property
    def log_times(self) -> np.ndarray:
        """log x of every life but the cut residual ones (they enter through Q)."""
        times = np.concatenate((self.whole, self.whole_cut, self.first))
        return np.log(times[times > 0])

    @functools.cached_property
    def sum_log_whole(self) -> float:
        return float(np.sum(np.log(np.maximum(self.whole, 1e-300))))

    @functools.cached_property
    def log_first_cut(self) -> np.ndarray:
        return np.log(self.first_cut)

    @property
    def censored(self) -> np.ndarray:
        return np.concatenate((self.whole_cut, self.first_cut))


def renewal_rate(events: int, exposure: float, shape: float, level: float = LEVEL) -> Estimate:
    """The rate of a class whose components are Weibull renewal processes of shape k: over a
    long window their counts vary φ = CV² = Γ(1+2/k)/Γ(1+1/k)² − 1 times as much as
    Poisson counts (Cox 1962), so the exact interval is taken on k/φ effective events over
    exposure/φ (a quasi-Poisson interval: the estimate is unchanged, the interval wider for
    k < 1). Never narrower than the Poisson interval (φ ≥ 1): a shape above 1 chosen by
    chance would otherwise narrow it."""
    phi = max(1.0, math.gamma(1 + 2 / shape) / math.gamma(1 + 1 / shape) ** 2 - 1)
    scaled = poisson_rate(events / phi, exposure / phi, level)  # type: ignore[arg-type]
    return Estimate(scaled.value, scaled.low, scaled.high, events)


def renewal_lives(
    times: np.ndarray,
    nodes: np.ndarray,
    window: float,
    total_nodes: int,
    pace: np.ndarray | None = None,
    unseen_pace: float = 1.0,
) -> Lives:
    """Each component's lives in the window (`Lives`), sorted and split in one pass (no
    per-node loop: a log of a million nodes takes seconds). Job-wide failures (node -1) are
    one renewal process; `total_nodes` beyond the nodes named never failed. With `pace`
    (per failure, its node's rate over a sound node's), each node's times are stretched by
    its pace, so a lemon's lives read as a sound node's (`unseen_pace`: the nodes that never
    failed)."""
    order = np.lexsort((times, nodes))
    times, nodes = times[order].astype(float), nodes[order]
    stretch = np.ones(len(times)) if pace is None else np.asarray(pace, dtype=float)[order]
    same = nodes[1:] == nodes[:-1]
    tie = same & (np.diff(times) <= 0)
    keep = np.concatenate(([True], ~tie))  # a tie merges into the failure before it
    times, nodes, stretch = times[keep] * stretch[keep], nodes[keep], stretch[keep]
    first = np.concatenate(([True], nodes[1:] != nodes[:-1]))[: len(nodes)]
    last = np.concatenate((nodes[1:] != nodes[:-1], [True]))[: len(nodes)]
    unseen = max(0, total_nodes - int(np.count_nonzero(first & (nodes >= 0))))
    if len(nodes) and (nodes < 0).all():
        unseen = 0  # a job-wide class has no per-node clocks
    return Lives(
        whole=np.diff(times)[~first[1:]],
        whole_cut=np.maximum(window * stretch[last] - times[last], 0.0),
        first=times[first],
        first_cut=np.full(unseen, float(window) * unseen_pace),
        ties=int(np.count_nonzero(tie)),
    )


@dataclass(frozen=True)
class LifetimeFit:
    """Exponential against Weibull on censored times between failures (hours)."""

    loglik_exponential: float
    loglik_weibull: float
    aic_exponential: float
    aic_weibull: float
    mean_hours: float  # the exponential's mean time between failures of one node
    shape: Estimate  # the Weibull shape with its profile-likelihood interval
    scale_hours: float
    chosen: str  # exponential | weibull

    def doc(self) -> dict[str, Any]:
        return {
            "loglik_exponential": self.loglik_exponential,
            "loglik_weibull": self.loglik_weibull,
            "aic_exponential": self.aic_exponential,
            "aic_weibull": self.aic_weibull,
            "weibull_shape": self.shape.doc(),
            "weibull_scale_hours": self.scale_hours,
            "chosen": self.chosen,
        }


def _weibull_profile(k: float, lives: Lives) -> tuple[float, float]:
    """The Weibull log-likelihood of components long in service, maximised over the scale
    at shape k; returns (log-likelihood, scale). Whole lives count f(x), cut ones S(x),
    residual lives from the window's start S(y)/mean (the renewal process's equilibrium),
    and cut residual lives Q(1/k, (w/scale)^k) (the equilibrium's survival, Q the
    regularized upper incomplete gamma function). Without cut residual lives the scale has
    a closed form, s^k = k·A / (k·n + m) with A = Σx^k over the other lives, n whole lives
    and m residual ones; with them it starts there and is maximised numerically."""
    n, m = len(lives.whole), len(lives.first)
    logs = lives.log_times
    top = float(np.max(logs))
    log_a = top * k + math.log(float(np.sum(np.exp(k * (logs - top)))))  # log Σ x^k
    log_gamma = math.lgamma(1.0 + 1.0 / k)

    def loglik(log_s: float) -> float:
        total = (
            n * math.log(k)
            + (k - 1) * lives.sum_log_whole
            - (n * k + m) * log_s
            - math.exp(log_a - k * log_s)
            - m * log_gamma
        )
        if len(lives.first_cut):
            z = np.exp(k * (lives.log_first_cut - log_s))
            a = 1.0 / k
            survival = special.gammaincc(a, z)
            # far in the tail Q underflows: its asymptote (a - 1)·log z - z - logΓ(a)
            tail = (a - 1) * np.log(np.maximum(z, 1e-300)) - z - special.gammaln(a)
            safe = np.log(np.maximum(survival, 1e-300))
            total += float(np.sum(np.where(survival > 1e-280, safe, tail)))
        return total

    log_s = (math.log(k) + log_a - math.log(n * k + m)) / k if n * k + m > 0 else top
    if len(lives.first_cut):
        # the closed form ignores the nodes that never failed (they push the scale up): the
        # maximum lies above it; a bracket that doubles until the likelihood falls at both
        # ends holds it (concave in log s), then a bounded search inside
        low, high = _bracket(loglik, log_s)
        best = optimize.minimize_scalar(
            lambda v: -loglik(v), bounds=(low, high), method="bounded", options={"xatol": 1e-9}
        )
        log_s = float(best.x)
    return loglik(log_s), math.exp(log_s)


def profile_edge(f, at: float, bound: float, cut: float, xtol: float = 1e-6) -> float:
    """Where a profile log-likelihood `f`, at its maximum at `at`, falls to `cut` on the way
    to `bound`: the bound itself when it never falls that low there, `at` when the maximum
    is flat to rounding (no width to find). One end of a profile-likelihood interval."""
    if f(bound) >= cut:
        return bound
    if f(at) <= cut:
        return at
    return optimize.brentq(lambda v: f(v) - cut, min(at, bound), max(at, bound), xtol=xtol)


def _bracket(f, start: float, step: float = 1.0) -> tuple[float, float]:
    """An interval around the maximum of a unimodal `f` near `start`: a step that doubles
    on each side until `f` falls below its best inside (at most 2^40 steps out)."""
    best = f(start)
    high = start + step
    while (value := f(high)) >= best and step < 2.0**40:
        start, best, step = high, value, step * 2.0
        high = start + step
    low, step = start - 1.0, 1.0
    while f(low) >= best and step < 2.0**40:
        step *= 2.0
        low = start - step
    return low, high


def fit_lifetime(lives: Lives, level: float = LEVEL) -> LifetimeFit:
    """Maximum likelihood with censoring, components long in service (`_weibull_profile`):
    the exponential (rate d/Σx over every life, whole, residual and cut) against the
    Weibull, whose scale is profiled (maximised for each shape) and whose shape maximises
    the profile; the shape's interval is where the profile is within χ²₁(level)/2 of the
    maximum. The Weibull is chosen when its AIC is lower and the shape's interval excludes
    1. The exponential is the Weibull of shape 1 (memoryless: residual lives are whole)."""
    d = len(lives.whole) + len(lives.first)
    exposure = float(
        np.sum(lives.whole) + np.sum(lives.whole_cut) + np.sum(lives.first)
        + np.sum(lives.first_cut)
    )  # fmt: skip
    mean = exposure / d
    loglik_exp = d * math.log(d / exposure) - d

    def profile(log_k: float) -> float:
        return _weibull_profile(math.exp(log_k), lives)[0]

    best = optimize.minimize_scalar(
        lambda v: -profile(v),
        bounds=(math.log(0.02), math.log(50.0)),
        method="bounded",
        options={"xatol": 1e-5},
    )
    log_k, loglik_w = float(best.x), -float(best.fun)
    scale = _weibull_profile(math.exp(log_k), lives)[1]
    if loglik_exp > loglik_w:  # the exponential is the Weibull of shape 1
        log_k, loglik_w, scale = 0.0, loglik_exp, mean
    cut = loglik_w - stats.chi2.ppf(level, 1) / 2

    low, high = (
        math.exp(profile_edge(profile, log_k, math.log(bound), cut, 1e-5)) for bound in (0.02, 50.0)
    )
    k = math.exp(log_k)
    aic_exp, aic_w = 2 - 2 * loglik_exp, 4 - 2 * loglik_w
    chosen = "weibull" if aic_w < aic_exp and not low <= 1.0 <= high else "exponential"
    return LifetimeFit(
        loglik_exp, loglik_w, aic_exp, aic_w, mean, Estimate(k, low, high, d), scale, chosen,
    )  # fmt: skip


@dataclass(frozen=True)
class RepairFit:
    """Repair times (hours): exponential against lognormal by AIC; the chosen law's mean."""

    repairs: int
    mean: Estimate  # the chosen law's mean, with its interval
    sample_mean_hours: float
    lognormal_mu: float
    lognormal_sigma: float
    aic_exponential: float
    aic_lognormal: float
    chosen: str

    def doc(self) -> dict[str, Any]:
        return {
            "repairs": self.repairs,
            "mean_hours": self.mean.doc(),
            "sample_mean_hours": self.sample_mean_hours,
            "lognormal_mu": self.lognormal_mu,
            "lognormal_sigma": self.lognormal_sigma,
            "aic_exponential": self.aic_exponential,
            "aic_lognormal": self.aic_lognormal,
            "chosen": self.chosen,
        }


def fit_repairs(hours: np.ndarray, level: float = LEVEL) -> RepairFit:
    """Exponential: mean = x̄, interval from 2n·x̄/χ²(2n). Lognormal: μ, σ the mean and
    (n-divisor) standard deviation of log x, mean exp(μ + σ²/2) with Cox's interval
    μ + σ²/2 ± z·sqrt(σ²/n + σ⁴/(2(n−1))). Both laws are fitted on the times above 0 (a
    repair logged as 0 hours has no logarithm); the sample mean counts every time."""
    sample_mean = float(np.mean(hours))
    hours = hours[hours > 0]
    n = len(hours)
    alpha = 1 - level
    mean = float(np.mean(hours))
    logs = np.log(hours)
    mu, sigma = float(np.mean(logs)), float(np.std(logs))
    loglik_exp = -n * math.log(mean) - n
    sigma_safe = max(sigma, 1e-12)
    loglik_ln = float(np.sum(stats.norm.logpdf(logs, mu, sigma_safe) - logs))
    aic_exp, aic_ln = 2 - 2 * loglik_exp, 4 - 2 * loglik_ln
    if aic_ln < aic_exp:
        z = stats.norm.ppf(1 - alpha / 2)
        centre = mu + sigma**2 / 2
        half = z * math.sqrt(sigma**2 / n + sigma**4 / (2 * max(n - 1, 1)))
        estimate = Estimate(math.exp(centre), math.exp(centre - half), math.exp(centre + half), n)
        chosen = "lognormal"
    else:
        estimate = Estimate(
            mean,
            2 * n * mean / stats.chi2.ppf(1 - alpha / 2, 2 * n),
            2 * n * mean / stats.chi2.ppf(alpha / 2, 2 * n),
            n,
        )
        chosen = "exponential"
    return RepairFit(n, estimate, sample_mean, mu, sigma, aic_exp, aic_ln, chosen)


@dataclass(frozen=True)
class Mixture:
    """Two Poisson rates per node (per window): a share `fraction` of lemons at `lemon`,
    the rest at `normal`."""

    fraction: float
    normal: float
    lemon: float
    loglik: float

    @property
    def multiplier(self) -> float:
        return self.lemon / self.normal if self.normal > 0 else math.inf

    def node_multiplier(self, counts: np.ndarray) -> np.ndarray:
        """A node's expected rate over a sound node's, given its count: 1 + p·(m − 1), p its
        posterior probability of being a lemon."""
        counts = np.asarray(counts, dtype=float)
        log_sound = math.log1p(-self.fraction) + counts * math.log(self.normal) - self.normal
        log_lemon = math.log(self.fraction) + counts * math.log(self.lemon) - self.lemon
        lemon = 1.0 / (1.0 + np.exp(np.clip(log_sound - log_lemon, -700, 700)))
        return 1.0 + lemon * (min(self.multiplier, 1000.0) - 1.0)


def _em(
    counts: np.ndarray, pi: np.ndarray, lam1: np.ndarray, lam2: np.ndarray, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """EM for two Poisson components on each row of `counts` (rows: starts, or bootstrap
    resamples) at once; returns (fraction, rate 1, rate 2, log-likelihood) per row. Counts
    are whole numbers: each row is held as how many nodes have each count (a few dozen
    values, whatever the nodes)."""
    rows = counts.astype(np.int64)
    values = np.arange(int(rows.max()) + 1 if rows.size else 1, dtype=float)
    weights = np.stack([np.bincount(row, minlength=len(values)) for row in rows]).astype(float)
    nodes = weights.sum(axis=1)
    log_factorial = special.gammaln(values + 1)
    previous = np.full(len(rows), -np.inf)
    loglik = previous
    for _ in range(iterations):
        log1 = np.log1p(-pi)[:, None] + values * np.log(lam1)[:, None] - lam1[:, None]
        log2 = np.log(pi)[:, None] + values * np.log(lam2)[:, None] - lam2[:, None]
        top = np.maximum(log1, log2)
        total = top + np.log(np.exp(log1 - top) + np.exp(log2 - top))
        loglik = np.sum(weights * (total - log_factorial), axis=1)
        lemon = weights * np.exp(log2 - total)  # nodes of each count in the lemon component
        sound = weights - lemon
        pi = np.clip(lemon.sum(axis=1) / nodes, 1e-6, 1 - 1e-6)
        lam1 = np.maximum((sound @ values) / np.maximum(sound.sum(axis=1), 1e-300), 1e-9)
        lam2 = np.maximum((lemon @ values) / np.maximum(lemon.sum(axis=1), 1e-300), 1e-9)
        if np.all(loglik - previous < 1e-6):
            break
        previous = loglik
    swap = lam2 < lam1  # the lemons are the faster component
    pi = np.where(swap, 1 - pi, pi)
    lam1, lam2 = np.where(swap, lam2, lam1), np.where(swap, lam1, lam2)
    return pi, lam1, lam2, loglik


def poisson_mixture(counts: np.ndarray, iterations: int = 2000) -> Mixture:
    """Two-component Poisson mixture by EM from three starts; the best likelihood wins."""
    counts = np.asarray(counts, dtype=float)
    mean = max(float(np.mean(counts)), 1e-9)
    high = max(mean * 3.0, float(np.quantile(counts, 0.9)), 1e-6)
    pi = np.array([0.1, 0.05, 0.25])
    lam1 = mean * np.array([0.7, 0.9, 0.5])
    lam2 = np.array([high, mean * 5.0, mean * 2.0])
    pi, lam1, lam2, loglik = _em(
        np.tile(counts, (3, 1)), pi, np.maximum(lam1, 1e-9), lam2, iterations
    )
    best = int(np.argmax(loglik))
    return Mixture(float(pi[best]), float(lam1[best]), float(lam2[best]), float(loglik[best]))


@dataclass(frozen=True)
class LemonFit:
    """Per-node failure counts (node-attributable classes) against Poisson."""

    nodes: int
    events: int
    dispersion: float  # Σ (n_i − n̄)² / n̄
    p_value: float  # of χ²(nodes − 1)
    overdispersed: bool
    fraction: Estimate | None = None
    multiplier: Estimate | None = None
    mixture: Mixture | None = None
    counts: np.ndarray = field(default_factory=lambda: np.array([]))
    # what the statistic is held against: χ²(N − 1) (equal Poisson rates), or draws of the
    # classes' own laws with no spread between nodes
    null: str = "poisson"
    # the spread chosen when overdispersed, by AIC on the counts: two-point lemons (3
    # parameters) or a gamma spread of the nodes' rates (negative binomial counts, 2)
    spread: str = "none"  # none | lemons | gamma
    node_cv: Estimate | None = None  # the gamma spread's coefficient of variation
    aic_lemons: float = math.nan
    aic_gamma: float = math.nan

    @property
    def has_lemons(self) -> bool:
        return self.spread == "lemons"

    def pace(self, counts: np.ndarray) -> np.ndarray:
        """A node's expected rate over the rate the scenario writes for its classes (a sound
        node's with lemons, the mean node's with a gamma spread), given its count."""
        counts = np.asarray(counts, dtype=float)
        if self.spread == "lemons":
            return self.mixture.node_multiplier(counts)
        if self.spread == "gamma":
            shape, mean = 1.0 / self.node_cv.value**2, float(np.mean(self.counts))
            return (shape + counts) / (shape + mean)  # the gamma posterior's mean
        return np.ones_like(counts)

    @property
    def test(self) -> str:
        if self.null == "poisson":
            return f"chi2, {self.nodes - 1} dof"
        return "draws of the laws, nodes alike"

    def doc(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "events": self.events,
            "dispersion_statistic": self.dispersion,
            "degrees_of_freedom": self.nodes - 1,
            "null": self.null,
            "p_value": self.p_value,
            "overdispersed": self.overdispersed,
            "spread": self.spread,
            "aic_lemons": self.aic_lemons,
            "aic_gamma": self.aic_gamma,
            "node_rate_cv": None if self.node_cv is None else self.node_cv.doc(),
            "lemon_fraction": None if self.fraction is None else self.fraction.doc(),
            "lemon_rate_multiplier": None if self.multiplier is None else self.multiplier.doc(),
        }


def dispersion(counts: np.ndarray) -> np.ndarray:
    """D = Σ (n_i − n̄)²/n̄ over the last axis (0 where no node failed)."""
    mean = np.mean(counts, axis=-1)
    spread = np.sum((counts - mean[..., None]) ** 2, axis=-1)
    return np.where(mean > 0, spread / np.where(mean > 0, mean, 1.0), 0.0)


def renewal_counts(
    laws: list[tuple[float, float]],
    nodes: int,
    window: float,
    rng: np.random.Generator,
    new: bool = False,
) -> np.ndarray:
    """`BOOTSTRAP` draws of every node's failures in the window (summed over the classes)
    when all nodes are alike: each class a Weibull renewal process (shape, scale in hours)
    long in service, its first failure after an equilibrium residual life (or, `new`, a
    whole one: nodes new at the window's start). Fewer draws for a
    fleet of more than 100,000 nodes (at most 2·10⁷ node-draws: the statistic of so many
    nodes barely varies between draws)."""
    total = np.zeros((max(20, min(BOOTSTRAP, 20_000_000 // max(nodes, 1))), nodes))
    for shape, scale in laws:
        if shape == 1.0:  # exponential: Poisson counts
            total += rng.poisson(window / scale, size=total.shape)
            continue
        if new:  # nodes new at the window's start: a whole first life
            t = scale * rng.weibull(shape, total.shape)
        else:
            biased = scale * rng.gamma(1.0 + 1.0 / shape, 1.0, total.shape) ** (1.0 / shape)
            t = rng.random(total.shape) * biased
        while (alive := t <= window).any():
            total += alive
            t = np.where(alive, t + scale * rng.weibull(shape, total.shape), t)
    return total


def fit_lemons(
    counts: np.ndarray,
    rng: np.random.Generator,
    level: float = LEVEL,
    null: np.ndarray | None = None,
) -> LemonFit:
    """The dispersion test of D = Σ (n_i − n̄)²/n̄: against χ²(N−1) when every class is
    exponential (equal Poisson rates), or against `null`, the same statistic of counts drawn
    with the classes' own lifetime laws and no spread between nodes (`renewal_counts`: a
    decreasing hazard alone spreads the counts, which is not lemons). When p < 0.05, a
    two-component mixture by EM, with percentile intervals from `BOOTSTRAP` resamples of
    the nodes."""
    counts = np.asarray(counts, dtype=float)
    n = len(counts)
    statistic = float(dispersion(counts))
    if null is None:
        p_value = float(stats.chi2.sf(statistic, n - 1))
    else:
        p_value = float((1 + np.count_nonzero(null >= statistic)) / (1 + len(null)))
    events = int(counts.sum())
    null_law = "poisson" if null is None else "renewal"
    if p_value >= DISPERSION_ALPHA:
        return LemonFit(n, events, statistic, p_value, False, counts=counts, null=null_law)
    mixture = poisson_mixture(counts)
    # every resample starts from the fit to the data, so its components keep their labels
    resamples = rng.choice(counts, size=(BOOTSTRAP, n), replace=True)
    ones = np.ones(BOOTSTRAP)
    fractions, normal, lemon, _ = _em(
        resamples, mixture.fraction * ones, mixture.normal * ones, mixture.lemon * ones, 500
    )
    multipliers = np.minimum(lemon / np.maximum(normal, 1e-9), 1000.0)
    alpha = 1 - level
    q = (alpha / 2, 1 - alpha / 2)
    fraction = Estimate(mixture.fraction, *np.quantile(fractions, q).tolist(), events)
    multiplier = Estimate(
        min(mixture.multiplier, 1000.0), *np.quantile(multipliers, q).tolist(), events
    )
    gamma = gamma_spread(counts, level)
    aic_lemons = 6 - 2 * mixture.loglik
    aic_gamma = 4 - 2 * gamma[1]
    return LemonFit(
        n, events, statistic, p_value, True, fraction, multiplier, mixture, counts, null_law,
        "lemons" if aic_lemons <= aic_gamma else "gamma", gamma[0], aic_lemons, aic_gamma,
    )  # fmt: skip


def gamma_spread(counts: np.ndarray, level: float = LEVEL) -> tuple[Estimate, float]:
    """Nodes whose rates are gamma-distributed (mean 1, coefficient of variation c): their
    counts are negative binomial with the sample mean m and shape r = 1/c². Returns c with
    its profile-likelihood interval (where the log-likelihood is within χ²₁(level)/2 of its
    maximum, m held at its estimate), and the maximum log-likelihood."""
    counts = np.asarray(counts, dtype=float)
    mean = float(np.mean(counts))

    def loglik(log_cv: float) -> float:
        shape = math.exp(-2 * log_cv)
        return float(np.sum(stats.nbinom.logpmf(counts, shape, shape / (shape + mean))))

    bounds = (math.log(1e-3), math.log(10.0))
    best = optimize.minimize_scalar(lambda v: -loglik(v), bounds=bounds, method="bounded")
    top, at = -float(best.fun), float(best.x)
    cut = top - stats.chi2.ppf(level, 1) / 2

    low, high = (math.exp(profile_edge(loglik, at, bound, cut)) for bound in bounds)
    return Estimate(math.exp(at), low, high, int(counts.sum())), top
