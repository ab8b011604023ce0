"""Stragglers: slow nodes that drag the whole synchronous job.

A straggler is a node of the job in a slow state (thermal throttling, a degraded NIC
or HBM, a noisy neighbour). Onsets arrive by superposition over the job's nodes at
`rate_per_1k_gpu_day`; with lemons, a node with a fault straggles
`lemon_rate_multiplier`× as often (thinning: candidates arrive at the faulty rate
and a healthy node keeps one in `lemon_rate_multiplier`). While stragglers are in
the job it runs 1/(1 − s) slower, s the largest slowdown among them (the job waits
for its slowest rank): a multiplicative step-time source. A straggler ends when

- the condition clears by itself (`clear_hours`, exponential), or
- a detector notices it `detect_hours` after its onset (only slowdowns of at least
  `detect_threshold`) and the job drains the node at its next checkpoint (the node
  goes to repair, a spare takes its place, the job restarts: no work is lost), or
- the node leaves the job for another reason (it failed).

The extra time of kept steps is slowdown; `straggler_hours` is the wall time with
at least one straggler in the job.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import simpy

from sim.engine.slowdown import STRAGGLERS

if TYPE_CHECKING:
    from sim.engine.cluster import Cluster
    from sim.engine.job import Job


class Stragglers:
    """Lifecycle: built with the job when the scenario has `stragglers:` → `start` runs
    the onset process; `onset` (also for tests) makes a job slot's node a straggler;
    `hours` reads the time with stragglers at the end of the replica."""

    def __init__(
        self, env: simpy.Environment, job: Job, cluster: Cluster, rng: np.random.Generator
    ):
        self.env = env
        self.job = job
        self.cluster = cluster
        self.plan = job.plan.stragglers
        self.rng = rng
        # the class index a drained straggler goes to repair under (after the failure classes)
        self.repair_class = len(job.plan.failure_classes)
        self.active: dict[int, tuple[int, float]] = {}  # slot -> (node, slowdown)
        self._since_s: float | None = None  # at least one straggler since then
        self._hours_s = 0.0

    def start(self) -> None:
        self.env.process(self._onsets())

    def _onsets(self):
        plan, job, cluster, rng = self.plan, self.job, self.cluster, self.rng
        faults = plan.attributable and job.plan.faults_matter
        multiplier = job.plan.lemon_multiplier if faults else 1.0
        rate_s = plan.rate_per_node_s * job.plan.nodes * multiplier
        varied = plan.slowdown_max > plan.slowdown
        while True:
            yield self.env.timeout(rng.exponential(1.0 / rate_s))
            if not job.running:
                return
            # the same draws for every onset, taken or not (common random numbers)
            slot = int(rng.integers(job.plan.nodes))
            keep = rng.random()
            slowdown = rng.uniform(plan.slowdown, plan.slowdown_max) if varied else plan.slowdown
            clear_s = (
                rng.exponential(plan.clear_mean_s) if math.isfinite(plan.clear_mean_s) else math.inf
            )
            if not cluster.filled[slot] or slot in self.active:
                continue
            node = int(cluster.slot_node[slot])
            if multiplier != 1.0 and not cluster.faulty[node] and keep >= 1.0 / multiplier:
                continue  # thinning: a healthy node straggles at the base rate
            self.onset(slot, slowdown, clear_s)

    def onset(self, slot: int, slowdown: float, clear_s: float = math.inf) -> None:
        """The node in job slot `slot` turns slow by `slowdown` (clearing after `clear_s`)."""
        node = int(self.cluster.slot_node[slot])
        self.active[slot] = (node, slowdown)
        self.job.ledger.stragglers += 1
        self._changed()
        plan = self.plan
        if math.isfinite(plan.detect_s) and slowdown >= plan.detect_threshold:
            self.env.timeout(plan.detect_s).callbacks.append(lambda _: self._detected(slot, node))
        if math.isfinite(clear_s):
            self.env.timeout(clear_s).callbacks.append(lambda _: self._end(slot, node))

    def _detected(self, slot: int, node: int) -> None:
        if self.active.get(slot, (None,))[0] == node and self.job.running:
            self.job.drain_at_checkpoint(slot, node, self.repair_class)

    def _end(self, slot: int, node: int) -> None:
        """The condition cleared by itself: nothing to drain any more."""
        if self.active.get(slot, (None,))[0] == node:
            del self.active[slot]
            if self.job.caught.get(slot) == (node, self.repair_class):
                del self.job.caught[slot]
            self._changed()

    def left(self, slot: int) -> None:
        """A node left the job's slot `slot` (failed, drained): a straggler there is gone."""
        if slot in self.active:
            del self.active[slot]
            self._changed()

    def _changed(self) -> None:
        now = self.env.now
        if self.active and self._since_s is None:
            self._since_s = now
        elif not self.active and self._since_s is not None:
            self._hours_s += now - self._since_s
            self._since_s = None
        worst = max((s for _, s in self.active.values()), default=0.0)
        self.job.step_time.set_factor(STRAGGLERS, 1.0 / (1.0 - worst))

    def seconds(self, now: float) -> float:
        """Wall seconds with at least one straggler in the job, up to `now`."""
        return self._hours_s + (now - self._since_s if self._since_s is not None else 0.0)
