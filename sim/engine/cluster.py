"""Nodes: the job's slots, the warm spares and the nodes in repair.

A node serves in a job slot until it fails; a replaced node leaves for repair
(exponential time with the class's mean) and rejoins the warm spares, from which
empty slots are filled. Nodes are conserved: filled + spares + in repair is constant.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.failures import FailureSource


class Cluster:
    def __init__(
        self,
        env: simpy.Environment,
        nodes: int,
        spare_nodes: int,
        repair_rngs: list[np.random.Generator],
        sources: list[FailureSource],
        on_node_returned: Callable[[], None],
    ):
        self.env = env
        self.filled = np.zeros(nodes, dtype=bool)
        self.active = 0  # == filled.sum(), kept as a count on the hot path
        self.spares = spare_nodes
        self.in_repair = 0
        self.nodes_replaced = 0
        self.repair_rngs = repair_rngs
        self.sources = sources
        self.on_node_returned = on_node_returned

    @property
    def available(self) -> int:
        """Healthy nodes the job could run on now: its own plus the warm spares."""
        return self.active + self.spares

    def fill_all(self) -> None:
        """Build phase: every slot gets a node."""
        self.filled[:] = True
        self.active = self.filled.size
        slots = np.arange(self.filled.size)
        for source in self.sources:
            source.activate(slots)

    def send_to_repair(
        self, node: int, class_index: int, repair_mean_s: float, repair_s: float | None = None
    ) -> None:
        """The node leaves its slot; it returns to the spares after `repair_s` (or a draw)."""
        if not self.filled[node]:
            return  # already out (two failures of the same node merged)
        self.filled[node] = False
        self.active -= 1
        for source in self.sources:
            source.deactivate((node,))
        self.in_repair += 1
        self.nodes_replaced += 1
        duration = (
            repair_s
            if repair_s is not None
            else self.repair_rngs[class_index].exponential(repair_mean_s)
        )
        self.env.process(self._repair(duration))

    def resize(self, nodes: int) -> None:
        """Fill empty slots from the spares, or hand healthy nodes back to them, to run on `nodes`."""
        change = nodes - self.active
        if change == 1:  # the common case: one spare swaps in (argmin: the first empty slot)
            slots = np.array([int(self.filled.argmin())])
            self.filled[slots] = True
            self.active += 1
            self.spares -= 1
            for source in self.sources:
                source.activate(slots)
        elif change > 0:
            slots = np.flatnonzero(~self.filled)[:change]
            assert slots.size == change <= self.spares, "resize beyond available nodes"
            self.filled[slots] = True
            self.active += change
            self.spares -= change
            for source in self.sources:
                source.activate(slots)
        elif change < 0:
            slots = np.flatnonzero(self.filled)[change:]
            self.filled[slots] = False
            self.active += change
            self.spares -= change
            for source in self.sources:
                source.deactivate(slots)

    def _repair(self, duration_s: float):
        yield self.env.timeout(duration_s)
        self.in_repair -= 1
        self.spares += 1
        self.on_node_returned()
