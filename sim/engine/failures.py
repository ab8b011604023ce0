"""Failure sources (one per failure class, over the components the job uses) and the
router that counts every failure once and hands it to whoever owns the component.

Each component slot (a GPU or node position in the job, or the job itself) has
the absolute time its current lifetime ends: drawn fresh when a node enters the
slot, renewed when the component fails, infinite while the slot is empty. One
SimPy process per class sleeps until the earliest of them (numpy argmin), so the
cost does not grow with one process per GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import simpy

from sim.engine.events import Failure
from sim.engine.ledger import Ledger
from sim.engine.plan import FailureClassPlan

if TYPE_CHECKING:  # the job imports the cluster, which imports this module
    from sim.engine.job import Job

BUFFER = 256  # lifetimes drawn per numpy call


class FailureSource:
    """Lifecycle: build (all slots empty) → `activate` the job's nodes → `start` the
    process, which strikes the job through `strike` and renews the failed component."""

    def __init__(
        self,
        env: simpy.Environment,
        failure_class: FailureClassPlan,
        nodes: int,
        gpus_per_node: int,
        rng: np.random.Generator,
        strike: Callable[[Failure], None],
    ):
        self.env = env
        self.failure_class = failure_class
        self.rng = rng
        self.strike = strike
        # components per node slot; 0 means job-wide components (the job, cables, switches)
        self.per_node = {"gpu": gpus_per_node, "node": 1}.get(failure_class.scope, 0)
        size = nodes * self.per_node if self.per_node else failure_class.components
        self.ends_s = np.full(size, math.inf)
        self._wake_s = math.inf
        self._process: simpy.Process | None = None
        self._buffer = np.empty(0)
        self._next = 0
        # lifetime scale of the node in each job slot (1/lemon multiplier while it is faulty);
        # shared with the cluster, set only for node-attributable classes when faults matter
        self.slot_scale: np.ndarray | None = None
        self._paused_at: float | None = None  # while_idle false: the job is down since then

    def start(self) -> None:
        if self.per_node == 0:
            self.ends_s[:] = self.env.now + self._draw(self.ends_s.size)
        self._process = self.env.process(self._run())

    def activate(self, node_slots: np.ndarray) -> None:
        """New nodes entered these slots: their components start fresh lifetimes."""
        if self.per_node == 0 or node_slots.size == 0:
            return
        if self.per_node == 1:
            index = node_slots
        elif node_slots.size == 1:  # the common case, one node swapped in: no broadcasting
            first = int(node_slots[0]) * self.per_node
            index = slice(first, first + self.per_node)
        else:
            index = (node_slots[:, None] * self.per_node + np.arange(self.per_node)).ravel()
        draws = self._draw(self.per_node * node_slots.size)
        if self.slot_scale is not None:
            draws = draws * np.repeat(self.slot_scale[node_slots], self.per_node)
        ends = (self.env.now if self._paused_at is None else self._paused_at) + draws
        self.ends_s[index] = ends
        if self._process is not None and ends.min() < self._wake_s:
            self._process.interrupt()  # an earlier failure than the one being waited for

    def activate_one(self, slot: int, scale: float) -> None:
        """`activate` for one node slot with a scalar lifetime scale (the swap's hot path)."""
        per_node = self.per_node
        draws = self._draw(per_node)
        base = self.env.now if self._paused_at is None else self._paused_at
        if per_node == 1:
            soonest = base + (draws[0] * scale if scale != 1.0 else draws[0])
            self.ends_s[slot] = soonest
        else:
            ends = base + (draws * scale if scale != 1.0 else draws)
            self.ends_s[slot * per_node : (slot + 1) * per_node] = ends
            soonest = ends.min()
        if self._process is not None and soonest < self._wake_s:
            self._process.interrupt()  # an earlier failure than the one being waited for

    def deactivate_one(self, slot: int) -> None:
        per_node = self.per_node
        if per_node == 1:
            self.ends_s[slot] = math.inf
        else:
            self.ends_s[slot * per_node : (slot + 1) * per_node] = math.inf

    def deactivate(self, node_slots: np.ndarray) -> None:
        """These slots are empty: nothing there can fail (a stale wake-up is skipped)."""
        if self.per_node == 0:
            return
        for slot in node_slots:
            self.ends_s[slot * self.per_node : (slot + 1) * self.per_node] = math.inf

    def pause(self) -> None:
        """The job stopped computing: a class that does not strike idle nodes stops its clocks."""
        if self._paused_at is None:
            self._paused_at = self.env.now
            if self._process is not None and not math.isinf(self._wake_s):
                self._process.interrupt()

    def resume(self) -> None:
        """The job computes again: every clock goes on from where it stopped."""
        if self._paused_at is not None:
            self.ends_s += self.env.now - self._paused_at  # inf stays inf
            self._paused_at = None
            if self._process is not None:
                self._process.interrupt()

    def _draw(self, size: int) -> np.ndarray:
        """Lifetimes from the class's stream, drawn in blocks (one numpy call per block,
        not per failure: the engine's hot path)."""
        if self._next + size > self._buffer.size:
            fresh = self.failure_class.lifetime_s.sample(self.rng, max(BUFFER, size))
            self._buffer = np.concatenate([self._buffer[self._next :], fresh])
            self._next = 0
        out = self._buffer[self._next : self._next + size]
        self._next += size
        return out

    def _run(self):
        env = self.env
        while True:
            index = int(self.ends_s.argmin())
            self._wake_s = math.inf if self._paused_at is not None else self.ends_s[index]
            try:
                if math.isinf(self._wake_s):
                    yield env.event()  # nothing in use, or paused; an interrupt wakes it
                else:
                    yield env.timeout(self._wake_s - env.now)
            except simpy.Interrupt:
                continue
            if self.ends_s[index] != self._wake_s:
                continue  # the slot was emptied or refilled meanwhile
            lifetime = self._draw(1)[0]
            if self.slot_scale is not None:
                lifetime *= self.slot_scale[index // self.per_node]
            self.ends_s[index] = env.now + lifetime
            fc = self.failure_class
            self.strike(
                Failure(
                    class_index=fc.index,
                    name=fc.name,
                    time_s=env.now,
                    nodes=(index // self.per_node,) if self.per_node else (),
                    detect_s=fc.detect_s,
                    replace=fc.replace,
                    repair_mean_s=fc.repair_mean_s,
                    scope=fc.scope,
                    component=index,
                    loses_data=fc.loses_data,
                )
            )


class FailureRouter:
    """The one door every failure passes through, from the failure sources and from tests
    that inject failures: counted once (only while the job runs), then handed to the
    owner of the struck component: the fabric for cables and switches (a leaf switch
    comes back to the job as a failure of its nodes), the storage tier, or the job."""

    def __init__(self, ledger: Ledger, job: Job):
        self.ledger = ledger
        self.job = job
        self.handlers: dict[str, Callable[[Failure], None]] = {}
        self.faults_matter = job.plan.faults_matter
        self.attributable = [fc.attributable for fc in job.plan.failure_classes]
        self.silent = [fc.silent for fc in job.plan.failure_classes]

    def register(self, scopes: tuple[str, ...], handler: Callable[[Failure], None]) -> None:
        for scope in scopes:
            self.handlers[scope] = handler

    def route(self, failure: Failure) -> None:
        if not self.job.running:
            return
        if failure.since_s is not None:  # a silent corruption found now: counted when it struck
            self.handlers.get(failure.scope, self.job.strike)(failure)
            return
        if self.silent[failure.class_index] and not self.job.holds_state:
            return  # no training state on the GPUs while the job is down: nothing to corrupt
        self.ledger.failures[failure.class_index] += 1
        if self.silent[failure.class_index]:  # nobody notices until its detection
            cluster = self.job.cluster
            node_ids = [int(cluster.slot_node[slot]) for slot in failure.nodes]

            def found(_) -> None:
                if self.job.progress.corruption_gone(failure.time_s):
                    return  # a recovery since restarted from before it: nothing left to find
                # the faulty node leaves only if it still serves where it struck
                nodes = tuple(
                    slot
                    for slot, node in zip(failure.nodes, node_ids)
                    if cluster.slot_node[slot] == node
                )
                self.route(
                    replace(
                        failure,
                        time_s=failure.time_s + failure.detect_s,
                        detect_s=0.0,
                        since_s=failure.time_s,
                        nodes=nodes,
                    )
                )

            self.job.env.timeout(failure.detect_s).callbacks.append(found)
            if self.faults_matter:
                self._count_lemon(failure)
            return
        if self.faults_matter:
            self._count_lemon(failure)
        self.handlers.get(failure.scope, self.job.strike)(failure)

    def _count_lemon(self, failure: Failure) -> None:
        if (
            self.attributable[failure.class_index]
            and failure.nodes
            and self.job.cluster.is_faulty(failure.nodes[0])
        ):
            self.ledger.failures_lemon += 1
