"""The job's step time: the nominal step plus named slowdown sources.

Sources that follow from the job's shape are computed from the plan: an elastic
job shrunk to fewer data-parallel replicas (the global batch is fixed, so each
step takes longer, by the step model's table), and data reads starved by a shared tier. Sources that other
processes switch on and off add seconds per step (a degraded fabric) or multiply
it (stragglers: a synchronous job waits for its slowest rank). Every
change of the step time reaches the job as one event (`StepTimeChanged`); the
extra time of kept steps is booked as slowdown.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sim.engine.plan import ReplicaPlan

SHRINK = "elastic shrink"
STARVED_READS = "starved reads"
DEGRADED_FABRIC = "degraded fabric"
STRAGGLERS = "stragglers"


class StepTime:
    """Lifecycle: built with the job; `set_extra` by the processes that own a source
    (the fabric), which calls `on_change` when the step time moves; the job asks
    `step_s` when it plans a stretch."""

    def __init__(self, plan: ReplicaPlan):
        self.plan = plan
        self.extra_s: dict[str, float] = {}  # additive sources now on, seconds per step
        self._added_s = 0.0
        self.factors: dict[str, float] = {}  # multiplicative sources now on
        self._factor = 1.0
        self.on_change: Callable[[], None] | None = None

    def set_factor(self, source: str, factor: float) -> None:
        """A source's factor on the whole step; 1 switches it off."""
        if self.factors.get(source, 1.0) == factor:
            return
        if factor != 1.0:
            self.factors[source] = factor
        else:
            self.factors.pop(source, None)
        self._factor = math.prod(self.factors.values())
        if self.on_change is not None:
            self.on_change()

    def set_extra(self, source: str, seconds: float) -> None:
        """A source's extra seconds per step; 0 switches it off."""
        if self.extra_s.get(source, 0.0) == seconds:
            return
        if seconds:
            self.extra_s[source] = seconds
        else:
            self.extra_s.pop(source, None)
        self._added_s = sum(self.extra_s.values())
        if self.on_change is not None:
            self.on_change()

    def step_s(self, replicas: int) -> float:
        """One step on `replicas` data-parallel replicas with every source now on."""
        return (self.plan.step_s_with(replicas) + self._added_s) * self._factor

    def slow_step_s(self, nodes: int, replicas: int) -> float:
        """One step while an async drain shares the tier with the data reads."""
        return (self.plan.slow_step_s(nodes, replicas) + self._added_s) * self._factor

    def breakdown(self, replicas: int) -> dict[str, float]:
        """Seconds per step each source adds to the nominal step now (for timelines, docs)."""
        plan = self.plan
        shrunk = plan.shrunk_step_s(replicas)
        return {
            SHRINK: shrunk - plan.step_s,
            STARVED_READS: plan.step_s_with(replicas) - shrunk,
            **self.extra_s,
            **{
                source: (plan.step_s_with(replicas) + self._added_s) * (factor - 1.0)
                for source, factor in self.factors.items()
            },
        }
