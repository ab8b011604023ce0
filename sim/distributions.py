"""Lifetime distributions parameterised by their mean, with analytic moments.

Tests compare samples with `mean` and `variance`; the engine only calls
`sample(rng, size)` with an explicit `numpy.random.Generator`.
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
