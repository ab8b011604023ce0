"""One replica: build the model → env.run → finalise → RunRecord.

Random streams: `sim/engine/streams.py` (the fixed table STREAMS, append only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import simpy

from sim.engine import failures as failure_clocks
from sim.engine.cluster import Cluster
from sim.engine.events import Failure, StragglerOnset
from sim.engine.fabricstate import FabricState
from sim.engine.failures import (
    FailureClocks,
    FailureSource,
    IdleClock,
    RecurrenceSource,
    SuperposedSource,
    superposable,
)
from sim.engine.incidents import Incidents
from sim.engine.job import Job
from sim.engine.ledger import DOWNTIME_PARTS, Ledger
from sim.engine.plan import ReplicaPlan
from sim.engine.repair import RepairShop
from sim.engine.router import FailureRouter
from sim.engine.storage import Storage
from sim.engine.stragglers import Stragglers
from sim.engine.streams import STREAMS, Draws, LazyStreams, stream  # noqa: F401 (STREAMS: re-exported)

HOUR_S = 3600.0
# the ledger's downtime parts and their output columns
DOWNTIME_FIELDS = tuple((part, part.removesuffix("_s") + "_hours") for part in DOWNTIME_PARTS)


@dataclass
class RunRecord:
    """The outcome of one replica (one row of replicas.parquet, before the sweep columns)."""

    scenario: str
    replica: int
    seed: int
    finished: bool
    time_to_train_days: float
    wall_hours: float
    ideal_hours: float
    slowdown_hours: float
    lost_work_hours: float
    checkpoint_stall_hours: float
    downtime_hours: float
    goodput: float
    effective_mfu: float
    failures: int
    failures_by_class: dict[str, int]
    checkpoints_written: int
    checkpoints_lost: int
    checkpoint_GB_written: float
    storage_peak_TB: float
    backup_lag_hours: float
    restores_from_backup: int
    restarts: int
    nodes_replaced: int
    nodes_retired: int
    lemons_retired: int
    failures_lemon: int
    nodes_from_pool: int
    preemptions: int
    nodes_drained: int
    detect_hours: float
    node_wait_hours: float
    restart_hours: float
    checkpoint_load_hours: float
    rescale_hours: float
    storage_wait_hours: float
    maintenance_hours: float
    health_check_hours: float
    human_wait_hours: float
    stragglers: int
    straggler_hours: float
    rollbacks_beyond_newest: int
    rollback_exhausted: int
    checkpoints_corrupt: int
    lost_gpu_hours: float
    gpu_hours: float
    cost_usd: float
    cost_ideal_usd: float
    cost_slowdown_usd: float
    cost_lost_work_usd: float
    cost_checkpoint_stall_usd: float
    cost_downtime_usd: float
    cost_idle_spares_usd: float
    timeline: list[dict] | None = None
    # one dict per failure that struck (sim/engine/incidents.py), when asked for
    incidents: list[dict] | None = None

    def row(self) -> dict:
        """The record as one row: its plain fields, then a column per failure class (no
        timeline, no incidents). Built field by field: `dataclasses.asdict` deep-copies every
        value, which costs about as much as simulating a short replica."""
        fields = self.__dict__
        row = {name: fields[name] for name in _ROW_FIELDS}
        for name, count in self.failures_by_class.items():
            row[f"failures_{name}"] = count
        return row


# RunRecord's fields in a row, in order (failures_by_class becomes a column per class)
_ROW_FIELDS = tuple(
    name
    for name in RunRecord.__dataclass_fields__
    if name not in ("timeline", "incidents", "failures_by_class")
)


def simulate_replica(
    plan: ReplicaPlan,
    replica: int,
    seed: int,
    injected: Iterable[Failure | StragglerOnset] = (),
    timeline: bool = False,
    incidents: bool = False,
) -> RunRecord:
    """Simulate one replica. `injected` failures (tests, what-ifs) strike at their `time_s`.
    With `timeline`, the record keeps the replica's events; with `incidents`, one row per
    failure that struck (sim/engine/incidents.py)."""
    env = simpy.Environment()
    ledger = Ledger(failures=[0] * len(plan.failure_classes))
    trace: list[dict] | None = [] if timeline else None

    # build
    job_ref: list[Job] = []
    router_ref: list[FailureRouter] = []

    def strike(failure: Failure) -> None:
        router_ref[0].route(failure)

    checks = plan.health_checks is not None
    sources = [
        (
            SuperposedSource
            if failure_clocks.SUPERPOSE and superposable(fc, checks)
            else FailureSource
        )(
            env,
            fc,
            plan.nodes,
            plan.gpus_per_node,
            stream(seed, replica, "failure_lifetimes", fc.index),
            strike,
        )
        for fc in plan.failure_classes
    ]
    for source in sources:
        if plan.aging is not None and source.failure_class.scope in ("gpu", "node"):
            source.aging = plan.aging
    recurring = [fc for fc in plan.failure_classes if fc.refail_prob > 0]
    sources += [
        RecurrenceSource(
            env,
            fc,
            plan.nodes,
            plan.gpus_per_node,
            stream(seed, replica, "recurrences", fc.index),
            strike,
        )
        for fc in recurring
    ]
    idle = IdleClock(env) if any(not fc.while_idle for fc in plan.failure_classes) else None
    clocks = FailureClocks(sources, idle)
    cluster = Cluster(
        env,
        plan,
        LazyStreams(seed, replica, "repair_times"),
        sources,
        on_node_returned=lambda: job_ref[0].node_returned(),
        lemon_rng=stream(seed, replica, "lemons") if plan.lemon_fraction else None,
        fault_rng=stream(seed, replica, "misdiagnosis") if plan.repair else None,
        lasting_rng=stream(seed, replica, "lasting_faults")
        if any(fc.fault_prob > 0 for fc in plan.failure_classes)
        else None,
        spare_rng=stream(seed, replica, "spare_order") if plan.spare_order == "random" else None,
        rate_rng=stream(seed, replica, "node_rates") if plan.node_rate_cv else None,
        refail_rng=stream(seed, replica, "repairs_holding") if recurring else None,
    )
    if plan.repair is not None:
        cluster.shop = RepairShop(
            env, plan.repair, cluster.calendar, Draws(stream(seed, replica, "repair_pipeline"))
        )
    storage = Storage(
        env,
        plan,
        LazyStreams(seed, replica, "storage_repairs"),
    )
    job = Job(env, plan, cluster, ledger, trace)
    job.clocks, job.idle = clocks, idle
    if plan.corrupt_prob > 0:
        job.progress.corrupt_rng = stream(seed, replica, "checkpoint_corruption")
    stragglers = (
        Stragglers(env, job, cluster, stream(seed, replica, "stragglers"))
        if plan.stragglers is not None
        else None
    )
    if stragglers is not None:
        job.straggler_left = stragglers.left
    if plan.stragglers is not None or plan.health_checks is not None:
        cluster.on_left = job.slot_left  # nodes to drain, stragglers: gone with their node
    job_ref.append(job)
    router = FailureRouter(ledger, job, cluster)
    router_ref.append(router)
    job.router = router
    log = Incidents() if incidents else None
    router.incidents = cluster.incidents = log
    if plan.health_checks is not None:
        job.health_rng = stream(seed, replica, "health_checks")
        job.health_ticks = env.process(_every(env, plan.health_checks.every_s, job.health_check))
    if plan.maintenance is not None:
        env.process(_every(env, plan.maintenance.every_s, lambda: _maintenance_due(job)))
    if plan.backup_every or any(fc.scope == "storage" for fc in plan.failure_classes):
        job.progress.storage = storage
        storage.job = job
        router.register(("storage",), storage.strike)
    if plan.fabric is not None:
        fabric = FabricState(
            env,
            plan,
            job,
            LazyStreams(seed, replica, "fabric_repairs"),
        )
        router.register(("link", "switch"), fabric.strike)
    cluster.fill_all()
    for source in sources:
        source.start()
    process = job.start()
    if stragglers is not None:
        stragglers.start()
    for event in injected:
        if isinstance(event, StragglerOnset):
            assert stragglers is not None, "an injected straggler needs a stragglers: section"
            env.process(
                _inject(env, lambda e: stragglers.onset(e.slot, e.slowdown, e.clear_s), event)
            )
        else:
            env.process(_inject(env, strike, event))

    # run
    env.run(until=process)
    cluster.calendar.advance(env.now)  # nodes back by the end
    if stragglers is not None:
        ledger.straggler_s = stragglers.seconds(env.now)

    # finalise
    assert cluster.conserved(), "nodes were not conserved"
    record = _record(plan, replica, seed, job, ledger, cluster, storage, env.now, trace)
    if log is not None:
        record.incidents = log.close(cluster.calendar.still_out())
    return record


def _every(env: simpy.Environment, period_s: float, action) -> Iterable:
    """A clock: `action()` every `period_s` of wall time from the start."""
    while True:
        yield env.timeout(period_s)
        action()


def _maintenance_due(job: Job) -> None:
    job.maintenance_due = True
    job.checkpoint_wanted()


def _inject(env: simpy.Environment, strike, failure: Failure):
    yield env.timeout(failure.time_s)
    strike(failure)


def _record(
    plan: ReplicaPlan,
    replica: int,
    seed: int,
    job: Job,
    ledger: Ledger,
    cluster: Cluster,
    storage: Storage,
    wall_s: float,
    trace: list[dict] | None,
) -> RunRecord:
    wall_s = float(wall_s)
    goodput = ledger.ideal_s / wall_s if wall_s > 0 else math.nan
    lost_work_hours = ledger.lost_work_s / HOUR_S
    # the fleet's own nodes are billed for the whole run, pool nodes while they serve the job
    beyond_job_gpu_hours = (
        (plan.billed_gpus - plan.gpus) * wall_s + cluster.pool_node_seconds() * plan.gpus_per_node
    ) / HOUR_S
    gpu_hours = (
        plan.billed_gpus * wall_s + cluster.pool_node_seconds() * plan.gpus_per_node
    ) / HOUR_S
    # the job's GPUs cost what its wall clock's buckets took; the rest of the bill is the
    # fleet beyond the job (warm spares, pool nodes while they serve)
    job_usd_per_s = plan.gpus * plan.gpu_hour_usd / HOUR_S
    return RunRecord(
        scenario=plan.scenario,
        replica=replica,
        seed=seed,
        finished=job.finished,
        time_to_train_days=wall_s / 86400.0 if job.finished else math.nan,
        wall_hours=wall_s / HOUR_S,
        ideal_hours=ledger.ideal_s / HOUR_S,
        slowdown_hours=ledger.slowdown_s / HOUR_S,
        lost_work_hours=lost_work_hours,
        checkpoint_stall_hours=ledger.checkpoint_stall_s / HOUR_S,
        downtime_hours=ledger.downtime_s / HOUR_S,
        goodput=goodput,
        effective_mfu=plan.mfu * goodput,
        failures=sum(ledger.failures),
        failures_by_class={fc.name: n for fc, n in zip(plan.failure_classes, ledger.failures)},
        checkpoints_written=ledger.checkpoints_written,
        checkpoints_lost=ledger.checkpoints_lost,
        checkpoint_GB_written=ledger.checkpoints_written * plan.checkpoint_GB,
        storage_peak_TB=plan.checkpoint_GB
        * min(plan.keep_last + 1, ledger.checkpoints_written + ledger.checkpoints_lost)
        / 1e3,
        backup_lag_hours=storage.backup_lag_hours(wall_s) if plan.backup_every else math.nan,
        restores_from_backup=ledger.restores_from_backup,
        restarts=ledger.restarts,
        nodes_replaced=cluster.nodes_replaced,
        nodes_retired=cluster.retired,
        lemons_retired=cluster.lemons_retired,
        failures_lemon=ledger.failures_lemon,
        nodes_from_pool=cluster.nodes_from_pool,
        preemptions=cluster.preemptions,
        nodes_drained=ledger.nodes_drained,
        **{column: getattr(ledger, part) / HOUR_S for part, column in DOWNTIME_FIELDS},
        stragglers=ledger.stragglers,
        straggler_hours=ledger.straggler_s / HOUR_S,
        rollbacks_beyond_newest=ledger.rollbacks_beyond_newest,
        rollback_exhausted=ledger.rollback_exhausted,
        checkpoints_corrupt=ledger.checkpoints_corrupt,
        lost_gpu_hours=lost_work_hours * plan.gpus,
        gpu_hours=gpu_hours,
        cost_usd=gpu_hours * plan.gpu_hour_usd,
        cost_ideal_usd=ledger.ideal_s * job_usd_per_s,
        cost_slowdown_usd=ledger.slowdown_s * job_usd_per_s,
        cost_lost_work_usd=ledger.lost_work_s * job_usd_per_s,
        cost_checkpoint_stall_usd=ledger.checkpoint_stall_s * job_usd_per_s,
        cost_downtime_usd=ledger.downtime_s * job_usd_per_s,
        cost_idle_spares_usd=beyond_job_gpu_hours * plan.gpu_hour_usd,
        timeline=trace,
    )
