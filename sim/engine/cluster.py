"""Nodes with identities: which node serves in each job slot, where every other node is,
what it has been through, and how often it fails.

A node is in a job slot, a warm spare, in the cold pool, in the preemptible pool
(borrowed from other work), in repair, or retired. A node that fails leaves its slot
for repair (a flat repair time, or the pipeline of `sim/engine/repair.py`) and comes
back to the warm spares or to the pool it came from; empty slots are filled from the
warm spares (`spare_order`: the oldest, the newest or a random one), and from the pools
after their delay. A node has a lasting fault if it started as a lemon, or if a failure
of a node-attributable class left one (`fault_prob` of the class); a node with a lasting
fault fails `lemon_rate_multiplier`× as often in node-attributable classes until a true
fix. A false fix returns a node with the fault it had; on a node without one it changes
nothing. Nodes are conserved: job + spares + pools + in repair + retired is the fleet.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.events import Failure
from sim.engine.failures import FailureSource, RecurrenceSource
from sim.engine.plan import ReplicaPlan
from sim.engine.repair import RepairCalendar, RepairShop
from sim.engine.streams import LazyStreams
from sim.model.distributions import Exponential

# where a node goes back to: the owned fleet (the job's nodes and the warm spares), or a pool
OWNED, COLD, PREEMPTIBLE = 0, 1, 2


class Cluster:
    """Lifecycle: build (node ids: the job's first, then warm spares, cold pool,
    preemptible pool; lemons placed at random) → `fill_all` starts the failure clocks
    of the job's slots → `send_to_repair` / `resize` / `draw_from_pools` while the job
    runs; repaired nodes come back through `node_repaired`."""

    def __init__(
        self,
        env: simpy.Environment,
        plan: ReplicaPlan,
        repair_rngs: LazyStreams,
        sources: list[FailureSource],
        on_node_returned: Callable[[], None],
        lemon_rng: np.random.Generator | None = None,
        fault_rng: np.random.Generator | None = None,
        lasting_rng: np.random.Generator | None = None,
        spare_rng: np.random.Generator | None = None,
        rate_rng: np.random.Generator | None = None,
        refail_rng: np.random.Generator | None = None,
    ):
        self.env = env
        self.plan = plan
        nodes, spares = plan.nodes, plan.spare_nodes
        fleet = plan.fleet_nodes
        # node id in each job slot (-1: empty), and whether it is filled: Python lists, read
        # and written a slot at a time on the hot path (numpy costs ~5x a scalar access)
        self.slot_node: list[int] = [-1] * nodes
        self.filled: list[bool] = [False] * nodes
        # the empty slots, lowest first (a heap; an entry refilled since is skipped)
        self._empty: list[int] = list(range(nodes))
        self.active = 0  # == sum(filled), kept as a count on the hot path
        # the warm spares, oldest first: back from repair, a pool or a shrink at the end
        self.warm: deque[int] = deque(range(nodes, nodes + spares))
        self.spare_rng = spare_rng  # spare_order: random
        self._take_spare: Callable[[], int] = {
            "oldest": self.warm.popleft,
            "newest": self.warm.pop,
            "random": self._random_spare,
        }[plan.spare_order]
        first_pool = nodes + spares
        self.cold: deque[int] = deque(range(first_pool, first_pool + plan.pool_nodes))
        first_borrowed = first_pool + plan.pool_nodes
        self.borrowable: deque[int] = deque(range(first_borrowed, fleet))
        self.origin = np.full(fleet, OWNED, dtype=np.int8)
        self.origin[first_pool:first_borrowed] = COLD
        self.origin[first_borrowed:] = PREEMPTIBLE
        self._pools = bool(plan.pool_nodes or plan.preemptible_nodes)  # else every node is owned
        self.in_repair = 0
        self.retired = 0
        self.nodes_replaced = 0
        self.nodes_from_pool = 0
        self.preemptions = 0
        self.lemons_retired = 0
        self.repair_rngs = repair_rngs
        self.sources = sources
        self.on_node_returned = on_node_returned
        self.shop: RepairShop | None = None  # the repair pipeline, when the scenario has one
        self.calendar = RepairCalendar(self.node_repaired)  # when nodes in repair come back
        self.fault_rng = fault_rng  # misdiagnosis draws
        self.lasting_rng = lasting_rng  # whether a failure leaves a lasting fault
        # per failure class: the probability that a failure leaves its node a lasting fault
        self.fault_prob = [fc.fault_prob if fc.attributable else 0.0 for fc in plan.failure_classes]
        # lasting faults: lemons from the start, and nodes a failure left one (a false fix
        # keeps it, a true fix clears it)
        self.faulty = np.zeros(fleet, dtype=bool)
        if plan.lemon_fraction > 0 and lemon_rng is not None:
            count = round(plan.lemon_fraction * fleet)
            self.faulty[lemon_rng.choice(fleet, size=count, replace=False)] = True
        self.lemon = self.faulty.copy()
        # nodes back from a repair in this run are renewed; any other node entering the job
        # has served a while: a class with `age: in_service` draws its residual life
        self.renewed = np.zeros(fleet, dtype=bool)
        self._in_service = any(fc.in_service for fc in plan.failure_classes)
        # each node's own lifetime scale in node-attributable classes: 1 / its rate
        # multiplier, gamma-distributed with mean 1 (cluster.node_rate_cv), for good
        self.own_scale: np.ndarray | None = None
        if plan.node_rate_cv > 0 and rate_rng is not None:
            shape = 1.0 / plan.node_rate_cv**2
            # a draw of 0 (a large CV) is a node that hardly fails, never one out of use
            own = np.maximum(rate_rng.gamma(shape, 1.0 / shape, fleet), np.finfo(float).tiny)
            self.own_scale = 1.0 / own
        self.slot_scale: np.ndarray | None = None
        if plan.faults_matter:
            # lifetime scale of the node in each slot, shared with the attributable sources
            self.slot_scale = np.ones(nodes)
            for source in sources:
                if source.failure_class.attributable and source.per_node:
                    source.slot_scale = self.slot_scale
        self.node_sources = [source for source in sources if source.per_node]
        # a repair renews the class that failed (its clock was renewed when it struck) and
        # nothing else: a node leaving the job keeps what is left of its other classes'
        # lifetimes (those with memory: an exponential's fresh life is its residual) and
        # takes them back into whichever slot it enters next; they stand still meanwhile
        self.memory_sources = [
            source
            for source in self.node_sources
            if not source.superposed
            and not isinstance(source, RecurrenceSource)
            and not isinstance(source.law, Exponential)
        ]
        self.kept: dict[int, list[list[float]]] = {}  # node -> lifetimes left per memory source
        # repairs that do not hold (`refail_prob`): per class its recurrence clock, and the
        # nodes in repair whose repair will not hold
        self.recurrences: dict[int, RecurrenceSource] = {
            source.failure_class.index: source
            for source in sources
            if isinstance(source, RecurrenceSource)
        }
        self.refail_rng = refail_rng
        self.will_recur: dict[int, RecurrenceSource] = {}
        self.history: dict[int, deque[float]] = {}  # failure times per node (retirement)
        self.on_left: Callable[[int], None] | None = None  # a node left this job slot
        # pool nodes are billed while they serve in the job: since when each one has
        self._serving_since: dict[int, float] = {}
        self._pool_serving_s = 0.0
        self.incidents = None  # the incident log (sim/engine/incidents.py), when one is kept

    # ---- counts

    @property
    def spares(self) -> int:
        return len(self.warm)

    @property
    def pooled(self) -> int:
        """Nodes the pools could still lend the job (after their delays)."""
        return len(self.cold) + len(self.borrowable)

    @property
    def available(self) -> int:
        """Healthy nodes the job could run on now: its own plus the warm spares."""
        return self.active + len(self.warm)

    def conserved(self) -> bool:
        return (
            self.active + len(self.warm) + self.pooled + self.in_repair + self.retired
            == self.plan.fleet_nodes
        )

    def pool_node_seconds(self) -> float:
        """Node-seconds pool nodes (cold or preemptible) have served in the job so far."""
        now = self.env.now
        return self._pool_serving_s + sum(now - t for t in self._serving_since.values())

    def is_faulty(self, slot: int) -> bool:
        """Whether the node serving in `slot` has a fault (False for an empty slot)."""
        node = self.slot_node[slot]
        return node >= 0 and bool(self.faulty[node])

    # ---- the job's slots

    def fill_all(self) -> None:
        """Build phase: every slot gets its node."""
        size = len(self.filled)
        self.slot_node[:] = range(size)
        self.filled[:] = [True] * size
        self._empty = []
        self.active = size
        self._scale_slots(np.arange(size))
        for source in self.sources:
            source.fill_all()

    def _scale_slots(self, slots: np.ndarray) -> None:
        if self.slot_scale is not None:
            nodes = np.array([self.slot_node[slot] for slot in slots.tolist()], dtype=np.int64)
            scale = np.where(self.faulty[nodes], 1.0 / self.plan.lemon_multiplier, 1.0)
            if self.own_scale is not None:
                scale = scale * self.own_scale[nodes]
            self.slot_scale[slots] = scale

    def node_scale(self, node: int) -> float:
        """The lifetime scale of `node` in node-attributable classes: its own (node_rate_cv)
        over the lemon multiplier while it has a lasting fault."""
        scale = 1.0 / self.plan.lemon_multiplier if self.faulty[node] else 1.0
        return scale if self.own_scale is None else scale * float(self.own_scale[node])

    def _enter(self, slots: np.ndarray, node_ids: list[int]) -> None:
        if self.plan.pool_nodes or self.plan.preemptible_nodes:
            for node in node_ids:
                if self.origin[node] != OWNED:
                    self._serving_since[node] = self.env.now
        slot_node, filled = self.slot_node, self.filled
        for slot, node in zip(slots.tolist(), node_ids):
            slot_node[slot] = node
            filled[slot] = True
        self.active += slots.size
        self._scale_slots(slots)
        mid_life = ~self.renewed[node_ids] if self._in_service else None
        for source in self.sources:
            source.activate(slots, mid_life)
        if self.kept or self.will_recur:
            for slot, node in zip(slots.tolist(), node_ids):
                self._resume(slot, node)

    def _enter_one(self, slot: int, node: int) -> None:
        """`_enter` for one node with plain ints: the hot path of a swap."""
        if self._pools and self.origin[node] != OWNED:
            self._serving_since[node] = self.env.now
        self.slot_node[slot] = node
        self.filled[slot] = True
        self.active += 1
        scale = 1.0
        if self.slot_scale is not None:
            scale = self.slot_scale[slot] = self.node_scale(node)
        mid_life = self._in_service and not self.renewed[node]
        kept = self.kept.pop(node, None) if self.kept else None
        memory = self.memory_sources if kept is not None else ()
        for source in self.node_sources:
            own = scale if source.slot_scale is not None else 1.0
            if source in memory:  # back with what was left of its lives
                source.resume_one(slot, kept[memory.index(source)], own)
            else:
                source.activate_one(slot, own, mid_life)
        if self.will_recur:
            self._arm(slot, node)

    def _resume(self, slot: int, node: int) -> None:
        """After `activate` of a slot (the bulk path): the node's kept lifetimes in place of
        the fresh ones drawn, and its recurrence armed."""
        kept = self.kept.pop(node, None)
        if kept is not None:
            scale = float(self.slot_scale[slot]) if self.slot_scale is not None else 1.0
            for source, lives in zip(self.memory_sources, kept):
                source.resume_one(slot, lives, scale if source.slot_scale is not None else 1.0)
        self._arm(slot, node)

    def _arm(self, slot: int, node: int) -> None:
        """The node entering `slot` came back from a repair that did not hold: its class's
        recurrence clock starts."""
        recurrence = self.will_recur.pop(node, None)
        if recurrence is not None:
            recurrence.arm(slot)

    def _keep(self, slot: int, node: int) -> None:
        """The node in `slot` leaves: what is left of its classes' lifetimes goes with it."""
        scale = float(self.slot_scale[slot]) if self.slot_scale is not None else 1.0
        self.kept[node] = [
            source.left_one(slot, scale if source.slot_scale is not None else 1.0)
            for source in self.memory_sources
        ]

    def _leave_one(self, slot: int) -> int:
        """`_leave` for one slot with plain ints."""
        node = self.slot_node[slot]
        if self._serving_since:
            since = self._serving_since.pop(node, None)
            if since is not None:
                self._pool_serving_s += self.env.now - since
        if self.memory_sources:
            self._keep(slot, node)
        self.filled[slot] = False
        heapq.heappush(self._empty, slot)
        self.slot_node[slot] = -1
        self.active -= 1
        if self.on_left is not None:
            self.on_left(slot)
        for source in self.node_sources:
            source.deactivate_one(slot)
        return node

    def _leave(self, slots: np.ndarray) -> list[int]:
        slot_list = slots.tolist()
        node_ids = [self.slot_node[slot] for slot in slot_list]
        if self.memory_sources:
            for slot, node in zip(slot_list, node_ids):
                self._keep(slot, node)
        if self._serving_since:
            for node in node_ids:
                since = self._serving_since.pop(node, None)
                if since is not None:
                    self._pool_serving_s += self.env.now - since
        slot_node, filled = self.slot_node, self.filled
        for slot in slot_list:
            filled[slot] = False
            slot_node[slot] = -1
            heapq.heappush(self._empty, slot)
        self.active -= slots.size
        if self.on_left is not None:
            for slot in slots:
                self.on_left(int(slot))
        for source in self.sources:
            source.deactivate(slots)
        return node_ids

    def resize(self, nodes: int) -> None:
        """Fill empty slots from the warm spares, or hand healthy nodes back to them, to
        run on `nodes`."""
        change = nodes - self.active
        if change == 1:  # the common case: one spare swaps in (argmin: the first empty slot)
            self._enter_one(self._first_empty(), self._take_spare())
        elif change > 0:
            assert change <= len(self.warm), "resize beyond available nodes"
            slots = np.array([self._first_empty() for _ in range(change)], dtype=np.int64)
            self._enter(slots, [self._take_spare() for _ in range(change)])
        elif change < 0:
            self.warm.extend(self._leave(np.flatnonzero(self.filled)[change:]))

    def _first_empty(self) -> int:
        """The lowest empty slot, taken (a heap of the slots emptied, cleaned of refilled
        ones and of a slot emptied twice since it was last taken)."""
        empty, filled = self._empty, self.filled
        slot = heapq.heappop(empty)
        while filled[slot] or (empty and empty[0] == slot):
            slot = heapq.heappop(empty)
        return slot

    def _empty_slots(self) -> list[int]:
        """The empty slots, lowest first (from the heap: there are few)."""
        filled = self.filled
        return sorted({slot for slot in self._empty if not filled[slot]})

    def _random_spare(self) -> int:
        """spare_order: random: a warm spare drawn uniformly."""
        assert self.spare_rng is not None
        index = int(self.spare_rng.integers(len(self.warm)))
        node = self.warm[index]
        del self.warm[index]
        return node

    def failing_within(self, lead_s: float) -> list[tuple[int, int, int]]:
        """(slot, node, class index) of the job's nodes whose next node-attributable failure
        is due within `lead_s` (what a health check could catch)."""
        horizon = self.env.now + lead_s
        soonest: dict[int, tuple[float, int]] = {}  # slot -> (its first end, class index)
        for source in self.sources:
            if not (source.failure_class.attributable and source.per_node):
                continue
            index, per_node = source.failure_class.index, source.per_node
            for end, component in source.due_before(horizon):
                slot = component // per_node
                if end < soonest.get(slot, (horizon,))[0]:
                    soonest[slot] = (end, index)
        filled, slot_node = self.filled, self.slot_node
        return [
            (slot, int(slot_node[slot]), cls)
            for slot, (_, cls) in sorted(soonest.items())
            if filled[slot]
        ]

    # ---- pools

    def pool_delay_s(self, wanted: int) -> float:
        """How long until `wanted` nodes from the pools could join: the cold pool's host
        selection, and the preemption delay once the preemptible pool is needed too."""
        if wanted <= 0:
            return 0.0
        if wanted <= len(self.cold):
            return self.plan.host_selection_s
        if not self.borrowable:
            return self.plan.host_selection_s if self.cold else 0.0
        delay = self.plan.preemption_s
        return max(delay, self.plan.host_selection_s) if self.cold else delay

    def draw_from_pools(self, wanted: int) -> None:
        """Move up to `wanted` nodes from the cold pool, then the preemptible one, into the
        warm spares (their delay has passed)."""
        for _ in range(wanted):
            if self.cold:
                self.warm.append(self.cold.popleft())
                self.nodes_from_pool += 1
            elif self.borrowable:
                self.warm.append(self.borrowable.popleft())
                self.nodes_from_pool += 1
                self.preemptions += 1

    # ---- failures and repair

    def lasting(self, index: int) -> bool:
        """Whether a failure of class `index` comes from a lasting fault of its node: one
        draw per failure of a class with `fault_prob` > 0 (none past the classes: a drained
        straggler)."""
        if index >= len(self.fault_prob) or not self.fault_prob[index]:
            return False
        assert self.lasting_rng is not None
        return bool(self.lasting_rng.random() < self.fault_prob[index])

    def fault_stays(self, failure: Failure, slot: int) -> None:
        """A failure that does not replace its node (`replace: false`): a lasting fault
        behind it stays in the job with the node."""
        if self.filled[slot] and self.lasting(failure.class_index):
            self._mark_faulty(slot)

    def send_to_repair(self, failure: Failure, slot: int, diagnosed: bool = False) -> None:
        """The node in `slot` failed: it leaves for repair (or retirement), with a lasting
        fault if the failure came from one (it keeps one it had). With a misdiagnosis
        another node of the job goes instead and the faulty one stays, with the lasting
        fault if any (not when the node is `diagnosed` already: a health check names it)."""
        if not self.filled[slot]:
            if self.incidents is not None:
                self.incidents.merged(failure)
            return  # already out (two failures of the same node merged)
        repair = self.plan.repair
        lasting = self.lasting(failure.class_index)
        failure_node = self.slot_node[slot]
        if (
            not diagnosed
            and repair is not None
            and repair.misdiagnosis_prob > 0
            and self._attributable(failure.class_index)
            and failure.repair_s is None
            and self.active > 1
            and self.fault_rng is not None
            and self.fault_rng.random() < repair.misdiagnosis_prob
        ):
            wrong = self._other_slot(slot)
            if self.incidents is not None:
                self.incidents.stayed(failure, int(self.slot_node[slot]), "misdiagnosed")
            if lasting:
                self._mark_faulty(slot)  # the faulty node stays, and so does its fault
            slot = wrong
            lasting = False  # the node that leaves has nothing new wrong with it
        node, path = self.leave_for_repair(
            slot, lasting, failure.class_index, failure.repair_mean_s, failure.repair_s
        )
        recurrence = self.recurrences.get(failure.class_index) if self.recurrences else None
        if (
            recurrence is not None
            and path != "retired"
            and node == failure_node
            and self.refail_rng.random() < recurrence.failure_class.refail_prob
        ):
            self.will_recur[node] = recurrence
        if self.incidents is not None:
            self.incidents.left(failure, node, path)

    def _attributable(self, class_index: int) -> bool:
        """Whether a failure of the class is its node's own (past the failure classes: a
        drained straggler, a fault of its node)."""
        classes = self.plan.failure_classes
        return classes[class_index].attributable if class_index < len(classes) else True

    def leave_for_repair(
        self,
        slot: int,
        lasting: bool,
        class_index: int,
        repair_mean_s: float,
        repair_s: float | None = None,
    ) -> tuple[int, str]:
        """The node in `slot` leaves the job (a failure of the class sent it; with a
        `lasting` fault) for repair or retirement; returns (node, "repair" | "retired" | the
        repair shop's path). A known `repair_s` (a leaf switch's) brings it back with the
        repaired part, mending no fault of its own."""
        node = self._leave_one(slot)
        self.nodes_replaced += 1
        if repair_s is not None:  # back together with a repaired part (a leaf switch)
            self.in_repair += 1
            self.calendar.back_at(self.env.now + repair_s, node, False)
            return node, "repair"
        if lasting:
            self.faulty[node] = True  # it has a lasting fault until a true fix
        if self._retires(node):
            return node, "retired"
        self.in_repair += 1
        if self.shop is not None:
            return node, self.shop.repair(node)
        duration = self.repair_rngs[class_index].exponential(repair_mean_s)
        self.calendar.back_at(self.env.now + duration, node, True)
        return node, "repair"

    def _other_slot(self, slot: int) -> int:
        """A filled slot other than `slot`, drawn uniformly: the k-th filled slot for a k
        drawn among all but the last, the last one in place of `slot`."""
        assert self.fault_rng is not None
        choice = int(self.fault_rng.integers(self.active - 1))
        for empty in self._empty_slots():  # the k-th filled: k plus the empty slots below it
            if empty > choice:
                break
            choice += 1
        if choice != slot:
            return choice
        last = len(self.filled) - 1
        while not self.filled[last]:
            last -= 1
        return last

    def _mark_faulty(self, slot: int) -> None:
        """The node in `slot` has a lasting fault now: its clocks restart at the faulty
        rate."""
        node = int(self.slot_node[slot])
        if self.faulty[node] and self.slot_scale is not None:
            return
        self.faulty[node] = True
        if self.slot_scale is not None:
            slots = np.array([slot])
            self._scale_slots(slots)
            for source in self.sources:
                if source.slot_scale is not None:
                    source.activate(slots)

    def _retires(self, node: int) -> bool:
        """Retire a node that failed too often recently, unless the fleet would be left
        with fewer healthy nodes than the job needs."""
        repair = self.plan.repair
        if repair is None or not repair.retire_after_failures:
            return False
        now = self.env.now
        times = self.history.setdefault(node, deque())
        times.append(now)
        while times and times[0] < now - repair.retire_window_s:
            times.popleft()
        if len(times) < repair.retire_after_failures:
            return False
        if self.plan.fleet_nodes - self.retired - 1 < self.plan.nodes:
            return False  # the guard: never retire below what the job needs
        self.retired += 1
        self.lemons_retired += int(self.lemon[node])
        return True

    def node_repaired(self, node: int, fixed: bool) -> None:
        """A node is back from repair: a true fix cures a lasting fault (and a lemon for
        good), a false fix leaves the node as it was; it refills the warm spares first (or
        goes back to its pool)."""
        self.in_repair -= 1
        self.renewed[node] = True
        if self.incidents is not None:
            self.incidents.returned(node, self.calendar.returned_s)
        if fixed and not (self.plan.lemons_permanent and self.lemon[node]):
            self.faulty[node] = False
        origin = int(self.origin[node])
        to_spares = self.plan.repair is None or self.plan.repair.return_to == "spares"
        if origin == OWNED or (to_spares and len(self.warm) < self.plan.spare_nodes):
            self.warm.append(node)
        elif origin == COLD:
            self.cold.append(node)
        else:
            self.borrowable.append(node)
        self.on_node_returned()
