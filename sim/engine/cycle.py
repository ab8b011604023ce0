"""The failure cycle in line: the common case of the job's life, with no SimPy event.

Most of a long replica is one cycle repeated thousands of times: the job trains a
stretch of sync checkpoints, a node (or the job) fails, the failure is noticed, the
node leaves for repair, a spare takes its place, and the job restarts from its last
checkpoint. When nothing else is due in SimPy's queue before the stretch's failure,
nothing else can act meanwhile, and the cycle runs here without the job process's
generators, as an order of the general path's own calls: the stretch's schedule and
where the failure leaves it (`plain_schedule`, `sync_window`, which `Stretch` uses
too), the failure's strike (`FailureSource.renew`, `FailureRouter.count`), the
booking (`Progress.keep_stretch`, `Progress.lose_stretch`, which `Progress.book`
uses too) and the outage (`Job._quick_outage`, itself in line while nothing else is
due). No rule is written here: every number is the general path's (tested replica by
replica, `tests/engine/test_cycle.py` and `benchmarks/cycle_soak.py`).

A health check due in a stretch is done here too (`_health_check`): the stretch carried,
the nodes looked at and the check's cost held as the general path does them; and the nodes
it caught are drained at the next stretch's first checkpoint (`Job.drain_caught`, then the
refill and restart of `Job._quick_back`), so a daily check does not send the rest of the
day the general way.

`run_cycles(job)` runs cycles until one needs the general path and tells the job how
far it got (`Cycles`). It takes only the common configuration (`eligible`): a
restart policy; sync checkpoints with no in-memory level, no drain and no contended
reads; no kept-checkpoint history, no corrupt checkpoint to rewrite, no storage model,
fabric, on-call, stragglers, silent or storage classes, timeline or incident log. Anything
else, or any cycle where something else is due first, goes the general way, which the
cycle leaves in the state the general path itself would have reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.engine.events import Failure
from sim.engine.stretch import checkpoint_step, plain_schedule, sync_window

# how far an outage got in line (`Job._quick_outage`, `run_cycles`): nothing, detection
# (the failures merged), the failed nodes sent to repair, the job refilled, or the whole
# outage (restarted, or aborted by a failure)
QUICK_NONE, QUICK_DETECTED, QUICK_TAKEN, QUICK_REPLACED, QUICK_ALL = range(5)

# switched off by tests that compare the cycle with the general path
ENABLED = True


@dataclass(slots=True)
class Cycles:
    """Where `run_cycles` handed back: `failure` is None when the job trains (the general
    path plans the stretch, from `started_s` when one is under way); otherwise a failure it
    booked, with how far its outage got (`stage`, and the failures detected together once
    past detection)."""

    failure: Failure | None = None
    stage: int = QUICK_NONE
    failures: list[Failure] | None = None
    # with no failure: when the stretch under way began (its clock may have moved past a
    # vacant slot's draw, `SuperposedSource`), or None at the start of a stretch
    started_s: float | None = None
    # caught nodes were drained at a checkpoint, and the job went back as far as `stage`
    # (the general path refills it, if not yet, and restarts it)
    drained: bool = False


def eligible(job) -> bool:
    """Whether the replica's configuration is the one the cycle computes (fixed for the
    whole replica: checked once, when the job process starts)."""
    plan, progress = job.plan, job.progress
    router = job.router
    return (
        ENABLED
        and plan.policy == "restart"  # the full complement, or a wait for nodes
        and job._quick  # no timeline, on-call, elastic growth, fabric, silent or storage class
        and plan.mode == "sync"
        and not plan.memory_every
        and progress.kept is None
        and progress.storage is None
        and not job._rewrites
        and plan.stragglers is None
        and router is not None
        and not router.handlers
        and router.incidents is None
        and job.cluster.incidents is None
        and job.clocks is not None
    )


def _strike(job, source, now: float) -> Failure | None:
    """`FailureSource.fire` and `FailureRouter.route` as an order of calls (the job runs; no
    silent class, no handler, no incident log): the component's lifetime renewed, the
    failure counted (and as a lemon's). Returns the failure (None: a superposed class drew
    a vacant slot, no failure)."""
    index = source.renew()
    if index < 0:
        return None
    per_node = source.per_node
    job.router.count(source.failure_class.index, index // per_node if per_node else -1)
    return source.failure(index, now)


# `_health_check`: the check cannot be done in line, the general path does it
HAND_BACK = object()


def _health_check(job, t0: float, shape: tuple):
    """A health check due now, at the head of SimPy's queue, in the stretch that began at
    `t0` (`Job._train` when its wait is interrupted by `HealthCheck`): the check's clock
    steps (`Job.health_check` puts the check in the inbox), the nodes back by now return,
    the stretch is carried (`Progress.carry`), the nodes looked at (`Job.check_nodes`) and
    the check's cost held in line (`Job._hold` as `Job._quick_down`). Returns the failure
    that ended the hold (the work carried is dropped, as the general path drops it), None
    (the job trains on from where the check left it), or HAND_BACK when the hold cannot be
    in line (something else is due before it ends, or the horizon): the check is in the
    inbox then, for the general path."""
    env, plan = job.env, job.plan
    job._computing = True  # the check interrupts a stretch's wait
    try:
        env.step()
    finally:
        job._computing = False
    now = env._now
    calendar = job.cluster.calendar
    if calendar.due_s <= now:  # as the wait's interrupt: the nodes back by now
        calendar.advance(now)
    end = now + plan.health_checks.cost_s
    queue, inbox = env._queue, job._inbox
    if len(inbox) != 1 or end > plan.horizon_s or (queue and queue[0][0] <= end):
        return HAND_BACK
    inbox.popleft()
    stretch = job.stretch(shape)
    elapsed = now - t0
    progress = job.progress
    progress.carry(stretch, stretch.position(elapsed), elapsed)
    job.check_nodes()
    if job.idle is not None:
        job.idle.pause()
    failure = job._quick_down(end, None)
    job.ledger.health_check_s += env._now - now
    if failure is not None:
        progress.drop()
    return failure


def run_cycles(job) -> Cycles:
    """Run failure cycles in line from the start of a stretch, as long as nothing else is
    due first. Returns where the general path takes over."""
    job._in_line = True  # a cause raised meanwhile waits in the job's inbox
    try:
        return _cycles(job)
    finally:
        job._in_line = False


def _cycles(job) -> Cycles:
    env, plan, progress = job.env, job.plan, job.progress
    cluster, clocks, calendar, idle = job.cluster, job.clocks, job.cluster.calendar, job.idle
    queue = env._queue
    deadline = plan.horizon_s
    total_steps, interval = plan.total_steps, plan.interval_steps
    shapes = job._shapes
    caught = job.caught
    ticks = job.health_ticks  # the health checks' clock (a SimPy process), if any
    while True:
        # ---- the stretch (`Job._train`, `Stretch` of a plain stretch with sync checkpoints)
        if (
            job._inbox
            or job.maintenance_due
            or progress.pending is not None
            or job.fabric_partitioned
        ):
            return Cycles()
        nodes = cluster.active
        shape = shapes.get(nodes)
        if shape is None:
            return Cycles()  # the general path computes the figures for this size first
        _, snapshot_s, drain_s, memory_s, _, _ = shape
        step_s, slow_step_s = job.step_times(shape)
        if drain_s != 0.0 or memory_s != 0.0 or slow_step_s != step_s:
            return Cycles()  # not a plain stretch with sync checkpoints
        start = progress.resume_step
        (
            first,
            first_work,
            first_s,
            full_work,
            cycle_s,
            full_cycles,
            _,
            tail_work,
            checkpoints,
            tail_end,
            duration,
        ) = plain_schedule(
            start,
            total_steps,
            interval,
            step_s,
            snapshot_s,
            0.0,  # sync: no drain
            progress.done_steps,
            progress.snapped_s,
            0.0,  # no snapshot pending
        )
        t0 = env._now
        stop = None  # caught nodes: the stretch stops at its first checkpoint to drain them
        if caught:
            if checkpoints <= 1:
                return Cycles()  # the stretch's end is the run's: the general path
            stretch = job.stretch(shape)
            stop = stretch.durable_s(1)
        if idle is not None:
            idle.resume()
        until = min(t0 + (duration if stop is None else stop), deadline)
        checked = False
        while True:  # `Job._wait`, until a failure (a vacant slot's draw is none)
            wake, source = clocks.next()
            head = queue[0][0] if queue else math.inf
            if head <= wake and head < until:
                # something else is due first: a health check is done here, anything else
                # (or a check that cannot be) goes the general way
                if ticks is None or queue[0][3] is not ticks._target:
                    return Cycles(started_s=t0)
                failure = _health_check(job, t0, shape)
                if failure is HAND_BACK:
                    return Cycles(started_s=t0)
                checked = True
                break
            if wake >= until:
                if stop is None or t0 + stop > deadline or head <= until:
                    return Cycles(started_s=t0)  # the stretch ends first: the general path
                # ---- at the first checkpoint, the caught nodes drained (`_stop_at_checkpoint`)
                now = env._now
                env._now = now + max(0.0, until - now)
                if calendar.due_s <= env._now:
                    calendar.advance(env._now)
                progress.book(stretch, stretch.at_checkpoint(1), stop)
                failure = None
                if caught:  # (still: only a failure takes a node out of its slot)
                    job.drain_caught()
                    stage, failure = job._quick_back([])
                    if stage != QUICK_ALL:
                        return Cycles(stage=stage, drained=True)
                checked = True  # the stretch is booked; an abort goes to the outage
                break
            now = env._now
            now = now + max(0.0, wake - now)
            elapsed = now - t0
            if elapsed >= duration:
                return Cycles(started_s=t0)
            # ---- the failure strikes (`Job._wait`, the source's `fire`, the router)
            env._now = now
            if calendar.due_s <= now:  # before any decision: the nodes back by now
                calendar.advance(now)
            failure = _strike(job, source, now)
            if failure is not None:
                break
        if checked:
            if failure is None:
                continue  # the check is done: the next stretch, from where it left the job
            # a failure ended the check's hold: the stretch was booked at the check
        else:
            # ---- the stretch booked (`Stretch.position`, `Progress.book`)
            k, kept_s, kept_compute_s, _, window_snapshot_s = sync_window(
                elapsed,
                first_s,
                cycle_s,
                full_cycles,
                checkpoints,
                tail_end,
                first_work,
                full_work,
                tail_work,
            )
            if k:  # `Progress.book_durable` of a plain sync stretch (no pending, history, trace)
                durable = checkpoint_step(k, start, first, interval, total_steps)
                progress.keep_stretch(durable, kept_compute_s, kept_s, k)
            progress.lose_stretch(elapsed - kept_s, int(window_snapshot_s > 0))
        job._in_memory = False  # the job is down: its state is no longer on its GPUs
        # ---- the outage (`Job._run`): again while a failure aborts the restart
        while failure is not None:
            stage, result = job._quick_outage(failure)
            if stage != QUICK_ALL:
                return Cycles(failure, stage, result)
            failure = result
        job._in_memory = True  # back to training: the next stretch
