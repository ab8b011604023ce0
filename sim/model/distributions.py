"""Lifetime distributions parameterised by their mean, with analytic moments.

Tests compare samples with `mean` and `variance`; the engine only calls
`sample(rng, size)` (fresh lifetimes) and `residual(rng, size)` (the residual lives of
components long in service) with an explicit `numpy.random.Generator`.

A component long in service has run part of its current life already: its residual life
follows the equilibrium (forward-recurrence) law of the renewal process, with density
S(x) / mean. It is drawn as U·L with U uniform on (0, 1) and L from the length-biased
law (density x·f(x) / mean): for the exponential the law itself, for the Weibull
L = scale·G^(1/k) with G ~ Gamma(1 + 1/k), for the log-normal LogNormal(μ + σ², σ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Exponential:
    mean: float

    @property
    def variance(self) -> float:
        return self.mean**2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.mean, size)

    def residual(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.mean, size)  # no memory: the same law


@dataclass(frozen=True)
class Weibull:
    """Weibull with shape k, scaled so that its mean is `mean` (k < 1: infant mortality)."""

    mean: float
    shape: float

    @property
    def scale(self) -> float:
        return self.mean / math.gamma(1.0 + 1.0 / self.shape)

    @property
    def variance(self) -> float:
        k = self.shape
        return self.scale**2 * (math.gamma(1.0 + 2.0 / k) - math.gamma(1.0 + 1.0 / k) ** 2)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.scale * rng.weibull(self.shape, size)

    def residual(self, rng: np.random.Generator, size: int) -> np.ndarray:
        biased = self.scale * rng.gamma(1.0 + 1.0 / self.shape, 1.0, size) ** (1.0 / self.shape)
        return rng.random(size) * biased


@dataclass(frozen=True)
class LogNormal:
    """Log-normal with log-scale sigma, located so that its mean is `mean`."""

    mean: float
    sigma: float

    @property
    def mu(self) -> float:
        return math.log(self.mean) - self.sigma**2 / 2.0

    @property
    def variance(self) -> float:
        return math.expm1(self.sigma**2) * self.mean**2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.lognormal(self.mu, self.sigma, size)

    def residual(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.random(size) * rng.lognormal(self.mu + self.sigma**2, self.sigma, size)


Distribution = Exponential | Weibull | LogNormal


def lifetime(
    kind: str, mean: float, weibull_shape: float | None, lognormal_sigma: float | None
) -> Distribution:
    if kind == "exponential":
        return Exponential(mean)
    if kind == "weibull":
        assert weibull_shape is not None
        return Weibull(mean, weibull_shape)
    if kind == "lognormal":
        assert lognormal_sigma is not None
        return LogNormal(mean, lognormal_sigma)
    raise ValueError(f"unknown distribution {kind!r}")
