"""The repair pipeline: what happens to a node between leaving the job and coming back.

Each node in repair is a SimPy process:

    automated repair (auto_minutes) ──escalate_prob──▶ manual repair (manual_hours,
          │                                            one of `technicians`; a queue
          │                                            when all are busy)
          ▼                                                  │
    back to a pool: fixed, or still faulty                   ▼
      (auto_false_fix_prob)                         back to a pool: fixed, or still
                                                    faulty (manual_false_fix_prob)

A node manual repair has already fixed `rma_after_manual_repairs` times goes to the
vendor instead (RMA, rma_days), which always fixes it. Stage times are exponential
with the given means. Every draw comes from the replica's repair-pipeline stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import simpy

from sim.engine.plan import RepairPlan

if TYPE_CHECKING:
    from sim.engine.cluster import Cluster


class RepairShop:
    """Lifecycle: built with the cluster; `repair(node)` is started as a process for
    every node that leaves for repair and hands the node back through
    `cluster.node_repaired`."""

    def __init__(
        self,
        env: simpy.Environment,
        plan: RepairPlan,
        cluster: Cluster,
        rng: np.random.Generator,
    ):
        self.env = env
        self.plan = plan
        self.cluster = cluster
        self.rng = rng
        self.technicians = (
            simpy.Resource(env, capacity=plan.technicians) if plan.technicians else None
        )
        self.manual_repairs: dict[int, int] = {}  # manual repairs since the last RMA, per node
        self.rmas = 0
        self.escalations = 0
        self.technician_wait_s = 0.0

    def repair(self, node: int):
        plan, rng = self.plan, self.rng
        if self.manual_repairs.get(node, 0) >= plan.rma_after_manual_repairs:
            self.rmas += 1
            yield self.env.timeout(rng.exponential(plan.rma_s))
            self.manual_repairs[node] = 0
            self.cluster.node_repaired(node, fixed=True)
            return
        yield self.env.timeout(rng.exponential(plan.auto_s))
        if rng.random() >= plan.escalate_prob:
            self.cluster.node_repaired(node, fixed=rng.random() >= plan.auto_false_fix_prob)
            return
        self.escalations += 1
        if self.technicians is None:
            yield self.env.timeout(rng.exponential(plan.manual_s))
        else:
            with self.technicians.request() as turn:
                queued = self.env.now
                yield turn
                self.technician_wait_s += self.env.now - queued
                yield self.env.timeout(rng.exponential(plan.manual_s))
        self.manual_repairs[node] = self.manual_repairs.get(node, 0) + 1
        self.cluster.node_repaired(node, fixed=rng.random() >= plan.manual_false_fix_prob)
