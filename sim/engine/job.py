"""The training job: its process.

Lifecycle of the job process:
    TRAIN   a stretch of compute + checkpoint cycles (one event for all of it)
    DETECT  a failure struck; further failures in the window merge into it
    REPLACE failed nodes leave for repair, spares swap in; the policy decides
            whether to wait for nodes (restart) or shrink (elastic)
    RESTART launch + checkpoint load; a failure aborts it and recovery begins again
and back to TRAIN, until the final checkpoint is durable or the horizon ends it.
Every second of wall clock is booked to exactly one ledger bucket (sim/engine/ledger.py);
what is durable, carried or lost is `Progress`'s (sim/engine/progress.py).

The timeline (when one is kept) follows the same booking: every hold is one event of
its actual length, however it ends (a failure, a wake-up, the horizon); compute is
traced by `Progress` when its work is kept or lost.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np
import simpy

from sim.engine.cluster import Cluster
from sim.engine.cycle import (
    QUICK_ALL,
    QUICK_DETECTED,
    QUICK_NONE,
    QUICK_REPLACED,
    QUICK_TAKEN,
    Cycles,
    eligible,
    run_cycles,
)
from sim.engine.events import (
    CheckpointWanted,
    Failure,
    HealthCheck,
    NodesAvailable,
    StepTimeChanged,
    StorageChanged,
)
from sim.engine.failures import FailureClocks, IdleClock
from sim.engine.ledger import Ledger, record
from sim.engine.plan import ReplicaPlan
from sim.engine.policies import POLICIES
from sim.engine.progress import Progress
from sim.engine.slowdown import StepTime
from sim.engine.stretch import Stretch


def _cancel(env: simpy.Environment, event: simpy.Event) -> None:
    """Take a scheduled event nobody waits for any more out of SimPy's queue (a heap)."""
    queue = env._queue
    for i, item in enumerate(queue):
        if item[3] is event:
            last = queue.pop()
            if i < len(queue):
                queue[i] = last
                heapq.heapify(queue)
            return


# by id(plan): (the plan, its figures by the job's nodes), shared by the plan's replicas
_SHAPES: dict[int, tuple[ReplicaPlan, dict[int, tuple]]] = {}


class HorizonReached(Exception):
    """The replica ran out of simulated time before the final checkpoint was durable."""


FINISHED = object()


class Job:
    def __init__(
        self,
        env: simpy.Environment,
        plan: ReplicaPlan,
        cluster: Cluster,
        ledger: Ledger,
        timeline: list[dict] | None = None,
    ):
        self.env = env
        self.plan = plan
        self.cluster = cluster
        self.ledger = ledger
        self.policy = POLICIES[plan.policy](plan)
        self.timeline = timeline
        self.progress = Progress(env, plan, ledger, timeline)
        self.finished = False
        self._waiting_for_nodes = False
        self._grows = self.policy.grows
        # the plan's figures by the job's nodes (pure: kept with the plan, for every replica)
        cached = _SHAPES.get(id(plan))
        if cached is None or cached[0] is not plan:
            if len(_SHAPES) > 64:
                _SHAPES.clear()
            cached = _SHAPES[id(plan)] = (plan, {})
        self._shapes: dict[int, tuple] = cached[1]
        self._loads: dict[int, float] = {}  # the checkpoint load on so many nodes (pure)
        self.step_time = StepTime(plan)
        self.step_time.on_change = self.step_time_changed
        self.fabric_partitioned = False  # set by FabricState: no restart until reconnected
        self._in_memory = False  # the job's state is on its GPUs (it trains)
        self._computing = False  # inside a stretch's wait: health checks may interrupt it
        # the failure classes' clocks (the job's waits run to their next failure) and the
        # compute time of `while_idle: false` classes (set in the build phase)
        self.clocks: FailureClocks | None = None
        self.idle: IdleClock | None = None
        # causes raised while the job itself handles a failure or advances the repair calendar
        # in line (the fabric or the tier answering a failure, a node back): taken, oldest
        # first, as if they had interrupted its next wait
        self._inbox: deque = deque()
        self._in_line = False
        self.maintenance_due = False
        self.caught: dict[int, tuple[int, int]] = {}  # slot -> (node, class) to drain
        self.health_rng: np.random.Generator | None = None  # set when health checks run
        self.health_ticks: simpy.Process | None = None  # ... and their clock
        self.process: simpy.Process | None = None
        self.router = None  # the failure router (sim/engine/router.py), set in the build phase
        # the failure cycle runs in line (sim/engine/cycle.py) for the common configuration
        self._cycles = False
        self._handed: Cycles | None = None  # where the cycle in line handed a failure over
        # the job process has started and not ended (finished or out of horizon)
        self.running = False
        # a straggler in a slot whose node left is gone (set when the scenario has stragglers)
        self.straggler_left: Callable[[int], None] | None = None
        # sync checkpoints validated with corruption possible: a corrupt one is rewritten
        self._rewrites = plan.validate and plan.corrupt_prob > 0 and plan.mode == "sync"
        # an outage may run in line (`_quick_outage`) when no failure it merges can start
        # anything but the job's own recovery: no on-call wait, no elastic growth, no fabric,
        # storage or silent class, no timeline
        self._quick = (
            timeline is None
            and plan.oncall is None
            and not self._grows
            and plan.fabric is None
            and not any(fc.silent or fc.scope == "storage" for fc in plan.failure_classes)
        )

    # ---- called by other processes

    def start(self) -> simpy.Process:
        self.process = self.env.process(self._run())
        self.running = True
        return self.process

    @property
    def holds_state(self) -> bool:
        """The job trains: its state is on the GPUs (a silent corruption can reach it)."""
        return self._in_memory

    def _notify(self, cause) -> None:
        """Hand `cause` to the job process: into its inbox while it handles a failure in line
        (a process cannot interrupt itself), otherwise as an interrupt of its wait."""
        if self._in_line:
            self._inbox.append(cause)
        else:
            self.process.interrupt(cause)

    def strike(self, failure: Failure) -> None:
        """A failure reaches the job (counted by the router, not here)."""
        if self.running:
            self._notify(failure)

    def silent_struck(self, failure: Failure) -> None:
        """A silent corruption struck the job's state (counted by the router): nobody notices
        until its detection, when it is found if it is still in the state (no recovery since
        restarted from before it), on the nodes that still serve where it struck, and goes
        back through the router to its owner."""
        cluster = self.cluster
        node_ids = [int(cluster.slot_node[slot]) for slot in failure.nodes]

        def found(_) -> None:
            if self.progress.corruption_gone(failure.time_s):
                return  # a recovery since restarted from before it: nothing left to find
            nodes = tuple(
                slot
                for slot, node in zip(failure.nodes, node_ids)
                if cluster.slot_node[slot] == node
            )
            later = dataclasses.replace(
                failure,
                time_s=failure.time_s + failure.detect_s,
                detect_s=0.0,
                since_s=failure.time_s,
                nodes=nodes,
            )
            self.router.found(later, failure)

        self.env.timeout(failure.detect_s).callbacks.append(found)

    def storage_changed(self, lost_data: bool) -> None:
        if self.process is not None and self.process.is_alive:
            self._notify(StorageChanged(self.env.now, lost_data))

    def checkpoint_wanted(self) -> None:
        """Maintenance is due: stop at the next checkpoint (nodes a health check caught are
        drained at the checkpoint the job is heading for anyway)."""
        if self.running and self._computing:
            self._notify(CheckpointWanted(self.env.now))

    def slot_left(self, slot: int) -> None:
        """The node in `slot` left the job (failed, drained, the job shrank): nothing there is
        to be drained any more, and a straggler there is gone."""
        if self.caught:
            self.caught.pop(slot, None)
        if self.straggler_left is not None:
            self.straggler_left(slot)

    def drain_at_checkpoint(self, slot: int, node: int, class_index: int) -> None:
        """A detector named the node in `slot` (a straggler): drain it at the next checkpoint."""
        if slot not in self.caught:
            self.caught[slot] = (node, class_index)
            self.checkpoint_wanted()

    def health_check(self) -> None:
        """A health check is due; it runs while the job computes (skipped while it is down)."""
        if self.running and self._computing:
            self._notify(HealthCheck(self.env.now))

    def step_time_changed(self) -> None:
        """The step time moved: a stretch under way is re-planned (from the job's own process,
        e.g. a straggler drained, the next stretch reads the new step time anyway)."""
        if self._in_line:
            self._inbox.append(StepTimeChanged(self.env.now))
        elif (
            self.process is not None
            and self.process.is_alive
            and self.env.active_process is not self.process
        ):
            self.process.interrupt(StepTimeChanged(self.env.now))

    def node_returned(self) -> None:
        """A repaired node joined the spares: wake the job only if it waits or could grow."""
        wants = self._waiting_for_nodes or (
            self.policy.grows and self.cluster.active < self.plan.nodes
        )
        if wants and self.process is not None and self.process.is_alive:
            self._notify(NodesAvailable(self.env.now))

    # ---- the process

    def _run(self):
        self._cycles = eligible(self)
        try:
            while True:
                self._in_memory = True  # the job's state is on its GPUs
                outcome = yield from self._train()
                self._in_memory = False
                if outcome is FINISHED:
                    self.finished = True
                    return
                failure = outcome
                handed, self._handed = self._handed, None
                while failure is not None:
                    stage, failures = QUICK_NONE, None
                    given, handed = handed, None
                    if given is not None and given.stage > QUICK_NONE:
                        stage, failures = given.stage, given.failures  # the cycle got so far
                    elif self._quick:  # the outage in line, as far as it can go
                        stage, failures = self._quick_outage(failure)
                        if stage == QUICK_ALL:
                            failure = failures
                            continue
                    if stage < QUICK_DETECTED:
                        failures = yield from self._detect(failure)
                        if self.plan.oncall is not None:
                            yield from self._wait_for_oncall(failures)
                    if stage < QUICK_TAKEN:
                        self._take(failures)
                    if stage < QUICK_REPLACED:
                        yield from self._refill()
                    failure = yield from self._restart()
        except HorizonReached:
            self.progress.drop()  # work not yet durable at the horizon (e.g. waiting for the tier)
            return
        finally:
            self.running = False

    def stretch(self, shape: tuple) -> Stretch:
        """The stretch the job trains next, from where its progress stands, with the plan's
        figures for its size (`shape`) at the step time now."""
        _, snapshot_s, drain_s, memory_s, _, _ = shape
        plan, progress = self.plan, self.progress
        pending = progress.pending
        step_s, slow_step_s = self.step_times(shape)
        return Stretch(
            progress.resume_step,
            plan.total_steps,
            plan.interval_steps,
            step_s,
            snapshot_s,
            drain_s,
            progress.done_steps,
            progress.snapped_s,
            pending.drain_left_s if pending else 0.0,
            progress.durable_step,
            plan.memory_every,
            memory_s,
            slow_step_s,
        )

    def step_times(self, shape: tuple) -> tuple[float, float]:
        """(the step, the step while reads share the tier with a drain) at the job's size
        (`shape`) as the step time stands now (`StepTime.step_s`, `.slow_step_s`)."""
        _, _, _, _, nominal_s, slow_s = shape
        step_time = self.step_time
        added_s, factor = step_time._added_s, step_time._factor
        return (nominal_s + added_s) * factor, (slow_s + added_s) * factor

    def _train(self):
        """Run stretches until finished (returns FINISHED) or a failure (returns it)."""
        env, plan = self.env, self.plan
        deadline = plan.horizon_s
        while True:
            started = None
            if self._cycles:  # failure cycles in line, as long as nothing else is due
                cycles = run_cycles(self)
                if cycles.failure is not None:
                    self._handed = cycles
                    return cycles.failure
                if cycles.drained:  # the end of `_stop_at_checkpoint`, from its stage
                    if cycles.stage < QUICK_REPLACED:
                        yield from self._refill()
                    failure = yield from self._restart()
                    if failure is not None:
                        return failure
                    continue
                started = cycles.started_s  # a stretch under way, or None
            nodes = self.cluster.active
            shape = self._shapes.get(nodes)
            if shape is None:  # the plan's figures for the job's size (pure: computed once)
                replicas = plan.replicas_on(nodes)
                shape = self._shapes[nodes] = (
                    replicas,
                    plan.snapshot_s(nodes),
                    plan.drain_s(nodes, replicas),
                    plan.memory_s(nodes),
                    plan.step_s_with(replicas),
                    plan.slow_step_s(nodes, replicas),
                )
            stretch = self.stretch(shape)
            t0 = env.now if started is None else started
            if self.idle is not None:
                self.idle.resume()
            # an elastic job that is short of nodes grows back at its next checkpoint, and
            # any job stops at its next checkpoint for maintenance or to drain caught nodes
            grow_at = 1 if self._stop_wanted() else None
            # with the tier down, train up to the next snapshot, then wait for the tier
            blocked_at = stretch.snapshot_start_s(1) if self.progress.tier_down() else None
            # validation finds the stretch's checkpoint j corrupt: stop there to rewrite it
            rewrite_at = self._rewrite_at(stretch) if self._rewrites else None
            replan = False
            while True:
                k = stretch.checkpoints if grow_at is None else grow_at
                if rewrite_at is not None and rewrite_at < k:
                    k = rewrite_at
                target = stretch.durable_s(k)
                if blocked_at is not None:
                    target = min(target, blocked_at)
                self._computing = True
                cause = yield from self._wait(min(t0 + target, deadline))
                self._computing = False
                if cause is not None:
                    if isinstance(cause, Failure):
                        survives = self.plan.memory_every and len(cause.nodes) == 1
                        self.progress.book(
                            stretch, stretch.position(env.now - t0), env.now - t0, memory=survives
                        )
                        return cause
                    if isinstance(cause, HealthCheck):
                        self.progress.carry(stretch, stretch.position(env.now - t0), env.now - t0)
                        failure = yield from self._run_health_check()
                        if failure is not None:
                            self.progress.drop()
                            return failure
                        replan = True
                        break
                    if isinstance(cause, StepTimeChanged | StorageChanged):
                        position = stretch.position(env.now - t0)
                        if (
                            position.snapshots == stretch.checkpoints
                            and not self.progress.tier_down()
                        ):
                            continue  # only the final drain is left: the step time no longer matters
                        self.progress.carry(stretch, position, env.now - t0)
                        if isinstance(cause, StorageChanged):
                            self.progress.storage_event(cause, running=True)
                        replan = True
                        break
                    if grow_at is None and self._stop_wanted():
                        grow_at = stretch.next_checkpoint(env.now - t0)
                    continue
                if t0 + target > deadline:
                    self.progress.book(stretch, stretch.position(env.now - t0), env.now - t0)
                    raise HorizonReached
                if blocked_at is not None and target == blocked_at:
                    self.progress.carry(stretch, stretch.position(target), target)
                    failure = yield from self._hold(
                        math.inf, "storage_wait_s", "wait for storage", wake_on=(StorageChanged,)
                    )
                    if failure is not None:
                        self.progress.drop()  # the work carried to the blocked checkpoint
                        return failure
                    replan = True  # re-plan from here
                    break
                self.progress.book(stretch, stretch.at_checkpoint(k), target)
                if k == rewrite_at:
                    failure = yield from self._rewrite_checkpoint(nodes)
                    if failure is not None:
                        return failure
                if k >= stretch.checkpoints:
                    return FINISHED
                break  # a checkpoint boundary where the elastic job grows back
            if replan:
                continue  # same interval, new step time
            if self.maintenance_due or self.caught:
                failure = yield from self._stop_at_checkpoint()
                if failure is not None:
                    return failure
                continue
            grown = self.policy.nodes_to_run(self.cluster.available)
            if grown is not None and grown > nodes:
                self.cluster.resize(grown)
                failure = yield from self._hold(plan.rescale_s, "rescale_s", "rescale", nodes=grown)
                if failure is not None:
                    return failure

    def _rewrite_at(self, stretch: Stretch) -> int | None:
        """With validation (sync checkpoints), the first of the stretch's checkpoints that the
        read-back finds corrupt: the job stops there to rewrite it."""
        written = self.ledger.checkpoints_written
        first = self.progress.first_corrupt(written + 1, written + stretch.checkpoints)
        return None if first is None else first - written

    def _rewrite_checkpoint(self, nodes: int):
        """Validation read a corrupt checkpoint back: write it again and read it back again
        (checkpoint stall, traced as training: the job waits, as for any sync checkpoint). A
        failure meanwhile leaves it corrupt: the job knows, and rolls back past it."""
        self.ledger.checkpoints_corrupt += 1
        failure = yield from self._hold(
            self.plan.snapshot_s(nodes), "checkpoint_stall_s", "train", checkpoint_rewrite=True
        )
        if failure is not None:
            self.progress.discard_newest()
        elif not self.progress.tier_down():
            self.progress.rewritten()
        elif not self.progress.durable_on_backup:
            self.progress.mark_newest_corrupt()  # the tier went down before the rewrite ended
        return failure

    def _detect(self, first: Failure):
        """Hold until the first failure is noticed; failures meanwhile merge into it."""
        failures = [first]
        remaining = max(0.0, first.time_s + first.detect_s - self.env.now)
        yield from self._hold(
            remaining, "detect_s", "detect", merge=failures.append, cause=first.name
        )
        if self.progress.from_memory and (
            len({n for f in failures for n in f.nodes}) > 1 or any(not f.nodes for f in failures)
        ):
            self.progress.drop()  # more than one node (or the job) went: the peers' copies are gone
        return failures

    def _roll_back(self, failures: list[Failure]) -> None:
        """Recoveries that restart before the newest checkpoint: a loss spike goes back
        `rollback_checkpoints`, a silent corruption to the newest checkpoint taken before it
        (only when the kept checkpoints are tracked). Applied to every failure the recovery
        handles, also those that arrive while the job is down."""
        if self.progress.kept is None:
            return
        classes = self.plan.failure_classes
        # one recovery: the deepest rollback any of its failures asks for, once
        spikes = [classes[f.class_index].rollback_checkpoints for f in failures]
        if max(spikes, default=1) > 1:
            self.progress.roll_back_checkpoints(max(spikes))
        since = [f.since_s for f in failures if f.since_s is not None]
        if since:
            self.progress.roll_back_before(min(since))

    def _wait_for_oncall(self, failures: list[Failure]):
        """A failure that needs a person waits for the on-call engineer: the response time of
        the hour and weekday it was noticed (failures meanwhile merge into it)."""
        oncall = self.plan.oncall
        classes = self.plan.failure_classes
        if not any(classes[f.class_index].needs_human for f in failures):
            return
        response = oncall.response_at(self.plan.week_start_s + self.env.now)
        yield from self._hold(response, "human_wait_s", "wait for on-call", merge=failures.append)

    def _replace(self, failures: list[Failure]):
        """Failed nodes leave for repair; spares fill in; the policy may wait for more nodes."""
        self._take(failures)
        yield from self._refill()

    def _refill(self):
        """Spares fill the empty slots; the policy may wait for more nodes (or pool nodes)."""
        while True:
            short = self.plan.nodes - self.cluster.available
            if short > 0 and self.cluster.pooled and not self.fabric_partitioned:
                yield from self._wait_for_pool(short)
                continue
            nodes = self.policy.nodes_to_run(self.cluster.available)
            if nodes is not None and not self.fabric_partitioned:
                self.cluster.resize(nodes)
                return
            # the job waits holding every healthy node it has in its slots (spares and nodes
            # back from repair included): they stay in use, and one that fails meanwhile goes
            # to repair when it strikes, so repairs overlap as they would on the floor
            self.cluster.resize(min(self.cluster.available, self.plan.nodes))
            merged: list[Failure] = []
            self._waiting_for_nodes = True
            try:
                yield from self._hold(
                    math.inf,
                    "node_wait_s",
                    "wait for nodes",
                    merge=functools.partial(self._strike_while_down, merged),
                    until_nodes=True,
                )
            finally:  # also when the horizon ends the wait
                self._waiting_for_nodes = False
            self._roll_back(merged)

    def _wait_for_pool(self, short: int):
        """Nodes from the cold pool join after host selection, borrowed ones after their
        preemption; failures meanwhile send more nodes to repair when they strike."""
        merged: list[Failure] = []
        yield from self._hold(
            self.cluster.pool_delay_s(short),
            "node_wait_s",
            "wait for pool nodes",
            merge=functools.partial(self._strike_while_down, merged),
        )
        self.cluster.draw_from_pools(self.plan.nodes - self.cluster.available)
        self._roll_back(merged)

    def _take(self, failures: list[Failure]) -> None:
        """Failures the recovery handles (also those that arrived while the job was down):
        roll back as far as they ask, and send their failed nodes to repair."""
        self._roll_back(failures)
        for failure in failures:
            self._send_to_repair(failure)

    def _strike_while_down(self, merged: list[Failure], failure: Failure) -> None:
        """A failure while the job waits for nodes: its node goes to repair when it strikes
        (repairs overlap as on the floor); its rollback joins the wait's, applied once when
        the wait ends (one recovery rolls back once)."""
        merged.append(failure)
        self._send_to_repair(failure)

    def _send_to_repair(self, failure: Failure) -> None:
        if failure.replace:
            caught = self.caught
            for slot in failure.nodes:
                if caught:
                    caught.pop(slot, None)
                self.cluster.send_to_repair(failure, slot)
        else:  # the node stays in the job, with a lasting fault if the failure left one
            for slot in failure.nodes:
                self.cluster.fault_stays(failure, slot)

    # ---- planned stops: maintenance, draining caught nodes, health checks

    def _stop_wanted(self) -> bool:
        return self.maintenance_due or bool(self.caught) or self._can_grow()

    def _stop_at_checkpoint(self):
        """At a checkpoint: maintenance stops the job for its duration; nodes a health check
        caught leave for repair and spares replace them; then the job restarts (no work is
        lost: it resumes from the checkpoint just written)."""
        merged: list[Failure] = []
        if self.maintenance_due:
            self.maintenance_due = False
            # nodes that fail during the window go to repair when it ends
            yield from self._hold(
                self.plan.maintenance.duration_s,
                "maintenance_s",
                "maintenance",
                merge=merged.append,
            )
        self.drain_caught()
        yield from self._replace(merged)
        return (yield from self._restart())

    def drain_caught(self) -> None:
        """At a checkpoint: the nodes a health check (or a detector) caught, still in their
        slots, leave for repair (the failure cycle in line, sim/engine/cycle.py, calls it
        too)."""
        drains = [
            (slot, cls)
            for slot, (node, cls) in self.caught.items()
            if self.cluster.filled[slot] and self.cluster.slot_node[slot] == node
        ]
        self.caught.clear()
        classes = self.plan.failure_classes
        for slot, cls in drains:
            if cls < len(classes):
                name, repair_mean_s = classes[cls].name, classes[cls].repair_mean_s
            else:  # a straggler (after the failure classes)
                name, repair_mean_s = "straggler", self.plan.stragglers.repair_mean_s
            drained = Failure(cls, name, self.env.now, (slot,), 0.0, True, repair_mean_s)
            # the check named the node: no misdiagnosis
            self.cluster.send_to_repair(drained, slot, diagnosed=True)
        self.ledger.nodes_drained += len(drains)

    def _run_health_check(self):
        """The check costs the job `cost_minutes`; it catches, with `catch_prob`, each node
        whose next node-attributable failure would strike within `lead_hours`."""
        self.check_nodes()
        return (
            yield from self._hold(self.plan.health_checks.cost_s, "health_check_s", "health check")
        )

    def check_nodes(self) -> None:
        """A health check's look-ahead (its cost is the caller's hold): counted, and each
        node caught with `catch_prob` whose next node-attributable failure would strike
        within `lead_hours` (the failure cycle in line, sim/engine/cycle.py, calls it too)."""
        checks = self.plan.health_checks
        self.ledger.health_checks += 1
        for slot, node, cls in self.cluster.failing_within(checks.lead_s):
            # one draw per failing node, caught before or not: the draws stay in step across
            # sweep points of catch_prob (common random numbers)
            catch = self.health_rng.random() < checks.catch_prob
            if catch and slot not in self.caught:
                self.caught[slot] = (node, cls)

    def _restart(self):
        """Launch and load the last durable checkpoint; returns a failure that aborted it, or None.
        The checkpoint comes from the tier (waiting for it if it is down) or from the backup."""
        nodes = self.cluster.active
        load = 0.0
        if self.progress.from_memory:
            pass  # the state comes back from the peers' RAM: no load from the tier
        elif self.progress.durable_step > 0 and self.progress.durable_on_backup:
            load = self.plan.backup_restore_s
            self.ledger.restores_from_backup += 1
        elif self.progress.durable_step > 0:
            while self.progress.tier_down():
                failure = yield from self._hold(
                    math.inf, "storage_wait_s", "wait for storage", wake_on=(StorageChanged,)
                )
                if failure is not None:
                    return failure
                if (
                    self.progress.durable_on_backup
                ):  # the outage destroyed the tier's copy meanwhile
                    return (yield from self._restart())
            while self.progress.durable_step > 0 and self.progress.newest_corrupt():
                # the load fails after reading it: fall back to the previous kept checkpoint
                failure = yield from self._hold(
                    self._load_s(nodes), "checkpoint_load_s", "load corrupt checkpoint"
                )
                if failure is not None:
                    return failure
                if self.progress.durable_on_backup or not self.progress.newest_corrupt():
                    # the tier lost its data during the load: its checkpoints (the corrupt one
                    # too) are gone, the restart starts over from the fallback
                    return (yield from self._restart())
                self.progress.fall_back()
            if self.progress.durable_step > 0:
                load = self._load_s(nodes)
        duration = self.plan.restart_s + load
        self.progress.from_memory = False
        self.ledger.restarts += 1
        return (
            yield from self._hold(
                duration,
                "restart_s",
                "restart",
                load_after_s=self.plan.restart_s,
                nodes=nodes,
                from_step=self.progress.durable_step,
            )
        )

    def _load_s(self, nodes: int) -> float:
        """The checkpoint load from the tier on `nodes` nodes (the plan's, kept per size)."""
        load = self._loads.get(nodes)
        if load is None:
            load = self._loads[nodes] = self.plan.load_s(nodes)
        return load

    def _quick_outage(self, first: Failure):
        """Detection, replacement and restart computed in line, without a SimPy event, while
        nothing else is due in SimPy's queue before each part ends: the same steps, in the
        same order, as `_detect`, `_take`, `_refill` and `_restart` with their holds (which
        would move the clock without an event too), booking the same pieces. Returns how far
        it got: (QUICK_ALL, the failure that aborted the restart or None), or a stage and
        the failures detected, for the general path to go on from. (The failure cycle in
        line, sim/engine/cycle.py, calls it too.)"""
        env, inbox, plan, ledger = self.env, self._inbox, self.plan, self.ledger
        queue = env._queue
        now = env._now
        deadline = plan.horizon_s
        # detection: failures meanwhile merge into it
        end = now + max(0.0, first.time_s + first.detect_s - now)
        if inbox or end > deadline or (queue and queue[0][0] <= end):
            return QUICK_NONE, None
        if self.idle is not None:
            self.idle.pause()
        failures = [first]
        self._quick_down(end, failures)
        began, now = now, env._now
        ledger.detect_s += now - began
        progress = self.progress
        if progress.from_memory and (
            len({n for f in failures for n in f.nodes}) > 1 or any(not f.nodes for f in failures)
        ):
            progress.drop()  # more than one node (or the job) went: the peers' copies are gone
        return self._quick_back(failures)

    def _quick_back(self, failures: list[Failure]):
        """`_take`, `_refill` and `_restart` in line (the end of `_quick_outage`, and of a
        stop to drain caught nodes in the failure cycle in line): (QUICK_ALL, the failure
        that aborted the restart or None), or the stage it got to (QUICK_TAKEN: the nodes
        sent to repair; QUICK_REPLACED: the job refilled) and `failures`."""
        env, inbox, plan, ledger, progress = (
            self.env, self._inbox, self.plan, self.ledger, self.progress
        )  # fmt: skip
        queue = env._queue
        deadline = plan.horizon_s
        now = env._now
        # replacement
        self._take(failures)
        cluster = self.cluster
        available = cluster.available
        if (plan.nodes > available and cluster.pooled) or self.fabric_partitioned:
            return QUICK_TAKEN, failures
        nodes = self.policy.nodes_to_run(available)
        if nodes is None:
            return QUICK_TAKEN, failures
        cluster.resize(nodes)
        # restart: launch and the checkpoint load
        nodes = cluster.active
        load = 0.0
        backup = False
        if progress.from_memory:
            pass
        elif progress.durable_step > 0 and progress.durable_on_backup:
            load = plan.backup_restore_s
            backup = True
        elif progress.durable_step > 0:
            if progress.tier_down() or progress.newest_corrupt():
                return QUICK_REPLACED, failures
            load = self._load_s(nodes)
        end = now + (plan.restart_s + load)
        if inbox or end > deadline or (queue and queue[0][0] <= end):
            return QUICK_REPLACED, failures
        if backup:
            ledger.restores_from_backup += 1
        progress.from_memory = False
        ledger.restarts += 1
        if self.idle is not None:
            self.idle.pause()
        abort = self._quick_down(end, None)
        began, now = now, env._now
        took = now - began
        if took > plan.restart_s:
            ledger.checkpoint_load_s += took - plan.restart_s
            took = plan.restart_s
        ledger.restart_s += took
        return QUICK_ALL, abort

    def _quick_down(self, end: float, merge: list[Failure] | None) -> Failure | None:
        """`_wait` for `_quick_outage`, while the job is down until `end` (nothing else is
        due before it): the clock moves in line to each failure before `end` (handled in
        line, as `_wait` handles it) and to `end`, the time booked to downtime as each cause
        comes; a failure meanwhile merges into `merge`, or, without one, ends the wait and
        is returned."""
        env = self.env
        now = env._now
        if now >= end:
            return None
        ledger, inbox = self.ledger, self._inbox
        calendar, clocks = self.cluster.calendar, self.clocks
        was, self._in_line = self._in_line, True  # what the failures raise: into the inbox
        try:
            while now < end:
                start = now
                while True:  # to the next cause, or to `end`
                    if inbox:
                        cause = inbox.popleft()
                        break
                    wake, due = clocks.next()
                    if wake >= end:
                        wake, due = end, None
                    now = env._now
                    now = env._now = now + max(0.0, wake - now)
                    if calendar.due_s <= now:  # before any decision: the nodes back by now
                        calendar.advance(now)
                    if due is not None:
                        due.fire()
                    elif not inbox:
                        cause = None
                        break
                now = env._now
                ledger.downtime_s = ledger.downtime_s + now - start
                if isinstance(cause, Failure):
                    if merge is None:
                        return cause
                    merge.append(cause)
            return None
        finally:
            self._in_line = was

    def _hold(
        self,
        seconds: float,
        part: str,
        name: str,
        merge=None,
        until_nodes: bool = False,
        wake_on: tuple = (),
        load_after_s: float | None = None,
        **args,
    ):
        """Let `seconds` of wall clock pass, booked to downtime and to its `part` (a ledger
        attribute of DOWNTIME_PARTS; a restart's time past `load_after_s` is the checkpoint
        load), traced as `name` (with `args`).

        A failure ends the hold and is returned, unless `merge` takes it. With
        `until_nodes`, a node returning from repair ends the hold too. Reaching
        the horizon raises HorizonReached. However it ends, the timeline gets one
        event of the time it actually took.
        """
        env = self.env
        began = first = env.now
        stall = part == "checkpoint_stall_s"  # a checkpoint's rewrite: training, not downtime
        try:
            if not stall and self.idle is not None:
                self.idle.pause()
            end = env.now + seconds
            deadline = self.plan.horizon_s
            while env.now < end:
                start = env.now
                cause = yield from self._wait(min(end, deadline))
                if cause is not None:
                    if stall:
                        self.ledger.checkpoint_stall_s += env.now - start
                    else:
                        self.ledger.downtime_s = self.ledger.downtime_s + env.now - start
                    if isinstance(cause, Failure):
                        if merge is None:
                            return cause
                        merge(cause)
                    elif isinstance(cause, StorageChanged):
                        if stall and self.timeline is not None:
                            # trace the rewrite so far before the tier's loss takes work back
                            record(self.timeline, name, began, env.now - began, **args)
                            began = env.now
                        self.progress.storage_event(cause, running=self._in_memory)
                        if StorageChanged in wake_on and not self.progress.tier_down():
                            return None
                        if stall and self.progress.tier_down():
                            return None  # the tier went down: the rewrite is abandoned
                    elif until_nodes and isinstance(cause, NodesAvailable):
                        return None
                    continue
                if stall:
                    self.ledger.checkpoint_stall_s += env.now - start
                else:
                    self.ledger.downtime_s = self.ledger.downtime_s + env.now - start
                if env.now >= deadline and end > deadline:
                    raise HorizonReached
            return None
        finally:
            took = env.now - began
            ledger = self.ledger
            if load_after_s is not None and took > load_after_s:
                ledger.checkpoint_load_s += took - load_after_s
                took = load_after_s
            if not stall:
                setattr(ledger, part, getattr(ledger, part) + took)
            if self.timeline is not None and (env.now > began or began == first):
                record(self.timeline, name, began, env.now - began, **args)

    def _wait(self, until: float):
        """Wait until wall time `until` (returns None), unless a cause ends the wait first
        (returned): a failure whose clock runs out earlier, handled in line (routed; what it
        raises comes back through the inbox), or an interrupt from another process.

        One timeout at a time, to the earlier of `until` and the next failure of any class;
        an interrupted one is taken out of SimPy's queue, which so holds only live events."""
        env, inbox, calendar = self.env, self._inbox, self.cluster.calendar
        while True:
            if inbox:
                return inbox.popleft()
            wake, due = self.clocks.next()
            if wake >= until:
                wake, due = until, None
            if self._waiting_for_nodes or (
                self._grows and self.cluster.active < self.plan.nodes
            ):  # a node back ends a wait for nodes, or lets an elastic job grow
                at = calendar.next_s()
                if at < wake:
                    wake, due = at, calendar
            now = env._now
            queue = env._queue
            if wake < math.inf and (not queue or queue[0][0] > wake):
                # nothing else is due before the wake: no other process could act meanwhile,
                # so the clock moves there without an event (as the timeout would move it)
                env._now = now + max(0.0, wake - now)
            else:
                timeout = env.timeout(max(0.0, wake - now))
                try:
                    yield timeout
                except simpy.Interrupt as interrupt:
                    _cancel(env, timeout)
                    self._in_line = True
                    try:
                        calendar.advance(env.now)
                    finally:
                        self._in_line = False
                    inbox.append(interrupt.cause)
                    return inbox.popleft()
            self._in_line = True
            try:
                if calendar.due_s <= env.now:  # before any decision: the nodes back by now
                    calendar.advance(env.now)
                if due is not None and due is not calendar:
                    due.fire()
            finally:
                self._in_line = False
            if due is None and not inbox:
                return None

    def _can_grow(self) -> bool:
        if not self.policy.grows or self.cluster.active >= self.plan.nodes:
            return False
        grown = self.policy.nodes_to_run(self.cluster.available)
        return grown is not None and grown > self.cluster.active
