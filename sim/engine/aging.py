"""The fleet's age: a power-law trend (Crow-AMSAA) of every node class's failure rate.

A fleet fails most just after it is brought up and less as it ages: at fleet age a, every
node-attributable class fails (a / a_rated)^(β − 1) times as often as its written rate
(the rate of a fleet a_rated old; β < 1 a burn-in, β = 1 no trend). The classes' clocks
run in the fleet's operational time U, the integral of that multiplier from the run's
start, so a lifetime L drawn from the class's law (exponential, Weibull, log-normal) ends
where U has grown by L: an exponential class is the non-homogeneous Poisson process of
the power law, a class with memory ages in U (a time change, the accelerated-life model).
Both maps are closed forms, so a clock's end is stored in wall time as before. A leaf
module: it imports nothing from the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FleetAge:
    """The trend seen from a run that starts at fleet age `start_s` (seconds since the fleet
    was brought up); the classes' rates are those of a fleet `rated_s` old."""

    start_s: float
    rated_s: float
    beta: float

    @property
    def _base(self) -> float:
        return (self.start_s / self.rated_s) ** self.beta

    def multiplier(self, t_s: float) -> float:
        """The classes' rate at `t_s` after the run's start over their written rate."""
        return ((self.start_s + t_s) / self.rated_s) ** (self.beta - 1.0)

    def operational(self, t_s):
        """U(t) = ∫₀ᵗ multiplier: the operational time at wall time `t_s` since the run's start
        (a float or a numpy array)."""
        rated, beta = self.rated_s, self.beta
        return rated / beta * (((self.start_s + t_s) / rated) ** beta - self._base)

    def wall(self, u_s):
        """The wall time at which the operational time reaches `u_s` (U's inverse); infinite
        past what a float holds (a burn-in's operational time grows slowly: a lifetime can
        outlast any horizon)."""
        rated, beta = self.rated_s, self.beta
        inner = self._base + beta * u_s / rated
        if isinstance(inner, np.ndarray):
            with np.errstate(over="ignore", divide="ignore"):
                power = np.exp(np.minimum(np.log(np.maximum(inner, 0.0)) / beta, 709.0))
            return np.where(np.log(np.maximum(inner, 1e-300)) / beta > 700.0, np.inf,
                            rated * power - self.start_s)  # fmt: skip
        if inner <= 0:
            return -self.start_s
        exponent = math.log(inner) / beta
        return rated * math.exp(exponent) - self.start_s if exponent < 700.0 else math.inf

    def end(self, now_s: float, lifetime_s: float) -> float:
        """The wall time a lifetime of `lifetime_s` operational seconds, started at wall time
        `now_s`, runs out."""
        if lifetime_s == math.inf:
            return math.inf
        return self.wall(self.operational(now_s) + lifetime_s)

    def left(self, now_s: float, end_s: float) -> float:
        """The operational seconds left at `now_s` of a lifetime ending at wall time `end_s`."""
        if end_s == math.inf:
            return math.inf
        return self.operational(end_s) - self.operational(now_s)
