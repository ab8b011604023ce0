"""Failure sources: one per failure class, the clocks of the components the job uses
(the router, `sim/engine/router.py`, counts each failure and hands it on).

Each component slot (a GPU or node position in the job, or the job itself) has
the time its current lifetime ends: drawn fresh when a node enters the slot,
renewed when the component fails, infinite while the slot is empty. No source is a
SimPy process: the job's one timeout runs to the earliest of its own next event and
every class's next failure (the top of the class's heap), and it handles a failure
in line when its wait reaches it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np
import simpy

from sim.distributions import Distribution, Exponential, Weibull
from sim.engine.events import Failure
from sim.engine.plan import FailureClassPlan

BUFFER = 256  # lifetimes drawn per numpy call


def minimum_of(law: Exponential | Weibull, n: int) -> Distribution:
    """The law of the first of `n` independent lifetimes of `law` (same family, mean scaled:
    exponential by 1/n, Weibull of shape k by n^(-1/k))."""
    if isinstance(law, Exponential):
        return Exponential(law.mean / n)
    return Weibull(law.mean * n ** (-1.0 / law.shape), law.shape)


class IdleClock:
    """Compute time: wall time less the time the job was not computing. The clocks of a
    `while_idle: false` class run in it, so they stand still while the job is down (nothing
    to pause or shift: a lifetime's end in compute time stays where it is)."""

    __slots__ = ("env", "idle_s", "since")

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.idle_s = 0.0  # idle time before `since`
        self.since: float | None = None  # the job has not computed since then

    def pause(self) -> None:
        if self.since is None:
            self.since = self.env.now

    def resume(self) -> None:
        if self.since is not None:
            self.idle_s += self.env.now - self.since
            self.since = None

    def now(self) -> float:
        """The compute time now."""
        return (self.env.now if self.since is None else self.since) - self.idle_s


class FailureSource:
    """The clocks of one failure class over its components, and the failure when one runs out.

    Lifecycle: build (all slots empty) → `activate` the job's nodes → `start` (job-wide
    components) → the job asks `next_s` for the wall time of the class's next failure and,
    when its wait reaches it, calls `fire`: the component's lifetime is renewed and the
    failure goes out through `strike`. Nothing here is a SimPy process.

    Each component's lifetime end is kept in the class's time base (wall time, or compute
    time for `while_idle: false`, see `IdleClock`), in a list and in a heap whose top is
    the next failure; an entry whose end no longer matches the list (the slot was emptied
    or refilled) is stale and dropped when it reaches the top.
    """

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
        # clocks per node slot; 0 means job-wide components (the job, cables, switches)
        self.per_node = {"gpu": gpus_per_node, "node": 1}.get(failure_class.scope, 0)
        self.law = failure_class.lifetime_s
        self.gpus = 1  # components a clock stands for
        if self.per_node > 1 and isinstance(self.law, Exponential | Weibull):
            # a node's GPUs fail when the first of them does: one clock per node, whose
            # lifetime is the minimum of its GPUs' (exponential, Weibull: the same law)
            self.law, self.gpus = minimum_of(self.law, self.per_node), self.per_node
            self.per_node = 1
        size = nodes * self.per_node if self.per_node else failure_class.components
        self.ends: list[float] = [math.inf] * size
        self._heap: list[tuple[float, int]] = []
        self._stale = 0  # heap entries that no longer match `ends`
        self._buffer: list[float] = []
        self._next = 0
        # lifetime scale of the node in each job slot (1/lemon multiplier while it is faulty);
        # shared with the cluster, set only for node-attributable classes when faults matter
        self.slot_scale: np.ndarray | None = None
        # while_idle false: the clocks run in compute time (set in the build phase)
        self.idle: IdleClock | None = None

    def _now(self) -> float:
        return self.env.now if self.idle is None else self.idle.now()

    @property
    def ends_s(self) -> np.ndarray:
        """Each component's lifetime end in wall time, as if the job computed from now on."""
        ends = np.array(self.ends)
        return ends if self.idle is None else ends + self.idle.idle_s

    def start(self) -> None:
        if self.per_node == 0:
            now = self._now()
            self.ends = [now + d for d in self._draw(len(self.ends))]
            self._rebuild()

    def next_s(self) -> float:
        """The wall time of the class's next failure (inf: none, or its clocks stand still)."""
        heap, ends = self._heap, self.ends
        while heap:
            end, index = heap[0]
            if ends[index] == end:
                idle = self.idle
                if idle is None:
                    return end
                return math.inf if idle.since is not None else end + idle.idle_s
            heapq.heappop(heap)
            self._stale -= 1
        return math.inf

    def fire(self) -> None:
        """The next failure is due now (the job's wait reached `next_s`): renew the
        component's lifetime and send the failure out."""
        _, index = heapq.heappop(self._heap)
        lifetime = self._draw1()
        per_node = self.per_node
        if self.slot_scale is not None:
            lifetime *= float(self.slot_scale[index // per_node])
        end = self._now() + lifetime
        self.ends[index] = end
        heapq.heappush(self._heap, (end, index))
        fc = self.failure_class
        self.strike(
            Failure(
                class_index=fc.index,
                name=fc.name,
                time_s=self.env.now,
                nodes=(index // per_node,) if per_node else (),
                detect_s=fc.detect_s,
                replace=fc.replace,
                repair_mean_s=fc.repair_mean_s,
                scope=fc.scope,
                component=index * self.gpus,
                loses_data=fc.loses_data,
            )
        )

    def _set(self, index: int, end: float) -> None:
        if self.ends[index] != math.inf:
            self._stale += 1
        self.ends[index] = end
        heapq.heappush(self._heap, (end, index))

    def _rebuild(self) -> None:
        """A heap of the live ends only (at the start, and when stale entries outnumber them)."""
        self._heap = [(end, i) for i, end in enumerate(self.ends) if end != math.inf]
        heapq.heapify(self._heap)
        self._stale = 0

    def activate(self, node_slots: np.ndarray) -> None:
        """New nodes entered these slots: their components start fresh lifetimes."""
        if self.per_node == 0 or node_slots.size == 0:
            return
        per_node = self.per_node
        draws = np.array(self._draw(per_node * node_slots.size))
        if self.slot_scale is not None:
            draws = draws * np.repeat(self.slot_scale[node_slots], per_node)
        ends = (self._now() + draws).tolist()
        index = (node_slots[:, None] * per_node + np.arange(per_node)).ravel().tolist()
        if len(index) * 4 >= len(self.ends):  # many at once (the build): one heapify
            for i, end in zip(index, ends):
                self.ends[i] = end
            self._rebuild()
            return
        for i, end in zip(index, ends):
            self._set(i, end)
        self._compact()

    def activate_one(self, slot: int, scale: float) -> None:
        """`activate` for one node slot with a scalar lifetime scale (the swap's hot path)."""
        per_node = self.per_node
        base = self._now()
        if per_node == 1:
            lifetime = self._draw1()
            self._set(slot, base + (lifetime * scale if scale != 1.0 else lifetime))
        else:
            first = slot * per_node
            for i, lifetime in enumerate(self._draw(per_node)):
                self._set(first + i, base + (lifetime * scale if scale != 1.0 else lifetime))
        self._compact()

    def deactivate_one(self, slot: int) -> None:
        per_node = self.per_node
        ends = self.ends
        for i in range(slot * per_node, (slot + 1) * per_node):
            if ends[i] != math.inf:
                ends[i] = math.inf
                self._stale += 1

    def deactivate(self, node_slots: np.ndarray) -> None:
        """These slots are empty: nothing there can fail (their heap entries go stale)."""
        if self.per_node == 0:
            return
        for slot in node_slots.tolist():
            self.deactivate_one(slot)

    def due_before(self, wall_s: float) -> list[tuple[float, int]]:
        """(wall time, component) of the live clocks that run out before `wall_s`, in no
        order: a walk down the heap that stops at entries due later."""
        offset = 0.0 if self.idle is None else self.idle.idle_s
        limit = wall_s - offset
        heap, ends, out = self._heap, self.ends, []
        todo = [0] if heap else []
        while todo:
            i = todo.pop()
            end, index = heap[i]
            if end >= limit:
                continue
            if ends[index] == end:
                out.append((end + offset, index))
            todo.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(heap))
        return out

    def _compact(self) -> None:
        if self._stale > 64 and self._stale > len(self._heap) // 2:
            self._rebuild()

    def _draw(self, size: int) -> list[float]:
        """Lifetimes from the class's stream, drawn in blocks (one numpy call per block,
        turned into Python floats: the engine's hot path)."""
        if self._next + size > len(self._buffer):
            fresh = self.law.sample(self.rng, max(BUFFER, size))
            self._buffer = self._buffer[self._next :] + fresh.tolist()
            self._next = 0
        out = self._buffer[self._next : self._next + size]
        self._next += size
        return out

    def _draw1(self) -> float:
        if self._next >= len(self._buffer):
            self._buffer = self.law.sample(self.rng, BUFFER).tolist()
            self._next = 0
        self._next += 1
        return self._buffer[self._next - 1]
