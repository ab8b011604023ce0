"""The node classes' laws and the spread between nodes fitted together: every node has its
own rate multiplier z (gamma, mean 1, coefficient of variation c, shared by its classes:
`cluster.node_rate_cv`), each of its classes a renewal process of lifetimes L/z, L of the
class's Weibull law (shape k, scale s; k = 1 the exponential). A node's likelihood is its
classes' likelihoods at its z, integrated over the gamma on a grid of z; the fleet's is the
product over nodes. Maximised over every k, s and c at once, so a decreasing hazard (lives
that vary within a node) and a spread (nodes that differ) are told apart by how a node's
lives vary together, not read twice as the counts' spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from sim.data.estimates import LEVEL, Estimate

GRID = np.geomspace(1e-4, 40.0, 80)  # the nodes' multipliers z the integral is taken on
_LOG_GRID = np.log(GRID)
_LOG_STEP = float(_LOG_GRID[1] - _LOG_GRID[0])  # dz = z·d(log z): the grid's weights


@dataclass(frozen=True)
class NodeLives:
    """A class's lives node by node (in the trend's operational time): whole lives between
    two failures, the first segment from the window's start to a node's first failure, the
    last from its last failure to the window's end (cut), and the nodes that never failed
    (the whole window, cut). `new`: the nodes were new at the window's start (the first
    segment is a whole life), else long in service (a residual life)."""

    name: str
    free_shape: bool  # the shape is fitted (else 1: exponential)
    whole: np.ndarray
    whole_node: np.ndarray
    first: np.ndarray  # one per node that failed
    first_node: np.ndarray
    last: np.ndarray  # cut, one per node that failed
    never: np.ndarray  # the nodes that never failed
    window: float
    nodes: int
    new: bool

    @classmethod
    def of(
        cls, name: str, free_shape: bool, times: np.ndarray, node: np.ndarray, window: float,
        nodes: int, new: bool,
    ) -> NodeLives:  # fmt: skip
        order = np.lexsort((times, node))
        times = np.asarray(times, dtype=float)[order]
        node = np.asarray(node, dtype=np.int64)[order]
        keep = np.concatenate(([True], (node[1:] != node[:-1]) | (np.diff(times) > 0)))
        times, node = times[keep], node[keep]
        nodes = max(nodes, int(node.max()) + 1 if len(node) else 0)  # named beyond --nodes
        first = np.concatenate(([True], node[1:] != node[:-1])) if len(node) else np.array([], bool)
        last = np.concatenate((node[1:] != node[:-1], [True])) if len(node) else np.array([], bool)
        gaps = np.diff(times)
        inner = ~first[1:] if len(node) else np.array([], bool)
        seen = np.zeros(nodes, dtype=bool)
        seen[node[first]] = True
        return cls(
            name, free_shape, gaps[inner], node[1:][inner], times[first], node[first],
            np.maximum(window - times[last], 0.0), np.flatnonzero(~seen), window, nodes, new,
        )  # fmt: skip

    def loglik(self, k: float, s: float) -> np.ndarray:
        """Each node's log-likelihood at every z of the grid (nodes × grid)."""
        n = self.nodes
        zk = GRID**k
        log_k, log_s = math.log(k), math.log(s)

        def per_node(where: np.ndarray, values: np.ndarray) -> np.ndarray:
            return np.bincount(where, weights=values, minlength=n).astype(float)

        # whole lives (and, for new nodes, the first segment): the density at L/z
        dens_node = self.whole_node
        dens = self.whole
        if self.new:
            dens_node = np.concatenate((dens_node, self.first_node))
            dens = np.concatenate((dens, self.first))
        count = np.bincount(dens_node, minlength=n).astype(float)
        logs = per_node(dens_node, np.log(np.maximum(dens, 1e-300)))
        # every segment's survival part, (z·x/s)^k summed over a node
        power = per_node(dens_node, (dens / s) ** k)
        power += per_node(self.first_node, (self.last / s) ** k)  # the last segment, cut
        if not self.new:  # residual first lives: S(y)/mean = S(y)·z / (s·Γ(1+1/k))
            power += per_node(self.first_node, (self.first / s) ** k)
        out = (
            (count * (log_k - k * log_s) + (k - 1.0) * logs)[:, None]
            + np.outer(count * k, _LOG_GRID)
            - np.outer(power, zk)
        )
        if not self.new:
            once = np.zeros(n)
            once[self.first_node] = 1.0
            out += np.outer(once, _LOG_GRID) - (once * (log_s + math.lgamma(1 + 1 / k)))[:, None]
        if len(self.never):
            u = (self.window / s) ** k * zk  # the window, cut, at every z
            if self.new:
                out[self.never] -= u[None, :]
            else:  # a residual life cut: Q(1/k, (z·w/s)^k)
                a = 1.0 / k
                q = special.gammaincc(a, u)
                tail = (a - 1) * np.log(np.maximum(u, 1e-300)) - u - special.gammaln(a)
                out[self.never] += np.where(q > 1e-280, np.log(np.maximum(q, 1e-300)), tail)
        return out


def _log_prior(cv: float) -> np.ndarray:
    """The gamma (mean 1, CV `cv`) density of z times the grid's step, in logs."""
    r = 1.0 / cv**2
    return r * math.log(r) - math.lgamma(r) + r * _LOG_GRID - r * GRID + math.log(_LOG_STEP)


def loglik(classes: list[NodeLives], ks: list[float], scales: list[float], cv: float) -> float:
    total = sum(c.loglik(k, s) for c, k, s in zip(classes, ks, scales))
    return float(np.sum(special.logsumexp(total + _log_prior(cv)[None, :], axis=1)))


@dataclass(frozen=True)
class FrailtyFit:
    shapes: dict[str, Estimate]  # per class (1 with no interval for a class not free)
    scales: dict[str, float]  # hours of operational time
    cv: Estimate
    loglik: float


def held_at_one(classes: list[NodeLives], fit: FrailtyFit, name: str) -> float:
    """The likelihood with class `name` exponential (shape 1) and its scale maximised, every
    other parameter where `fit` has it: the exponential's side of the class's choice."""
    ks = [1.0 if c.name == name else fit.shapes[c.name].value for c in classes]
    scales = [fit.scales[c.name] for c in classes]
    at = [c.name for c in classes].index(name)
    start = math.log(scales[at] * math.gamma(1 + 1 / fit.shapes[name].value))

    def negative(v: float) -> float:
        trial = list(scales)
        trial[at] = math.exp(v)
        return -loglik(classes, ks, trial, fit.cv.value)

    found = optimize.minimize_scalar(negative, bounds=(start - 3.0, start + 3.0), method="bounded")
    return -float(found.fun)


def fit_frailty(classes: list[NodeLives], start_shapes: list[float], start_scales: list[float],
                start_cv: float, level: float = LEVEL) -> FrailtyFit:  # fmt: skip
    """Maximum likelihood of every free class's shape, every class's scale and the spread;
    95% intervals of the shapes and the spread from the likelihood's curvature (in logs)."""
    free = [i for i, c in enumerate(classes) if c.free_shape]

    def unpack(x: np.ndarray) -> tuple[list[float], list[float], float]:
        ks = [1.0] * len(classes)
        for j, i in enumerate(free):
            ks[i] = math.exp(x[j])
        scales = [math.exp(v) for v in x[len(free) : len(free) + len(classes)]]
        return ks, scales, math.exp(x[-1])

    def negative(x: np.ndarray) -> float:
        ks, scales, cv = unpack(x)
        value = -loglik(classes, ks, scales, cv)
        return value if math.isfinite(value) else 1e300

    x0 = np.array(
        [math.log(start_shapes[i]) for i in free]
        + [math.log(s) for s in start_scales]
        + [math.log(min(max(start_cv, 0.05), 5.0))]
    )
    bounds = (
        [(math.log(0.05), math.log(20.0))] * len(free)
        + [(v - 15.0, v + 15.0) for v in x0[len(free) : len(free) + len(classes)]]
        + [(math.log(1e-3), math.log(10.0))]
    )
    found = optimize.minimize(negative, x0, method="L-BFGS-B", bounds=bounds,
                              options={"maxiter": 500})  # fmt: skip
    x = found.x
    z = stats.norm.ppf(0.5 + level / 2)
    # the curvature in the free shapes, their classes' scales and the spread (the other
    # classes' scales barely move them)
    wanted = list(range(len(free))) + [len(free) + i for i in free] + [len(x) - 1]

    def part(y: np.ndarray) -> float:
        full = x.copy()
        full[wanted] = y
        return negative(full)

    spread = np.full(len(x), np.inf)
    spread[wanted] = _curvature_se(part, x[wanted])
    ks, scales, cv = unpack(x)
    shapes = {}
    for i, c in enumerate(classes):
        if i in free:
            j = free.index(i)
            se = spread[j]
            shapes[c.name] = Estimate(ks[i], ks[i] * math.exp(-z * se), ks[i] * math.exp(z * se),
                                      len(c.whole) + len(c.first))  # fmt: skip
        else:
            shapes[c.name] = Estimate(1.0, 1.0, 1.0, len(c.whole) + len(c.first))
    se = spread[-1]
    return FrailtyFit(
        shapes,
        {c.name: s for c, s in zip(classes, scales)},
        Estimate(cv, cv * math.exp(-z * se), cv * math.exp(z * se), 0),
        -float(found.fun),
    )


def _curvature_se(f, x: np.ndarray, step: float = 1e-3) -> np.ndarray:
    """Standard errors from the inverse of the numerical Hessian of `f` at `x` (a minimum);
    infinite where the curvature says nothing."""
    n = len(x)
    h = np.zeros((n, n))
    f0 = f(x)
    for i in range(n):
        for j in range(i, n):
            e_i, e_j = np.eye(n)[i] * step, np.eye(n)[j] * step
            if i == j:
                h[i, i] = (f(x + e_i) - 2 * f0 + f(x - e_i)) / step**2
            else:
                h[i, j] = h[j, i] = (
                    f(x + e_i + e_j) - f(x + e_i - e_j) - f(x - e_i + e_j) + f(x - e_i - e_j)
                ) / (4 * step**2)
    try:
        cov = np.linalg.inv(h)
        return np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.inf))
    except np.linalg.LinAlgError:
        return np.full(n, np.inf)
