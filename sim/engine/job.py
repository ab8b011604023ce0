"""The training job: its process, its recovery policies and its time ledger.

Lifecycle of the job process:
    TRAIN   a stretch of compute + checkpoint cycles (one event for all of it)
    DETECT  a failure struck; further failures in the window merge into it
    REPLACE failed nodes leave for repair, spares swap in; the policy decides
            whether to wait for nodes (restart) or shrink (elastic)
    RESTART launch + checkpoint load; a failure aborts it and recovery begins again
and back to TRAIN, until the final checkpoint is durable or the horizon ends it.
Every second of wall clock is booked to exactly one ledger bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import simpy

from sim.engine.cluster import Cluster
from sim.engine.events import FabricChanged, Failure, NodesAvailable, StorageChanged
from sim.engine.plan import ReplicaPlan
from sim.engine.storage import Storage
from sim.engine.stretch import Stretch

# --------------------------------------------------------------------------- policies


class RestartPolicy:
    """Wait until the full complement of nodes is there, then restart."""

    grows = False

    def __init__(self, plan: ReplicaPlan):
        self.plan = plan

    def nodes_to_run(self, available: int) -> int | None:
        return self.plan.nodes if available >= self.plan.nodes else None


class ElasticPolicy:
    """Carry on with the whole data-parallel replicas the available nodes hold,
    if at least `elastic_min_fraction` of them remain; grow back at a checkpoint."""

    grows = True

    def __init__(self, plan: ReplicaPlan):
        self.plan = plan

    def nodes_to_run(self, available: int) -> int | None:
        replicas = self.plan.replicas_on(available)
        if replicas < self.plan.elastic_min_replicas:
            return None
        return self.plan.nodes_for(replicas)


POLICIES: dict[str, type[RestartPolicy] | type[ElasticPolicy]] = {
    "restart": RestartPolicy,
    "elastic": ElasticPolicy,
}


# --------------------------------------------------------------------------- ledger


@dataclass
class Ledger:
    """Tallies of wall-clock seconds by where they went (the time identity, docs/metrics.md)."""

    ideal_s: float = 0.0
    slowdown_s: float = 0.0
    lost_work_s: float = 0.0
    checkpoint_stall_s: float = 0.0
    downtime_s: float = 0.0
    node_wait_s: float = 0.0  # part of downtime: waiting for nodes to come back
    checkpoints_written: int = 0
    checkpoints_lost: int = 0  # snapshots or writes lost before they were durable
    restores_from_backup: int = 0
    restarts: int = 0
    failures: list[int] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return (
            self.ideal_s
            + self.slowdown_s
            + self.lost_work_s
            + self.checkpoint_stall_s
            + self.downtime_s
        )


def excess_s(total_s: float, nominal_s: float) -> float:
    """`total_s − nominal_s`, reading a difference within the float rounding of the two sums
    as zero, so that no bucket of the identity turns negative by noise (-1e-14, -0.0); a
    genuine negative, which would be a bug, still shows."""
    diff = total_s - nominal_s
    return 0.0 if abs(diff) <= 1e-12 * max(abs(total_s), abs(nominal_s)) else diff


@dataclass(frozen=True)
class PendingSnapshot:
    """A checkpoint snapshotted before the current stretch whose drain is still running."""

    steps: int  # beyond the last durable checkpoint
    compute_s: float
    other_s: float  # waits and the snapshot
    drain_left_s: float


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
        self.durable_step = 0
        self.finished = False
        self._waiting_for_nodes = False
        self.extra_step_s = 0.0  # from degraded fabric parts, set by FabricState
        self.fabric_partitioned = False  # set by FabricState: no restart until reconnected
        # carried across a step-time change: a snapshot still draining, and the work
        # toward the next checkpoint (compute, waits and snapshot so far)
        self._pending: PendingSnapshot | None = None
        self.storage: Storage | None = None  # set in the build phase when storage matters
        self._durable_on_backup = False  # the rollback point lives only on the backup tier
        self._in_memory = False
        self._from_memory = False  # the next restart loads the in-memory checkpoint
        self._resume_step = 0
        self._next_compute_s = self._next_other_s = self._done_steps = self._snapped_s = 0.0
        self.process: simpy.Process | None = None

    # ---- called by other processes

    def start(self) -> simpy.Process:
        self.process = self.env.process(self._run())
        return self.process

    def strike(self, failure: Failure, counted: bool = False) -> None:
        if self.process is not None and self.process.is_alive:
            if not counted:
                self.ledger.failures[failure.class_index] += 1
            self.process.interrupt(failure)

    def storage_changed(self, lost_data: bool) -> None:
        if self.process is not None and self.process.is_alive:
            self.process.interrupt(StorageChanged(self.env.now, lost_data))

    def fabric_changed(self) -> None:
        if self.process is not None and self.process.is_alive:
            self.process.interrupt(FabricChanged(self.env.now))

    def node_returned(self) -> None:
        """A repaired node joined the spares: wake the job only if it waits or could grow."""
        wants = self._waiting_for_nodes or (
            self.policy.grows and self.cluster.active < self.plan.nodes
        )
        if wants and self.process is not None and self.process.is_alive:
            self.process.interrupt(NodesAvailable(self.env.now))

    # ---- the process

    def _run(self):
        try:
            while True:
                self._in_memory = True  # the job's state is on its GPUs
                outcome = yield from self._train()
                self._in_memory = False
                if outcome is FINISHED:
                    self.finished = True
                    return
                failure = outcome
                while failure is not None:
                    failures = yield from self._detect(failure)
                    yield from self._replace(failures)
                    failure = yield from self._restart()
        except HorizonReached:
            self._drop_progress()  # work not yet durable at the horizon (e.g. waiting for the tier)
            return

    def _train(self):
        """Run stretches until finished (returns FINISHED) or a failure (returns it)."""
        env, plan = self.env, self.plan
        deadline = plan.horizon_s
        while True:
            nodes = self.cluster.active
            replicas = plan.replicas_on(nodes)
            pending = self._pending
            stretch = Stretch(
                start_step=self._resume_step,
                total_steps=plan.total_steps,
                interval_steps=plan.interval_steps,
                step_s=plan.step_s_with(replicas) + self.extra_step_s,
                snapshot_s=plan.snapshot_s(nodes),
                drain_s=plan.drain_s(nodes, replicas),
                done_steps=self._done_steps,
                snapped_s=self._snapped_s,
                pending_drain_s=pending.drain_left_s if pending else 0.0,
                durable_before=self.durable_step,
                memory_every=plan.memory_every,
                memory_s=plan.memory_s(nodes),
                slow_step_s=plan.slow_step_s(nodes, replicas) + self.extra_step_s,
            )
            t0 = env.now
            # an elastic job that is short of nodes grows back at its next checkpoint
            grow_at = 1 if self._can_grow() else None
            # with the tier down, train up to the next snapshot, then wait for the tier
            blocked_at = stretch.snapshot_start_s(1) if self._tier_down() else None
            fabric_changed = False
            while True:
                k = stretch.checkpoints if grow_at is None else grow_at
                target = stretch.durable_s(k)
                if blocked_at is not None:
                    target = min(target, blocked_at)
                try:
                    yield env.timeout(max(0.0, min(t0 + target, deadline) - env.now))
                except simpy.Interrupt as interrupt:
                    cause = interrupt.cause
                    if isinstance(cause, Failure):
                        survives = self.plan.memory_every and len(cause.nodes) == 1
                        self._book(
                            stretch, stretch.position(env.now - t0), env.now - t0, memory=survives
                        )
                        return cause
                    if isinstance(cause, FabricChanged | StorageChanged):
                        position = stretch.position(env.now - t0)
                        if position.snapshots == stretch.checkpoints and not self._tier_down():
                            continue  # only the final drain is left: the step time no longer matters
                        self._carry(stretch, position, env.now - t0)
                        if isinstance(cause, StorageChanged):
                            self._storage_event(cause, running=True)
                        fabric_changed = True
                        break
                    if grow_at is None and self._can_grow():
                        grow_at = stretch.next_checkpoint(env.now - t0)
                    continue
                if t0 + target > deadline:
                    self._book(stretch, stretch.position(env.now - t0), env.now - t0)
                    raise HorizonReached
                if blocked_at is not None and target == blocked_at:
                    self._carry(stretch, stretch.position(target), target)
                    self._trace("wait for storage", env.now, 0.0)
                    failure = yield from self._hold(
                        math.inf, "downtime_s", wake_on=(StorageChanged,)
                    )
                    if failure is not None:
                        self._drop_progress()  # the work carried to the blocked checkpoint
                        return failure
                    fabric_changed = True  # re-plan from here
                    break
                self._book(stretch, stretch.at_checkpoint(k), target)
                if k >= stretch.checkpoints:
                    return FINISHED
                break  # a checkpoint boundary where the elastic job grows back
            if fabric_changed:
                continue  # same interval, new step time
            grown = self.policy.nodes_to_run(self.cluster.available)
            if grown is not None and grown > nodes:
                self.cluster.resize(grown)
                self._trace("rescale", env.now, plan.rescale_s, nodes=grown)
                failure = yield from self._hold(plan.rescale_s, "downtime_s")
                if failure is not None:
                    return failure

    def _keep(self, steps: int, compute_s: float, total_s: float, checkpoints: int) -> None:
        """Steps made durable: their nominal time is ideal, the rest of their compute slowdown,
        and the time spent on their checkpoints (blocking parts, waits for drains) stall."""
        ledger, nominal = self.ledger, self.plan.step_s
        ledger.ideal_s += steps * nominal
        ledger.slowdown_s += excess_s(compute_s, steps * nominal)
        ledger.checkpoint_stall_s += total_s - compute_s
        ledger.checkpoints_written += checkpoints

    def _book_durable(self, stretch: Stretch, position, t0: float) -> None:
        """Book what became durable at `position`: the snapshot draining when the stretch
        began, and the stretch's own checkpoints (with the work carried into it)."""
        if self._pending is not None and position.pending_durable:
            p = self._pending
            self._keep(p.steps, p.compute_s, p.compute_s + p.other_s, 1)
            self._pending = None
            self.durable_step = stretch.start_step
            self._on_tier_again()
            self._maybe_backup(self.durable_step, t0 + stretch.pending_drain_s)
        if position.checkpoints:
            ledger = self.ledger
            before = (
                ledger.ideal_s,
                ledger.slowdown_s,
                ledger.checkpoint_stall_s,
                ledger.checkpoints_written,
            )
            base_compute, base_total = (
                self._next_compute_s,
                self._next_compute_s + self._next_other_s,
            )
            steps = position.durable_step - self.durable_step
            self._keep(
                steps,
                base_compute + position.kept_compute_s,
                base_total + position.kept_s,
                position.checkpoints,
            )
            if self.storage is not None and self.plan.backup_every:
                for j in range(1, position.checkpoints + 1):
                    if self.storage.wants_backup(before[3] + j):
                        step_j = stretch.step_at_checkpoint(j)
                        n = step_j - self.durable_step
                        compute_j = base_compute + stretch._kept_compute(j)
                        total_j = base_total + stretch.snapshot_end_s(j)
                        kept = (
                            before[0] + n * self.plan.step_s,
                            before[1] + excess_s(compute_j, n * self.plan.step_s),
                            before[2] + total_j - compute_j,
                        )
                        self.storage.checkpoint_durable(step_j, t0 + stretch.durable_s(j), kept)
            if self.timeline is not None:
                self._trace(
                    "train",
                    t0,
                    position.kept_s,
                    to_step=position.durable_step,
                    checkpoints=position.checkpoints,
                )
            self._next_compute_s = self._next_other_s = 0.0
            self.durable_step = position.durable_step
            self._on_tier_again()

    def _maybe_backup(self, step: int, durable_s: float) -> None:
        if self.storage is not None and self.storage.wants_backup(self.ledger.checkpoints_written):
            ledger = self.ledger
            self.storage.checkpoint_durable(
                step, durable_s, (ledger.ideal_s, ledger.slowdown_s, ledger.checkpoint_stall_s)
            )

    def _on_tier_again(self) -> None:
        self._durable_on_backup = False

    def _book(self, stretch: Stretch, position, elapsed_s: float, memory: bool = False) -> None:
        """The stretch ends at `position`: keep what is durable, lose the rest (roll back).

        With `memory` (a single-node failure and an in-memory level) the job rolls back
        only to its newest in-memory checkpoint: the work up to it is carried, not lost."""
        self._book_durable(stretch, position, self.env.now - elapsed_s)
        lost_before = self.ledger.lost_work_s
        if memory and self._roll_back_to_memory(stretch, position, elapsed_s):
            return
        self.ledger.lost_work_s += elapsed_s - position.kept_s
        self.ledger.checkpoints_lost += (
            position.snapshots - position.checkpoints + int(position.aborted_write)
        )
        self._drop_progress()
        lost_s = self.ledger.lost_work_s - lost_before
        if self.timeline is not None and lost_s > 1e-9:
            self._trace(
                "lost work", self.env.now - lost_s, lost_s, rolled_back_to=self.durable_step
            )

    def _roll_back_to_memory(self, stretch: Stretch, position, elapsed_s: float) -> bool:
        """Carry the work up to the newest in-memory checkpoint of the current window (and the
        not yet durable work it builds on); lose the rest. False if there is none."""
        w = position.snapshots
        newest = stretch.progress(w + 1, position.window_s)[2]
        if newest is None:
            return False
        boundary, when_s = newest
        done, _ = stretch.window_steps(w + 1)
        compute = (boundary - done) * stretch.step_s
        carried_compute, carried_other = compute, when_s - compute
        if w == 0:
            carried_compute += self._next_compute_s
            carried_other += self._next_other_s
            base = stretch.start_step
        else:
            base = stretch.step_at_checkpoint(w)
            if (
                w > position.checkpoints
            ):  # the last snapshot never became durable: its work is needed
                carried_compute += position.last_window_compute_s
                carried_other += position.last_window_s - position.last_window_compute_s
                if w == 1:
                    carried_compute += self._next_compute_s
                    carried_other += self._next_other_s
                self.ledger.checkpoints_lost += 1
        if self._pending is not None:  # its drain dies with the job; its work is in memory
            carried_compute += self._pending.compute_s
            carried_other += self._pending.other_s
            self._pending = None
            self.ledger.checkpoints_lost += 1
        window_start = elapsed_s - position.window_s
        self.ledger.lost_work_s += elapsed_s - (window_start + when_s)
        self._next_compute_s, self._next_other_s = carried_compute, carried_other
        self._done_steps, self._snapped_s = float(boundary), 0.0
        self._resume_step = base
        self._from_memory = True
        return True

    def _drop_progress(self) -> None:
        """Roll back to the last durable checkpoint: carried work and a pending snapshot are lost."""
        lost_s = self._next_compute_s + self._next_other_s
        if self._pending is not None:
            lost_s += self._pending.compute_s + self._pending.other_s
            self.ledger.checkpoints_lost += 1
        self.ledger.lost_work_s += lost_s
        self._next_compute_s = self._next_other_s = self._done_steps = self._snapped_s = 0.0
        self._pending = None
        self._resume_step = self.durable_step
        self._from_memory = False

    def _carry(self, stretch: Stretch, position, elapsed_s: float) -> None:
        """The step time changes mid-stretch: keep what is durable and carry the rest
        (a snapshot still draining, progress toward the next checkpoint) into a new stretch."""
        first_window = position.snapshots == 0
        self._book_durable(stretch, position, self.env.now - elapsed_s)
        if position.snapshots > position.checkpoints:  # the last snapshot is still draining
            w = position.snapshots
            other = position.last_window_s - position.last_window_compute_s
            compute = position.last_window_compute_s
            if w == 1:  # its window began before this stretch
                compute += self._next_compute_s
                other += self._next_other_s
            self._pending = PendingSnapshot(
                steps=stretch.step_at_checkpoint(w) - self.durable_step,
                compute_s=compute,
                other_s=other,
                drain_left_s=stretch.durable_s(w) - elapsed_s,
            )
        elif self._pending is not None and not position.pending_durable:
            self._pending = replace(self._pending, drain_left_s=stretch.pending_drain_s - elapsed_s)
        window_other = position.window_s - position.window_compute_s
        w = position.snapshots
        steps_done = (
            stretch.progress(w + 1, position.window_s)[0] if w < stretch.checkpoints else 0.0
        )
        if first_window:
            self._next_compute_s += position.window_compute_s
            self._next_other_s += window_other
            self._done_steps = steps_done
            self._snapped_s += position.window_snapshot_s
        else:
            self._next_compute_s = position.window_compute_s
            self._next_other_s = window_other
            self._done_steps = steps_done
            self._snapped_s = position.window_snapshot_s
            self._resume_step = stretch.step_at_checkpoint(w)

    def _tier_down(self) -> bool:
        return self.storage is not None and not self.storage.up

    def _storage_event(self, cause: StorageChanged, running: bool) -> None:
        """The tier went down or came back. Down: a write in flight is aborted and a drain in
        flight never completes; with data loss the fallback becomes the newest backup."""
        if not self._tier_down():
            return
        if self.plan.mode == "sync" and self._snapped_s > 0:
            self.ledger.lost_work_s += self._snapped_s  # the aborted write; it restarts later
            self._next_other_s -= self._snapped_s
            self._snapped_s = 0.0
            self.ledger.checkpoints_lost += 1
        if self._pending is not None:
            p = self._pending  # never durable: its work is just work in memory again
            self._next_compute_s += p.compute_s
            self._next_other_s += p.other_s
            self._pending = None
            self.ledger.checkpoints_lost += 1
        if cause.lost_data:
            self._lose_tier_data(running)

    def _lose_tier_data(self, running: bool) -> None:
        """The tier's checkpoints are gone: fall back to the newest backup (or the start).
        Work kept since then is no longer safe: carried if training, lost if not."""
        assert self.storage is not None
        backup = self.storage.newest_backup()
        ledger = self.ledger
        ideal, slowdown, stall = backup.kept if backup else (0.0, 0.0, 0.0)
        unsafe_compute = (ledger.ideal_s - ideal) + (ledger.slowdown_s - slowdown)
        unsafe_other = ledger.checkpoint_stall_s - stall
        ledger.ideal_s, ledger.slowdown_s, ledger.checkpoint_stall_s = ideal, slowdown, stall
        if running:
            self._next_compute_s += unsafe_compute
            self._next_other_s += unsafe_other
        else:
            ledger.lost_work_s += unsafe_compute + unsafe_other
            self._resume_step = backup.step if backup else 0
        self.durable_step = backup.step if backup else 0
        self._durable_on_backup = backup is not None

    def _detect(self, first: Failure):
        """Hold until the first failure is noticed; failures meanwhile merge into it."""
        failures = [first]
        remaining = max(0.0, first.time_s + first.detect_s - self.env.now)
        self._trace("detect", self.env.now, remaining, cause=first.name)
        yield from self._hold(remaining, "downtime_s", merge=failures.append)
        if self._from_memory and (
            len({n for f in failures for n in f.nodes}) > 1 or any(not f.nodes for f in failures)
        ):
            self._drop_progress()  # more than one node (or the job) went: the peers' copies are gone
        return failures

    def _replace(self, failures: list[Failure]):
        """Failed nodes leave for repair; spares fill in; the policy may wait for more nodes."""
        for failure in failures:
            self._send_to_repair(failure)
        while True:
            nodes = self.policy.nodes_to_run(self.cluster.available)
            if nodes is not None and not self.fabric_partitioned:
                self.cluster.resize(nodes)
                return
            start = self.env.now
            merged: list[Failure] = []
            self._waiting_for_nodes = True
            yield from self._hold(math.inf, "downtime_s", merge=merged.append, until_nodes=True)
            self._waiting_for_nodes = False
            self.ledger.node_wait_s += self.env.now - start
            self._trace("wait for nodes", start, self.env.now - start)
            for failure in merged:
                self._send_to_repair(failure)

    def _send_to_repair(self, failure: Failure) -> None:
        if failure.replace:
            for node in failure.nodes:
                self.cluster.send_to_repair(
                    node, failure.class_index, failure.repair_mean_s, failure.repair_s
                )

    def _restart(self):
        """Launch and load the last durable checkpoint; returns a failure that aborted it, or None.
        The checkpoint comes from the tier (waiting for it if it is down) or from the backup."""
        nodes = self.cluster.active
        load = 0.0
        if self._from_memory:
            pass  # the state comes back from the peers' RAM: no load from the tier
        elif self.durable_step > 0 and self._durable_on_backup:
            load = self.plan.backup_restore_s
            self.ledger.restores_from_backup += 1
        elif self.durable_step > 0:
            while self._tier_down():
                start = self.env.now
                failure = yield from self._hold(math.inf, "downtime_s", wake_on=(StorageChanged,))
                self._trace("wait for storage", start, self.env.now - start)
                if failure is not None:
                    return failure
                if self._durable_on_backup:  # the outage destroyed the tier's copy meanwhile
                    return (yield from self._restart())
            load = self.plan.load_s(nodes)
        duration = self.plan.restart_s + load
        self._from_memory = False
        self.ledger.restarts += 1
        self._trace("restart", self.env.now, duration, nodes=nodes, from_step=self.durable_step)
        return (yield from self._hold(duration, "downtime_s"))

    def _hold(
        self,
        seconds: float,
        bucket: str,
        merge=None,
        until_nodes: bool = False,
        wake_on: tuple = (),
    ):
        """Let `seconds` of wall clock pass, booked to `bucket`.

        A failure ends the hold and is returned, unless `merge` takes it. With
        `until_nodes`, a node returning from repair ends the hold too. Reaching
        the horizon raises HorizonReached.
        """
        env = self.env
        end = env.now + seconds
        deadline = self.plan.horizon_s
        while env.now < end:
            start = env.now
            try:
                yield env.timeout(min(end, deadline) - env.now)
            except simpy.Interrupt as interrupt:
                setattr(self.ledger, bucket, getattr(self.ledger, bucket) + env.now - start)
                cause = interrupt.cause
                if isinstance(cause, Failure):
                    if merge is None:
                        return cause
                    merge(cause)
                elif isinstance(cause, StorageChanged):
                    self._storage_event(cause, running=self._in_memory)
                    if StorageChanged in wake_on and not self._tier_down():
                        return None
                elif until_nodes and isinstance(cause, NodesAvailable):
                    return None
                continue
            setattr(self.ledger, bucket, getattr(self.ledger, bucket) + env.now - start)
            if env.now >= deadline and end > deadline:
                raise HorizonReached
        return None

    def _can_grow(self) -> bool:
        if not self.policy.grows or self.cluster.active >= self.plan.nodes:
            return False
        grown = self.policy.nodes_to_run(self.cluster.available)
        return grown is not None and grown > self.cluster.active

    def _trace(self, name: str, start_s: float, duration_s: float, **args) -> None:
        if self.timeline is not None:
            self.timeline.append(
                {"name": name, "start_s": start_s, "duration_s": duration_s, **args}
            )
