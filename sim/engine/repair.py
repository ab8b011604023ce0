"""Nodes in repair: a calendar of their returns, and the repair pipeline that fills it.

No node in repair is a SimPy process. When a node leaves the job its whole path is drawn
at once and its return goes on the `RepairCalendar`'s heap; the calendar hands nodes back
(`on_return`) when it is advanced to the present, which the job does before every decision
it takes, so the order of returns and decisions is the one the times give. The job waits
for the calendar's next return only when it wants nodes.

The repair pipeline (`RepairShop`):

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

Technicians are a heap of the times each one is free: an escalated node waits in a queue
ordered by its arrival and takes the technician free first (first come, first served).
The queue is served only when the calendar is advanced past an arrival, so a node that
arrives earlier is never served after one that arrives later.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

from sim.engine.plan import RepairPlan
from sim.engine.streams import Draws


class RepairCalendar:
    """Lifecycle: built with the cluster; `back_at` a node's return, or `to_technician` an
    escalated node; `advance(now)` hands back, in time order, every node due by `now`."""

    def __init__(self, on_return: Callable[[int, bool], None]):
        self.on_return = on_return
        self._returns: list[tuple[float, int, int, bool]] = []  # (time, seq, node, fixed)
        # escalated nodes waiting for a technician: (arrival, seq, node, manual_s, fixed)
        self._queue: list[tuple[float, int, int, float, bool]] = []
        self._free: list[float] | None = None  # when each technician is free (a heap)
        self._seq = 0
        self.technician_wait_s = 0.0
        self.due_s = math.inf  # the earliest return or arrival: nothing to do before it
        self.returned_s = 0.0  # when the node `on_return` is handed came back

    def hire(self, technicians: int) -> None:
        self._free = [0.0] * technicians

    def back_at(self, when_s: float, node: int, fixed: bool) -> None:
        self._seq += 1
        heapq.heappush(self._returns, (when_s, self._seq, node, fixed))
        if when_s < self.due_s:
            self.due_s = when_s

    def to_technician(self, arrival_s: float, node: int, manual_s: float, fixed: bool) -> None:
        """An escalated node reaches the technicians' queue at `arrival_s`."""
        if self._free is None:
            self.back_at(arrival_s + manual_s, node, fixed)
            return
        self._seq += 1
        heapq.heappush(self._queue, (arrival_s, self._seq, node, manual_s, fixed))
        if arrival_s < self.due_s:
            self.due_s = arrival_s

    def next_s(self) -> float:
        """The next time the calendar changes: a return, or a node reaching the technicians
        (whose return is known only once they take it)."""
        returns, queue = self._returns, self._queue
        first = returns[0][0] if returns else math.inf
        if queue and queue[0][0] < first:
            return queue[0][0]
        return first

    def advance(self, now: float) -> None:
        """Serve the technicians' queue and hand back the returns, in time order, up to `now`."""
        returns, queue = self._returns, self._queue
        while True:
            if queue and queue[0][0] <= now and (not returns or queue[0][0] <= returns[0][0]):
                arrival, seq, node, manual_s, fixed = heapq.heappop(queue)
                free = self._free[0]
                start = arrival if arrival > free else free
                self.technician_wait_s += start - arrival
                heapq.heapreplace(self._free, start + manual_s)
                heapq.heappush(returns, (start + manual_s, seq, node, fixed))
            elif returns and returns[0][0] <= now:
                self.returned_s, _, node, fixed = heapq.heappop(returns)
                self.on_return(node, fixed)
            else:
                self.due_s = self.next_s()
                return

    def still_out(self) -> dict[int, float]:
        """When each node still in repair comes back, by the paths drawn (the technicians'
        queue served as `advance` would): for the incident log, at the end of a replica."""
        returns, queue = list(self._returns), list(self._queue)
        free = None if self._free is None else list(self._free)
        heapq.heapify(returns)
        heapq.heapify(queue)
        out: dict[int, float] = {}
        while queue or returns:
            if queue and (not returns or queue[0][0] <= returns[0][0]):
                arrival, seq, node, manual_s, fixed = heapq.heappop(queue)
                start = max(arrival, free[0])
                heapq.heapreplace(free, start + manual_s)
                heapq.heappush(returns, (start + manual_s, seq, node, fixed))
            else:
                when, _, node, _ = heapq.heappop(returns)
                out[node] = when
        return out


class RepairShop:
    """Lifecycle: built with the cluster; `repair(node)`, for every node that leaves for
    repair, draws the node's path and puts its return on the calendar."""

    def __init__(self, env, plan: RepairPlan, calendar: RepairCalendar, rng: Draws):
        self.env = env
        self.plan = plan
        self.calendar = calendar
        self.rng = rng
        if plan.technicians:
            calendar.hire(plan.technicians)
        self.manual_repairs: dict[int, int] = {}  # manual repairs since the last RMA, per node
        self.rmas = 0
        self.escalations = 0

    @property
    def technician_wait_s(self) -> float:
        return self.calendar.technician_wait_s

    def repair(self, node: int) -> str:
        """Draw the node's path and book its return; the path's name (the incident log's)."""
        plan, rng, now = self.plan, self.rng, self.env.now
        if self.manual_repairs.get(node, 0) >= plan.rma_after_manual_repairs:
            self.rmas += 1
            self.manual_repairs[node] = 0
            self.calendar.back_at(now + rng.exponential(plan.rma_s), node, True)
            return "rma"
        auto_end = now + rng.exponential(plan.auto_s)
        if rng.random() >= plan.escalate_prob:
            fixed = rng.random() >= plan.auto_false_fix_prob
            self.calendar.back_at(auto_end, node, fixed)
            return "auto:fixed" if fixed else "auto:false_fix"
        self.escalations += 1
        manual_s = rng.exponential(plan.manual_s)
        # a node is back in the job only after its repair: counting it now is counting it
        # before its next repair starts, as counting it at the end would
        self.manual_repairs[node] = self.manual_repairs.get(node, 0) + 1
        fixed = rng.random() >= plan.manual_false_fix_prob
        self.calendar.to_technician(auto_end, node, manual_s, fixed)
        return "auto>manual:fixed" if fixed else "auto>manual:false_fix"
