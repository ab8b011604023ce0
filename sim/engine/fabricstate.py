"""The fabric as the job sees it: which cables and spine/core switches are down.

Link and spine/core failures do not stop the job; they change its step time
(the plan's `FabricDegradation` says by how much; it is the step time's
`degraded fabric` source) until their repair. A leaf
switch failure takes the nodes under it out of the job together, to return
when the switch is repaired; the job recovers from it like from a node failure.
A failure that partitions the fabric stops the job like a hang (detected after
the class's detect time); it restarts once a repair reconnects the fabric.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import simpy

from sim.engine.events import Failure
from sim.engine.job import Job
from sim.engine.plan import ReplicaPlan
from sim.engine.slowdown import DEGRADED_FABRIC
from sim.engine.streams import LazyStreams


class FabricState:
    def __init__(
        self,
        env: simpy.Environment,
        plan: ReplicaPlan,
        job: Job,
        repair_rngs: LazyStreams,
    ):
        assert plan.fabric is not None
        self.env = env
        self.plan = plan
        self.model = plan.fabric
        self.job = job
        self.repair_rngs = repair_rngs
        self.down: Counter[str] = Counter()

    def strike(self, failure: Failure) -> None:
        job = self.job
        duration = self.repair_rngs[failure.class_index].exponential(failure.repair_mean_s)
        if failure.scope == "switch" and failure.component < self.model.leaves:
            nodes = self.model.nodes_under_leaf(failure.component, self.plan.nodes)
            job.strike(replace(failure, nodes=nodes, repair_s=duration))
            return
        part = (self.model.cables if failure.scope == "link" else self.model.switches)[
            failure.component
        ]
        self.down[part] += 1
        self._update(failure)
        self.env.process(self._repair(part, duration))

    def _repair(self, part: str, duration_s: float):
        yield self.env.timeout(duration_s)
        self.down[part] -= 1
        if not self.down[part]:
            del self.down[part]
        self._update()

    def _update(self, cause: Failure | None = None) -> None:
        job = self.job
        extra = self.model.extra_step_s(frozenset(self.down))
        if math.isinf(extra):
            if not job.fabric_partitioned and cause is not None:
                job.fabric_partitioned = True
                job.strike(replace(cause, replace=False))
            return
        if job.fabric_partitioned:
            job.fabric_partitioned = False
            job.node_returned()  # a restart waiting for the fabric may go ahead
        job.step_time.set_extra(DEGRADED_FABRIC, extra)
