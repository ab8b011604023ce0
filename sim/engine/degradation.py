"""How much slower a step gets while fabric parts are down: the SimPy flow model
(sim/model/fabric.py) asked once per set of failed parts, and remembered.

This is engine state (a cache per sweep point, shipped to workers inside the plan),
so it lives here and not in the pure `sim.model.perf`.
"""

from __future__ import annotations

import math

from sim.model import fabric, network, perf
from sim.model.schema import Scenario


class FabricDegradation:
    """Extra step time while inter-switch cables or spine/core switches are down.

    Built once per sweep point; the engine asks `extra_step_s(failed)` when the
    set of failed fabric parts changes. While no part a flow of the gradient
    all-reduce uses is down, nothing moves and nothing is lost; other sets
    (all their parts: reroutes may land on any survivor) run the flow model once and are cached (per
    object, so per worker chunk: no module state). A partitioned fabric costs
    an infinite extra: the job cannot step until a repair reconnects it.
    """

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.size = network.gradient_bytes_per_rank(scenario)
        laid = fabric.traffic(scenario, self.size)
        fabric_, phases = laid.fabric, laid.phases
        self.cables = [
            n for n, d in zip(fabric_.names, fabric_.directions) if d == "up" and "-" in n
        ]
        self.leaves = fabric_.tree.leaves
        spines = [f"spine{i}" for i in range(_spine_count(fabric_))]
        self.switches = (
            [f"leaf{i}" for i in range(self.leaves)]
            + spines
            + [f"core{i}" for i in range(fabric_.tree.cores)]
        )
        used_links = {fabric_.names[i] for phase in phases for path in phase.paths for i in path}
        # adaptive routing: a spread pipe uses every cable in it (and their switches)
        used_links |= {
            cable for pipe in used_links & fabric_.members.keys() for cable in fabric_.members[pipe]
        }
        self.used = {n for n in used_links if "-" in n}
        self.used |= {
            part
            for n in self.used
            for part in n.split(".")[0].split("-")
            if not part.startswith("leaf")
        }
        self.leaf_down = fabric_.tree.leaf_down
        self.rails = fabric_.rails
        self.healthy_s = fabric.simulate_collective(scenario, self.size).seconds
        self.data_parallel_s = perf.step_parts(scenario).data_parallel_s
        self._cache: dict[frozenset[str], float] = {frozenset(): 0.0}

    def nodes_under_leaf(self, leaf: int, nodes: int) -> tuple[int, ...]:
        su = leaf // self.rails
        return tuple(range(su * self.leaf_down, min(nodes, (su + 1) * self.leaf_down)))

    def extra_step_s(self, failed: frozenset[str]) -> float:
        if not failed & self.used:
            return 0.0  # nothing the all-reduce uses is down: no flow moves
        if failed not in self._cache:
            try:
                seconds = fabric.simulate_collective(
                    self.scenario, self.size, failed_switches=set(failed)
                ).seconds
            except fabric.FabricPartitioned:
                seconds = math.inf  # partitioned: no path left for some flow until a repair
            # the step model says how much of the slower traffic the schedule still hides
            self._cache[failed] = perf.extra_step_s(
                self.scenario, self.data_parallel_s + max(0.0, seconds - self.healthy_s)
            )
        return self._cache[failed]


def _spine_count(laid: fabric.Fabric) -> int:
    tree = laid.tree
    return (
        tree.spines
        if tree.tiers == 2
        else math.ceil(tree.leaves / tree.leaves_per_pod) * (tree.radix // 2)
    )
