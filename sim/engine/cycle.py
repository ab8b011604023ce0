"""The failure cycle in line: the common case of the job's life, with no SimPy event.

Most of a long replica is one cycle repeated thousands of times: the job trains a
stretch of sync checkpoints, a node (or the job) fails, the failure is noticed, the
node leaves for repair, a spare takes its place, and the job restarts from its last
checkpoint. When nothing else is due in SimPy's queue before each part of the cycle
ends (no maintenance, health check, injected failure, other process), nothing else
can act meanwhile, and the whole cycle is computed here in closed form, moving the
clock itself: the same steps in the same order as the job process's general path
(`Job._train`, `_wait`, `FailureSource.fire`, `FailureRouter.route`,
`Progress.book`, `Job._quick_outage`), the same draws from the same streams, the
same arithmetic, so every number is identical to the general path's (tested
replica by replica, `tests/engine/test_cycle.py` and `benchmarks/cycle_soak.py`).
A failure's strike (`FailureSource.renew`, `FailureRouter.count`), a node's way
to repair (`Cluster.lasting`, `Cluster.leave_for_repair`) and the compute-time
clock (`IdleClock`) are the general path's own calls, in its order. The stretch's
booking and the outage's parts are still computed here beside `Stretch`,
`Progress.book` and `Job._quick_outage`, which say so: a change to one of those
is a change to both.

`run_cycles(job)` runs cycles until one needs the general path and tells the job how
far it got (`Cycles`). It takes only the common configuration (`eligible`): a
restart policy; sync checkpoints with no in-memory level, no drain and no contended
reads; no kept-checkpoint history, no corrupt checkpoint to rewrite, no storage model,
fabric, on-call, stragglers, silent or storage classes, timeline or incident log; no
callback that would wake the job (a node back wakes nobody: the job neither waits for
nodes nor grows). Anything else, or
any cycle where something else is due first, goes the general way, which the cycle
leaves in the state the general path itself would have reached.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.engine.events import Failure
from sim.engine.ledger import excess_s

# how far an outage got in line (`Job._quick_outage`, `run_cycles`): nothing, detection
# (the failures merged), the failed nodes sent to repair, the job refilled, or the whole
# outage (restarted, or aborted by a failure)
QUICK_NONE, QUICK_DETECTED, QUICK_TAKEN, QUICK_REPLACED, QUICK_ALL = range(5)

# switched off by tests that compare the cycle with the general path
ENABLED = True


@dataclass(slots=True)
class Cycles:
    """Where `run_cycles` handed back: `failure` is None when the job is at the start of a
    stretch (the general path plans it); otherwise a failure it booked, with how far its
    outage got (`stage`, and the failures detected together once past detection)."""

    failure: Failure | None = None
    stage: int = QUICK_NONE
    failures: list[Failure] | None = None


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


def _strike(job, source) -> int:
    """`FailureSource.fire` and `FailureRouter.route` as an order of calls (the job runs; no
    silent class, no handler, no incident log): the component's lifetime renewed, the
    failure counted (and as a lemon's). Returns the component; the failure is
    (source, component, now), a `Failure` only when the general path needs one."""
    index = source.renew()
    per_node = source.per_node
    job.router.count(source.failure_class.index, index // per_node if per_node else -1)
    return index


def _failure(struck: tuple) -> Failure:
    """The `Failure` that `FailureSource.fire` sends, from (source, component, time)."""
    source, index, time_s = struck
    return source.failure(index, time_s)


def _handed(struck: list[tuple], stage: int) -> Cycles:
    """Hand the failures struck (oldest first) to the general path at `stage`."""
    failures = [_failure(each) for each in struck]
    return Cycles(failures[0], stage, failures if stage > QUICK_NONE else None)


def _down_until(job, now: float, end: float) -> tuple[float, object]:
    """While the job is down (`Job._quick_wait`): the clock moves to the next failure before
    `end`, or to `end`, the time booked to downtime, the nodes back by then returned.
    Returns the new time and the source of the failure due then, or None."""
    wake, source = job.clocks.next()
    env = job.env
    then = env._now = now + max(0.0, (end if wake >= end else wake) - now)
    calendar = job.cluster.calendar
    if calendar.due_s <= then:
        calendar.advance(then)
    ledger = job.ledger
    ledger.downtime_s = ledger.downtime_s + then - now
    return then, (source if wake < end else None)


def _send_to_repair(job, cluster, struck: tuple, slot: int) -> None:
    """`Cluster.send_to_repair` as an order of calls for the cycle's common case (no
    misdiagnosis, no incident log, no repaired part): the node in `slot` leaves for repair
    or retirement."""
    repair = cluster.plan.repair
    if repair is not None and repair.misdiagnosis_prob > 0:
        cluster.send_to_repair(_failure(struck), slot)
        return
    if not cluster.filled[slot]:
        return  # already out (two failures of the same node merged)
    fc = struck[0].failure_class
    cluster.leave_for_repair(slot, cluster.lasting(fc.index), fc.index, fc.repair_mean_s)


def run_cycles(job) -> Cycles:
    """Run failure cycles in line from the start of a stretch, as long as nothing else is
    due first. Returns where the general path takes over."""
    job._in_line = True  # a cause raised meanwhile waits in the job's inbox (none is, here)
    try:
        return _cycles(job)
    finally:
        job._in_line = False


def _cycles(job) -> Cycles:
    env, plan, progress, ledger = job.env, job.plan, job.progress, job.ledger
    cluster, clocks, calendar, idle = job.cluster, job.clocks, job.cluster.calendar, job.idle
    queue = env._queue
    deadline = plan.horizon_s
    total_steps, interval = plan.total_steps, plan.interval_steps
    nominal_step = plan.step_s
    step_time = job.step_time
    shapes = job._shapes
    caught = job.caught
    restart_s = plan.restart_s
    policy_nodes = plan.nodes  # the restart policy: the full complement, or wait
    load_s = plan.load_s(policy_nodes)  # the checkpoint load on the full complement
    while True:
        # ---- the stretch (`Job._train`, `Stretch` of a plain stretch with sync checkpoints)
        if (
            job._inbox
            or job.maintenance_due
            or caught
            or progress.pending is not None
            or job.fabric_partitioned
        ):
            return Cycles()
        nodes = cluster.active
        shape = shapes.get(nodes)
        if shape is None:
            return Cycles()  # the general path computes the figures for this size first
        replicas, snapshot_s, drain_s, memory_s, nominal_s, slow_s = shape
        added_s, factor = step_time._added_s, step_time._factor
        step_s = (nominal_s + added_s) * factor
        if drain_s != 0.0 or memory_s != 0.0 or (slow_s + added_s) * factor != step_s:
            return Cycles()
        start = progress.resume_step
        done_steps, snapped_s = progress.done_steps, progress.snapped_s
        first = min(interval, total_steps - start)
        first_work = (first - done_steps) * step_s
        first_s = max(first_work, 0.0) + (snapshot_s - snapped_s)
        full_work = interval * step_s
        cycle_s = max(full_work, 0.0) + snapshot_s
        full_cycles, tail_steps = divmod(total_steps - start - first, interval)
        tail_work = tail_steps * step_s
        last_full = 1 + full_cycles  # snapshot j ends at first_s + (j - 1) cycles up to it
        tail_end = first_s + full_cycles * cycle_s + max(tail_work, 0.0) + snapshot_s
        if tail_steps:
            checkpoints = 2 + full_cycles
            duration = tail_end
        else:
            checkpoints = last_full
            duration = first_s + full_cycles * cycle_s
        duration = duration + 0.0  # + the drain (none): the float `Stretch.duration_s` holds
        t0 = env._now
        if idle is not None:
            idle.resume()
        until = min(t0 + duration, deadline)
        wake, source = clocks.next()
        if wake >= until or (queue and queue[0][0] <= wake):
            return Cycles()  # the stretch ends first, or something else is due: the general path
        now = t0 + max(0.0, wake - t0)
        elapsed = now - t0
        if elapsed >= duration:
            return Cycles()
        # ---- the failure strikes (`Job._wait`, the source's `fire`, the router)
        env._now = now
        if calendar.due_s <= now:  # before any decision: the nodes back by now
            calendar.advance(now)
        struck = (source, _strike(job, source), now)
        job._in_memory = False  # the job is down: its state is no longer on its GPUs
        # ---- the stretch booked (`Stretch._sync_position`, `Progress.book`)
        if elapsed < first_s:
            k = 0
        else:  # `Stretch._sync_position`: before the stretch's end, k < checkpoints
            k = max(1, min(1 + int((elapsed - first_s) // cycle_s), checkpoints - 1))
            while (
                k + 1 <= checkpoints
                and (first_s + k * cycle_s if k + 1 <= last_full else tail_end) <= elapsed
            ):
                k += 1
            while (
                k >= 1 and (first_s + (k - 1) * cycle_s if k <= last_full else tail_end) > elapsed
            ):
                k -= 1
        # when snapshot k ended: what the stretch keeps
        kept_s = 0.0 if k <= 0 else (first_s + (k - 1) * cycle_s if k <= last_full else tail_end)
        window_s = elapsed - kept_s
        # time into the next snapshot (k < checkpoints: the stretch has not ended)
        if k == 0:
            work = first_work
        elif k + 1 <= last_full:
            work = full_work
        else:
            work = tail_work
        window_snapshot_s = max(0.0, window_s - max(work, 0.0))
        if k:
            durable = min(total_steps, start + first + (k - 1) * interval)
            full = min(k, last_full) - 1
            kept_compute = first_work + (full * full_work if full > 0 else 0.0)
            if k > last_full:
                kept_compute += tail_work
            steps = durable - progress.durable_step
            compute = progress.next_compute_s + kept_compute
            total = progress.next_compute_s + progress.next_other_s + kept_s
            ledger.ideal_s += steps * nominal_step
            ledger.slowdown_s += excess_s(compute, steps * nominal_step)
            ledger.checkpoint_stall_s += total - compute
            ledger.checkpoints_written += k
            progress.next_compute_s = progress.next_other_s = 0.0
            progress.durable_step = durable
            progress.durable_on_backup = False
        ledger.lost_work_s += elapsed - kept_s
        ledger.checkpoints_lost += int(window_snapshot_s > 0)
        # `Progress.drop`
        ledger.lost_work_s += progress.next_compute_s + progress.next_other_s
        progress.next_compute_s = progress.next_other_s = 0.0
        progress.done_steps = progress.snapped_s = 0.0
        progress.resume_step = progress.durable_step
        progress.from_memory = False
        # ---- the outage (`Job._quick_outage`), again while a failure aborts the restart
        while True:
            now = env._now
            end = now + max(0.0, struck[2] + struck[0].failure_class.detect_s - now)
            if job._inbox or end > deadline or (queue and queue[0][0] <= end):
                return _handed([struck], QUICK_NONE)
            if idle is not None:
                idle.pause()
            failures = [struck]
            began = now
            while now < end:  # failures meanwhile merge into it
                now, source = _down_until(job, now, end)
                if source is not None:
                    failures.append((source, _strike(job, source), now))
            ledger.detect_s += now - began
            # replacement: the failed nodes leave for repair (`Job._take`)
            for each in failures:
                source = each[0]
                per_node = source.per_node
                if not per_node:
                    continue  # the job itself, or a part of it: no node of its own
                slot = each[1] // per_node
                if source.failure_class.replace:
                    if caught:
                        caught.pop(slot, None)
                    _send_to_repair(job, cluster, each, slot)
                else:
                    cluster.fault_stays(_failure(each), slot)
            if plan.nodes > cluster.active + len(cluster.warm) and cluster.pooled:
                return _handed(failures, QUICK_TAKEN)
            if cluster.active + len(cluster.warm) < policy_nodes:
                return _handed(failures, QUICK_TAKEN)
            cluster.resize(policy_nodes)
            # the restart: launch and the checkpoint load
            load = load_s if progress.durable_step > 0 else 0.0
            end = now + (restart_s + load)
            if job._inbox or end > deadline or (queue and queue[0][0] <= end):
                return _handed(failures, QUICK_REPLACED)
            ledger.restarts += 1
            if idle is not None:
                idle.pause()
            began = now
            abort = None
            while now < end:  # a failure aborts it
                now, source = _down_until(job, now, end)
                if source is not None:
                    abort = (source, _strike(job, source), now)
                    break
            took = now - began
            if took > restart_s:
                ledger.checkpoint_load_s += took - restart_s
                took = restart_s
            ledger.restart_s += took
            if abort is None:
                break
            struck = abort
        job._in_memory = True  # back to training: the next stretch
