"""Failure sources: one per failure class, the clocks of the components the job uses
(the router, `sim/engine/router.py`, counts each failure and hands it on).

Each component slot (a GPU or node position in the job, or the job itself) has
the time its current lifetime ends: drawn fresh when a node enters the slot,
renewed when the component fails, infinite while the slot is empty. No source is a
SimPy process: the job's one timeout runs to the earliest of its own next event and
the next failure of any class (`FailureClocks`: the top of a heap of every class's
clocks), and it handles a failure in line when its wait reaches it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.aging import FleetAge
from sim.engine.events import Failure
from sim.engine.plan import FailureClassPlan
from sim.model.distributions import Distribution, Exponential, Weibull

BUFFER = 256  # lifetimes drawn per numpy call
# exponential classes as one superposed clock each (`SuperposedSource`); off: a clock per
# component for every class (tests compare the two in distribution)
SUPERPOSE = True
CHUNK = 64  # clocks started together that are sorted at a time (the rest wait unsorted)
# the fields of a Failure that `FailureSource.fire` sets itself (the rest from a template)
FIRED = frozenset({"time_s", "nodes", "component"})


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


class ClockBase:
    """The clocks of one time base: a heap of (end, source position, component), and the
    clocks started together at the build kept as numpy arrays, of which only the earliest
    `CHUNK` at a time are sorted into a run of Python values (no heap entry per clock until
    it is renewed, no sort of them all: cheap for short replicas). Every clock left in the
    reserve ends no earlier than the run's last."""

    __slots__ = ("heap", "run_end", "run_pos", "run_idx", "at", "pending", "reserve")

    def __init__(self):
        self.heap: list[tuple[float, int, int]] = []
        self.run_end: list[float] = []
        self.run_pos: list[int] = []
        self.run_idx: list[int] = []
        self.at = 0  # the run's head
        self.pending: list[tuple[np.ndarray, int, np.ndarray]] = []  # (ends, position, index)
        self.reserve: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def settle(self) -> None:
        """The earliest `CHUNK` of the clocks started in bulk, the reserve and what is left of
        the run, sorted into the run; the others into the reserve."""
        at = self.at
        ends = [np.asarray(self.run_end[at:]), *(e for e, _, _ in self.pending)]
        pos = [np.asarray(self.run_pos[at:], dtype=np.int64)]
        pos += [np.full(len(e), p, dtype=np.int64) for e, p, _ in self.pending]
        idx = [np.asarray(self.run_idx[at:], dtype=np.int64), *(i for _, _, i in self.pending)]
        if self.reserve is not None:
            ends.append(self.reserve[0])
            pos.append(self.reserve[1])
            idx.append(self.reserve[2])
        ends, pos, idx = np.concatenate(ends), np.concatenate(pos), np.concatenate(idx)
        if len(ends) > CHUNK:
            part = np.argpartition(ends, CHUNK - 1)
            first, rest = part[:CHUNK], part[CHUNK:]
            first = first[np.argsort(ends[first], kind="stable")]
            self.reserve = (ends[rest], pos[rest], idx[rest])
        else:
            first = np.argsort(ends, kind="stable")
            self.reserve = None
        self.run_end = ends[first].tolist()
        self.run_pos = pos[first].tolist()
        self.run_idx = idx[first].tolist()
        self.at = 0
        self.pending = []

    def entries(self) -> int:
        reserve = 0 if self.reserve is None else len(self.reserve[0])
        return len(self.heap) + len(self.run_end) - self.at + reserve


class FailureClocks:
    """Every class's clocks in two `ClockBase`s: one in wall time, one in compute time (the
    `while_idle: false` classes). The next failure of all classes is the earliest of their
    heads; an entry whose end no longer matches its source's list (the slot was emptied or
    refilled) is stale and dropped when it reaches a head.

    Lifecycle: built over the sources (before the cluster fills the slots); `next` for the
    job's wait, the source's `fire` when the wait reaches it (`take` pops its entry).
    """

    __slots__ = (
        "sources",
        "idle",
        "wall",
        "compute",
        "stale",
        "limit",
        "_due",
        "superposed",
        "_in_wall",
        "_in_compute",
        "heaps",
    )

    def __init__(self, sources: list[FailureSource], idle: IdleClock | None):
        self.sources = sources
        self.idle = idle
        self.wall = ClockBase()
        self.compute = ClockBase()
        self.stale = 0  # entries that no longer match their source's list
        self.limit = 64  # past this many stale entries, `compact` looks at the heaps
        self._due: tuple[ClockBase, bool] | None = None  # where `next` found its entry
        # the classes that are one clock each (`SuperposedSource`), outside the heaps
        self.superposed = [source for source in sources if source.superposed]
        self.heaps = len(self.superposed) < len(sources)  # any class with a clock per component
        for position, source in enumerate(sources):
            source.position = position
            source.clocks = self
            if not source.failure_class.while_idle:
                assert idle is not None
                source.idle = idle
                source.base = self.compute
            else:
                source.base = self.wall
        # the superposed classes by time base (`next` looks at the compute time's only while
        # the job computes)
        self._in_wall = [source for source in self.superposed if source.idle is None]
        self._in_compute = [source for source in self.superposed if source.idle is not None]

    def next(self) -> tuple[float, FailureSource | None]:
        """(wall time, source) of the next failure of any class; (inf, None) when none is
        due (no component in use, or only compute-time clocks while the job is down): the
        earliest live entry of each time base's heap in use (stale ones dropped on the way),
        the wall's, then the compute time's shifted by the idle time (`take` pops the one
        found), and of the superposed classes' clocks. (The engine's hot path: all in line,
        no call per base.)"""
        idle = self.idle
        shift = None if idle is None or idle.since is not None else idle.idle_s
        best, found = math.inf, None
        if self.heaps:
            sources = self.sources
            base = wall = self.wall
            while True:
                if base.pending:
                    base.settle()
                heap = base.heap
                while heap:
                    end, position, index = heap[0]
                    if sources[position].ends[index] == end:
                        break
                    heapq.heappop(heap)
                    self.stale -= 1
                else:
                    end = math.inf
                    position = -1
                from_run = False
                run_end, at = base.run_end, base.at
                while True:
                    while at < len(run_end):
                        first = run_end[at]
                        if sources[base.run_pos[at]].ends[base.run_idx[at]] == first:
                            base.at = at
                            if first < end:
                                end, position, from_run = first, base.run_pos[at], True
                            break
                        at += 1
                        self.stale -= 1
                    else:
                        base.at = at
                        if base.reserve is not None:
                            base.settle()  # the run is used up: the next clocks from the reserve
                            run_end, at = base.run_end, base.at
                            continue
                    break
                if base is wall:
                    best, best_position = end, position
                    self._due = (base, from_run)
                    if shift is None:
                        break
                    base = self.compute
                else:
                    if end + shift < best:
                        best, best_position = end + shift, position
                        self._due = (base, from_run)
                    break
            if best != math.inf:
                found = sources[best_position]
        for source in self._in_wall:
            if source.end < best:
                best, found = source.end, source
        if shift is not None:  # (compute time stands still while the job is down)
            for source in self._in_compute:
                end = source.end + shift
                if end < best:
                    best, found = end, source
        return best, found

    def take(self) -> int:
        """Pop the entry `next` found (its component's index; a heap's, not a superposed
        class's: that one renews itself)."""
        base, from_run = self._due
        if from_run:
            base.at += 1
            return base.run_idx[base.at - 1]
        return heapq.heappop(base.heap)[2]

    def compact(self) -> None:
        """Rebuild the heaps from the live clocks when stale entries outnumber them."""
        stale = self.stale
        if stale <= 64:
            return
        wall, compute = self.wall, self.compute
        entries = wall.entries() + compute.entries()
        if stale <= entries // 2:
            self.limit = max(64, entries // 2)
            return
        for base in (self.wall, self.compute):
            base.heap.clear()
            base.run_end, base.run_pos, base.run_idx, base.at, base.pending = [], [], [], 0, []
            base.reserve = None
        for source in self.sources:
            source.base.heap.extend(
                (end, source.position, i) for i, end in enumerate(source.ends) if end != math.inf
            )
        heapq.heapify(self.wall.heap)
        heapq.heapify(self.compute.heap)
        self.stale = 0
        self.limit = 64


# what a failure class's sources share, replica after replica: (the class, clocks per node
# slot, the law of a clock, components a clock stands for, the Failure template), by the
# class's id and the GPUs per node (the class is kept: its id stays its own)
_SHAPES: dict[tuple[int, int], tuple] = {}


def _shape(fc: FailureClassPlan, gpus_per_node: int) -> tuple:
    # clocks per node slot; 0 means job-wide components (the job, cables, switches)
    per_node = {"gpu": gpus_per_node, "node": 1}.get(fc.scope, 0)
    law, gpus = fc.lifetime_s, 1
    if per_node > 1 and isinstance(law, Exponential | Weibull):
        # a node's GPUs fail when the first of them does: one clock per node, whose
        # lifetime is the minimum of its GPUs' (exponential, Weibull: the same law)
        law, gpus = minimum_of(law, per_node), per_node
        per_node = 1
    # the fields every failure of the class shares (a Failure is built from them in `fire`
    # without the frozen dataclass's per-field __init__: the hot path)
    template = {
        "class_index": fc.index,
        "name": fc.name,
        "detect_s": fc.detect_s,
        "replace": fc.replace,
        "repair_mean_s": fc.repair_mean_s,
        "scope": fc.scope,
        "repair_s": None,
        "loses_data": fc.loses_data,
        "since_s": None,
    }
    assert template.keys() | FIRED == Failure.__dataclass_fields__.keys()
    if len(_SHAPES) > 256:
        _SHAPES.clear()
    shape = _SHAPES[(id(fc), gpus_per_node)] = (fc, per_node, law, gpus, template)
    return shape


class FailureSource:
    """The clocks of one failure class over its components, and the failure when one runs out.

    Lifecycle: build (all slots empty) → `FailureClocks` over all sources → `activate` the
    job's nodes → `start` (job-wide components) → the job's wait reaches the class's next
    failure (`FailureClocks.next`) and calls `fire`: the component's lifetime is renewed and
    the failure goes out through `strike`. Nothing here is a SimPy process.

    Each component's lifetime end is kept in the class's time base (wall time, or compute
    time for `while_idle: false`, see `IdleClock`) in `ends`, and in the clocks' heap of
    that time base.
    """

    superposed = False  # one clock per component (SuperposedSource: one for the class)

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
        shape = _SHAPES.get((id(failure_class), gpus_per_node))
        if shape is None or shape[0] is not failure_class:
            shape = _shape(failure_class, gpus_per_node)
        _, self.per_node, self.law, self.gpus, self._template = shape
        size = nodes * self.per_node if self.per_node else failure_class.components
        self.ends: list[float] = [math.inf] * size
        self._buffer: list[float] = []
        self._next = 0
        # lifetime scale of the node in each job slot (1/lemon multiplier while it is faulty);
        # shared with the cluster, set only for node-attributable classes when faults matter
        self.slot_scale: np.ndarray | None = None
        # set by FailureClocks: the compute time of a while_idle false class, the heap
        self.idle: IdleClock | None = None
        self.clocks: FailureClocks | None = None
        self.base: ClockBase | None = None
        self.position = 0
        # the fleet's trend (node classes of a scenario with `cluster.aging`): lifetimes run
        # in its operational time, their ends are kept in wall time (`FleetAge.end`)
        self.aging: FleetAge | None = None

    def _now(self) -> float:
        return self.env.now if self.idle is None else self.idle.now()

    def start(self) -> None:
        if self.per_node == 0:
            self._fill_from_none(None)

    def fire(self) -> None:
        """The class's next failure is due now (the job's wait reached it): renew the
        component's lifetime and send the failure out (none when a superposed class drew a
        vacant slot)."""
        now = self.env._now
        index = self.renew()
        if index >= 0:
            self.strike(self.failure(index, now))

    def renew(self) -> int:
        """The component whose failure `clocks.next` found (now) starts a new lifetime, at
        its node's scale, in the class's time base. Returns the component."""
        index = self.clocks.take()
        lifetime = self._draw1()
        if self.slot_scale is not None:
            lifetime *= float(self.slot_scale[index // self.per_node])
        idle = self.idle
        now = self.env._now if idle is None else idle.now()
        end = now + lifetime if self.aging is None else self.aging.end(now, lifetime)
        self.ends[index] = end
        heapq.heappush(self.base.heap, (end, self.position, index))
        return index

    def failure(self, index: int, time_s: float) -> Failure:
        """The failure of component `index` at `time_s` (built from the class's template
        without the frozen dataclass's per-field __init__: the hot path)."""
        per_node = self.per_node
        failure = Failure.__new__(Failure)
        fields = failure.__dict__
        fields.update(self._template)
        fields["time_s"] = time_s
        fields["nodes"] = (index // per_node,) if per_node else ()
        fields["component"] = index * self.gpus
        return failure

    def _set(self, index: int, end: float) -> None:
        if self.ends[index] != math.inf:
            self.clocks.stale += 1
        self.ends[index] = end
        heapq.heappush(self.base.heap, (end, self.position, index))

    def _fill(self, indices: np.ndarray, ends: np.ndarray) -> None:
        """Many clocks at once (the build): into the list, and into the base's sorted run."""
        own = self.ends
        if (
            len(indices) == len(own)
            and own.count(math.inf) == len(own)
            and np.array_equal(indices, np.arange(len(own)))
        ):
            self.ends = ends.tolist()  # every clock, from none
        else:
            for i, end in zip(indices.tolist(), ends.tolist()):
                if own[i] != math.inf:
                    self.clocks.stale += 1
                own[i] = end
        if len(indices) < 64:  # few: a heap costs less than numpy's sort
            heap = self.base.heap
            heap.extend(zip(ends.tolist(), [self.position] * len(indices), indices.tolist()))
            heapq.heapify(heap)
        else:
            self.base.pending.append((ends, self.position, indices))

    def activate(self, node_slots: np.ndarray, mid_life: np.ndarray | None = None) -> None:
        """New nodes entered these slots: their components start fresh lifetimes, or, for a
        class `in_service`, residual lives where `mid_life` (per slot) says the node has
        served a while and not been renewed by a repair in the run."""
        if self.per_node == 0 or node_slots.size == 0:
            return
        per_node = self.per_node
        size = per_node * node_slots.size
        draws = self._draw_array(size)
        if mid_life is not None and self.failure_class.in_service and mid_life.any():
            rows = np.repeat(mid_life, per_node)
            draws = np.array(draws, dtype=float)
            draws[rows] = self.law.residual(self.rng, int(rows.sum()))
        if self.slot_scale is not None:
            scale = self.slot_scale[node_slots]
            draws = draws * (scale if per_node == 1 else np.repeat(scale, per_node))
        ends = self._ends(self._now(), np.asarray(draws, dtype=float))
        if per_node == 1:
            index = node_slots.astype(np.int64)
        else:
            index = (node_slots[:, None] * per_node + np.arange(per_node)).ravel()
        if size >= 64 or size == len(self.ends):
            self._fill(index, ends)
        else:
            for i, end in zip(index.tolist(), ends.tolist()):
                self._set(i, end)
        if self.clocks.stale > self.clocks.limit:
            self.clocks.compact()

    def _ends(self, now: float, lifetimes: np.ndarray) -> np.ndarray:
        """Where lifetimes started now end (in the fleet's operational time when it ages)."""
        aging = self.aging
        if aging is None:
            return now + lifetimes
        return aging.wall(aging.operational(now) + lifetimes)

    def fill_all(self) -> None:
        """`activate` of every node slot at the build, when every clock is empty: the same
        draws and ends without the checks (a short replica's build is its main cost)."""
        if self.per_node:
            self._fill_from_none(self.slot_scale)

    def _fill_from_none(self, scale: np.ndarray | None) -> None:
        """Every clock, all empty before, from fresh lifetimes (scaled per node slot); for a
        class whose components are long in service (`age: in_service`), from residual
        lives of the renewal process's equilibrium."""
        per_node = self.per_node
        size = len(self.ends)
        now = self._now()
        if self.failure_class.in_service:
            draws = self.law.residual(self.rng, size)
            if scale is not None:
                draws = draws * (scale if per_node == 1 else np.repeat(scale, per_node))
            self._fill(np.arange(size), self._ends(now, draws))
            return
        if size < 64 and self.aging is None:
            draws = self._draw(size)
            if scale is not None:
                factors = scale.tolist() if per_node == 1 else np.repeat(scale, per_node).tolist()
                ends = [now + d * f for d, f in zip(draws, factors)]
            else:
                ends = [now + d for d in draws]
            self.ends = ends
            heap = self.base.heap
            heap.extend(zip(ends, [self.position] * size, range(size)))
            heapq.heapify(heap)
            return
        if self._next >= len(self._buffer):  # the first draws: straight from numpy's block
            block = self.law.sample(self.rng, max(BUFFER, size))
            draws = block[:size]
            self._buffer, self._next = block[size:].tolist(), 0
        else:
            draws = self._draw_array(size)
        if scale is not None:
            draws = draws * (scale if per_node == 1 else np.repeat(scale, per_node))
        ends = self._ends(now, np.asarray(draws, dtype=float))
        self.ends = ends.tolist()
        self.base.pending.append((ends, self.position, np.arange(size)))

    def activate_one(self, slot: int, scale: float, mid_life: bool = False) -> None:
        """`activate` for one node slot with a scalar lifetime scale (the swap's hot path);
        `mid_life`: the node has served a while and no repair in the run renewed it (a class
        `in_service` draws its residual life)."""
        per_node = self.per_node
        base = self.env._now if self.idle is None else self.idle.now()
        if mid_life and self.failure_class.in_service:
            self.resume_one(slot, self.law.residual(self.rng, per_node).tolist(), scale)
            return
        if self.aging is not None:
            self.resume_one(slot, self._draw(per_node), scale)
            return
        if per_node == 1:  # `_draw1` and `_set` in line (the swap's hot path)
            if self._next >= len(self._buffer):
                self._buffer = self.law.sample(self.rng, BUFFER).tolist()
                self._next = 0
            lifetime = self._buffer[self._next]
            self._next += 1
            end = base + (lifetime * scale if scale != 1.0 else lifetime)
            ends = self.ends
            if ends[slot] != math.inf:
                self.clocks.stale += 1
            ends[slot] = end
            heapq.heappush(self.base.heap, (end, self.position, slot))
        else:
            first = slot * per_node
            for i, lifetime in enumerate(self._draw(per_node)):
                self._set(first + i, base + (lifetime * scale if scale != 1.0 else lifetime))
        if self.clocks.stale > self.clocks.limit:
            self.clocks.compact()

    def resume_one(self, slot: int, lifetimes: list[float], scale: float) -> None:
        """The node entering `slot` has these lifetimes left (one per clock of the slot, at a
        sound node's scale, in the class's operational time): a node back from repair keeps
        the age of its classes that did not fail, and a class in service draws residuals."""
        base = self.env._now if self.idle is None else self.idle.now()
        aging, first = self.aging, slot * self.per_node
        for i, lifetime in enumerate(lifetimes):
            left = lifetime * scale
            self._set(first + i, base + left if aging is None else aging.end(base, left))
        if self.clocks.stale > self.clocks.limit:
            self.clocks.compact()

    def left_one(self, slot: int, scale: float) -> list[float]:
        """The lifetimes the node in `slot` has left (at a sound node's scale, in the class's
        operational time): what `resume_one` takes when the node enters a slot again."""
        base = self.env._now if self.idle is None else self.idle.now()
        aging, first = self.aging, slot * self.per_node
        ends = self.ends[first : first + self.per_node]
        if aging is None:
            return [(end - base) / scale for end in ends]
        return [aging.left(base, end) / scale for end in ends]

    def deactivate_one(self, slot: int) -> None:
        ends = self.ends
        if self.per_node == 1:
            if ends[slot] != math.inf:
                ends[slot] = math.inf
                self.clocks.stale += 1
            return
        per_node = self.per_node
        for i in range(slot * per_node, (slot + 1) * per_node):
            if ends[i] != math.inf:
                ends[i] = math.inf
                self.clocks.stale += 1

    def deactivate(self, node_slots: np.ndarray) -> None:
        """These slots are empty: nothing there can fail (their heap entries go stale)."""
        if self.per_node == 0:
            return
        for slot in node_slots.tolist():
            self.deactivate_one(slot)

    def due_before(self, wall_s: float) -> list[tuple[float, int]]:
        """(wall time, component) of the class's live clocks that run out before `wall_s`, in
        no order: a walk down the heap that stops at entries due later."""
        offset = 0.0 if self.idle is None else self.idle.idle_s
        limit = wall_s - offset
        base = self.base
        if base.pending:
            base.settle()
        heap, ends, position, out = base.heap, self.ends, self.position, []
        for at in range(base.at, len(base.run_end)):
            end = base.run_end[at]
            if end >= limit:
                break
            index = base.run_idx[at]
            if base.run_pos[at] == position and ends[index] == end:
                out.append((end + offset, index))
        if base.reserve is not None:
            r_end, r_pos, r_idx = base.reserve
            hits = np.flatnonzero((r_end < limit) & (r_pos == position))
            for end, index in zip(r_end[hits].tolist(), r_idx[hits].tolist()):
                if ends[index] == end:
                    out.append((end + offset, index))
        todo = [0] if heap else []
        size = len(heap)
        while todo:
            i = todo.pop()
            end, owner, index = heap[i]
            if end >= limit:
                continue
            if owner == position and ends[index] == end:
                out.append((end + offset, index))
            todo.extend(j for j in (2 * i + 1, 2 * i + 2) if j < size)
        return out

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

    def _draw_array(self, size: int) -> np.ndarray:
        """`_draw` as a numpy array (the same numbers; straight from numpy when the buffer is
        used up and the block would be this size anyway)."""
        if self._next >= len(self._buffer) and size >= BUFFER:
            return self.law.sample(self.rng, size)
        return np.array(self._draw(size))

    def _draw1(self) -> float:
        if self._next >= len(self._buffer):
            self._buffer = self.law.sample(self.rng, BUFFER).tolist()
            self._next = 0
        self._next += 1
        return self._buffer[self._next - 1]


def superposable(fc: FailureClassPlan, health_checks: bool) -> bool:
    """Whether a class's clocks can be one superposed clock: its law has no memory
    (exponential), and no health check looks ahead at which node fails next (a look-ahead
    needs each node's own clock)."""
    if not isinstance(fc.lifetime_s, Exponential):
        return False
    return not (health_checks and fc.attributable and fc.scope in ("gpu", "node"))


class SuperposedSource(FailureSource):
    """An exponential class as one clock over its components in use (Poisson superposition
    and thinning): the next failure comes when the hazard accumulated since the last one,
    at the components' summed rate, reaches a lifetime drawn from the class's law (a
    component at unit weight: its rate 1 / mean); the component that fails is drawn in
    proportion to the rates, by a uniform from the class's stream. A component's weight is
    1 / its lifetime scale (a lemon's, a node's own rate). When the components in use or
    their rates change, the hazard left stays and only the end moves: a node swapped in
    starts nothing, and nothing is drawn but one lifetime and one uniform per failure.

    A node that leaves the job leaves its slot vacant, its weight still in the sum: a
    failure drawn in a vacant slot is none (`renew` returns -1; thinning again, exact for
    the same reason), and a node that enters the slot at the same weight changes nothing.
    So the common swap (a node out, a spare in) moves no end and costs two flags.

    The components in use are kept in groups of equal weight (sound nodes and lemons: two),
    so a change and a pick cost a few steps whatever the fleet; weights that all differ (a
    node's own rate, `node_rate_cv`) are kept in a Fenwick tree instead (O(log n) a change
    and a pick). Exact in distribution for an exponential law; the per-component
    `FailureSource` keeps laws with memory (Weibull, log-normal), where age is the state."""

    superposed = True
    GROUPS = 8  # past this many distinct weights at the build, a Fenwick tree

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert self.per_node in (0, 1)  # a node's exponential GPUs are one node clock
        size = len(self.ends)
        self.ends = []  # no clock per component: `end` is the class's one
        self.weights = [0.0] * size  # 0: not in use
        self.vacant = [False] * size  # its node left; its weight is still in the sum
        self.in_use = 0
        # groups of equal weight: weight -> its components, and where each component sits
        self._groups: dict[float, list[int]] = {}
        self._where: dict[int, int] | None = None  # built when first needed (`_places`)
        self._tree: list[float] | None = None  # Fenwick tree of the weights (all differ)
        self._top = 1 << max(0, size.bit_length() - 1)  # the tree walk's first step
        self._sum = 0.0  # the summed weights in use now
        self.total = 0.0  # ... as of `since`, when the hazard left was last settled
        self.left = math.nan  # hazard left at `since` (time at unit weight); NaN: none drawn
        self.since = 0.0
        self.end = math.inf  # the next failure, in the class's time base
        self._uniforms: list[float] = []
        self._u_next = 0

    # ---- the components in use

    def _use(self, component: int, weight: float) -> None:
        old = self.weights[component]
        if old == weight:
            return
        if not old:
            self.in_use += 1
        self.weights[component] = weight
        self._sum += weight - old
        if self._tree is not None:
            self._add(component, weight - old)
        else:
            if old:
                self._leave_group(component, old)
            group = self._groups.setdefault(weight, [])
            self._places()[component] = len(group)
            group.append(component)

    def _drop(self, component: int) -> None:
        old = self.weights[component]
        if not old:
            return
        if self._tree is not None:
            self._add(component, -old)
        else:
            self._leave_group(component, old)
        self.weights[component] = 0.0
        self.in_use -= 1
        self._sum -= old

    def _leave_group(self, component: int, weight: float) -> None:
        group = self._groups[weight]
        where = self._places()
        place = where.pop(component)
        last = group.pop()
        if last != component:
            group[place] = last
            where[last] = place

    def _places(self) -> dict[int, int]:
        """Where each component in use sits in its group: built when a component first
        joins or leaves a group after the build (a replica whose swaps keep their weights
        never needs it)."""
        where = self._where
        if where is None:
            where = self._where = {
                component: place
                for group in self._groups.values()
                for place, component in enumerate(group)
            }
        return where

    def _add(self, component: int, delta: float) -> None:
        tree = self._tree
        i, size = component + 1, len(tree)
        while i < size:
            tree[i] += delta
            i += i & -i

    def _retime(self) -> None:
        """The components in use or their weights changed: the hazard accumulated until now
        at the old total is spent, what is left runs at the new total (the sum kept up to
        date as weights come and go; exactly 0 when none is in use)."""
        idle = self.idle
        now = self.env._now if idle is None else idle.now()
        total, aging = self.total, self.aging
        if total > 0.0:
            spent = now - self.since if aging is None else aging.left(self.since, now)
            left = self.left - spent * total
            self.left = left if left > 0.0 else 0.0
        elif self.left != self.left:  # NaN: the first lifetime
            self.left = self._draw1()
        self.since = now
        if not self.in_use:
            self._sum = self.total = 0.0
            self.end = math.inf
            return
        self.total = self._sum
        if aging is None:
            self.end = now + self.left / self._sum
        else:
            self.end = aging.end(now, self.left / self._sum)

    def _weight(self, slot: int) -> float:
        return 1.0 if self.slot_scale is None else 1.0 / float(self.slot_scale[slot])

    def start(self) -> None:
        if self.per_node == 0:
            self._fill_equal()

    def fill_all(self) -> None:
        if self.per_node:
            if self.slot_scale is None:
                self._fill_equal()
            else:
                self._fill_from(1.0 / self.slot_scale[: len(self.weights)])

    def _fill_equal(self) -> None:
        """Every component in use from none, all at unit weight (the build's common case)."""
        size = len(self.weights)
        members = list(range(size))
        self.weights = [1.0] * size
        self.in_use = size
        self._sum = float(size)
        self._groups[1.0] = members
        self._where = None
        self._retime()

    def _fill_from(self, weights: np.ndarray) -> None:
        """Every component in use from none, at these weights (the build: the groups or
        the tree made at once, not one component at a time)."""
        values = np.unique(weights)
        self.weights = weights.tolist()
        self.in_use = len(self.weights)
        self._sum = float(weights.sum())
        if values.size > self.GROUPS:
            tree = [0.0] + self.weights
            size = len(tree)
            for i in range(1, size):
                j = i + (i & -i)
                if j < size:
                    tree[j] += tree[i]
            self._tree = tree
        else:
            for value in values.tolist():
                self._groups[value] = np.flatnonzero(weights == value).tolist()
            self._where = None
        self._retime()

    def activate(self, node_slots: np.ndarray, mid_life: np.ndarray | None = None) -> None:
        """Nodes entered these slots, or their rates changed (no age: `mid_life` is moot)."""
        if self.per_node == 0 or node_slots.size == 0:
            return
        vacant = self.vacant
        for slot in node_slots.tolist():
            vacant[slot] = False
            self._use(slot, self._weight(slot))
        self._retime()

    def activate_one(self, slot: int, scale: float, mid_life: bool = False) -> None:
        weight = 1.0 / scale if scale != 1.0 else 1.0
        if self.vacant[slot]:
            self.vacant[slot] = False
            if self.weights[slot] == weight:
                return  # the slot's weight never left the sum: nothing moves
        self._use(slot, weight)
        self._retime()

    def deactivate_one(self, slot: int) -> None:
        """The node in `slot` left: the slot is vacant (its weight stays in the sum)."""
        if self.weights[slot]:
            self.vacant[slot] = True

    def deactivate(self, node_slots: np.ndarray) -> None:
        """The job let these slots go: their weights leave the sum."""
        if self.per_node == 0:
            return
        vacant = self.vacant
        for slot in node_slots.tolist():
            vacant[slot] = False
            self._drop(slot)
        self._retime()

    def due_before(self, wall_s: float) -> list[tuple[float, int]]:
        raise AssertionError("a superposed class has no clock per node to look ahead at")

    def _draw1(self) -> float:
        """One lifetime at unit rate, from blocks of 8, 16, ... up to BUFFER (a short replica
        draws few: one a failure, none a swap)."""
        if self._next >= len(self._buffer):
            size = min(BUFFER, 2 * len(self._buffer) or 8)
            self._buffer = self.law.sample(self.rng, size).tolist()
            self._next = 0
        self._next += 1
        return self._buffer[self._next - 1]

    # ---- a failure

    def _pick(self, u: float) -> int:
        """The component at `u` of the summed weights in use: a group by its share, then a
        member uniformly; or a Fenwick tree walk."""
        tree = self._tree
        if tree is None:
            rest = u * self.total
            chosen = None
            for weight, group in self._groups.items():
                if group:
                    chosen = (weight, group)
                    span = weight * len(group)
                    if rest < span:
                        break
                    rest -= span
            weight, group = chosen  # rounding past the last group: its last member
            return group[min(int(rest / weight), len(group) - 1)]
        rest = u * self._sum
        position, step, size = 0, self._top, len(tree)
        while step:
            nxt = position + step
            if nxt < size and tree[nxt] <= rest:
                position = nxt
                rest -= tree[nxt]
            step >>= 1
        weights = self.weights
        if position >= len(weights) or weights[position] == 0.0:
            # rounding at a boundary: the component in use nearest below, else above
            below = [c for c in range(min(position, len(weights) - 1), -1, -1) if weights[c]]
            position = below[0] if below else next(c for c in range(len(weights)) if weights[c])
        return position

    def renew(self) -> int:
        """The class's failure due now: the component struck, drawn in proportion to the
        rates; a fresh lifetime for the class. Returns the component, or -1 when the
        component drawn is a vacant slot (no failure)."""
        if self._u_next >= len(self._uniforms):  # blocks of 8, 16, ... up to BUFFER
            self._uniforms = self.rng.random(min(BUFFER, 2 * len(self._uniforms) or 8)).tolist()
            self._u_next = 0
        victim = self._pick(self._uniforms[self._u_next])
        self._u_next += 1
        idle = self.idle
        now = self.env._now if idle is None else idle.now()
        self.left = self._draw1()
        self.since = now
        if self.aging is None:
            self.end = now + self.left / self.total
        else:
            self.end = self.aging.end(now, self.left / self.total)
        return -1 if self.vacant[victim] else victim


class RecurrenceSource(FailureSource):
    """The failures of one class that come back after a repair that did not hold
    (`refail_prob`): a clock per node slot, idle (infinite) unless the node in it came back
    from such a repair, when the cluster `arm`s it with an exponential time of mean
    `refail_s`. Its failure is the class's own (its counts, its repair); it leaves the slot's
    clock idle again (the next repair draws anew whether it holds)."""

    def __init__(self, env, failure_class, nodes, gpus_per_node, rng, strike):
        super().__init__(env, failure_class, nodes, gpus_per_node, rng, strike)
        self.per_node = 1  # one recurrence a node, whatever the class's scope
        self.gpus = gpus_per_node if failure_class.scope == "gpu" else 1
        self.law = Exponential(failure_class.refail_s)
        self.ends = [math.inf] * nodes

    def start(self) -> None:
        pass

    def fill_all(self) -> None:
        pass

    def activate(self, node_slots: np.ndarray, mid_life: np.ndarray | None = None) -> None:
        pass

    def activate_one(self, slot: int, scale: float, mid_life: bool = False) -> None:
        pass

    def arm(self, slot: int) -> None:
        """The node that entered `slot` came back from a repair that did not hold."""
        self._set(slot, self.env._now + self._draw1())

    def renew(self) -> int:
        index = self.clocks.take()
        self.ends[index] = math.inf
        return index
