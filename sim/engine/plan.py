"""The engine's typed view of one scenario point, computed once and shipped to workers.

`build_plan` turns a validated `Scenario` into numbers (seconds, counts); the
engine never looks at the scenario itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from sim.engine.aging import FleetAge
from sim.engine.degradation import FabricDegradation
from sim.model import batch, checkpoints, perf, reliability
from sim.model.distributions import Distribution, lifetime
from sim.model.schema import WEEKDAYS, Scenario


@dataclass(frozen=True)
class FailureClassPlan:
    index: int
    name: str
    scope: str  # gpu | node | job | link | switch
    components: int  # job-wide scopes: the job (1), the fabric's cables or switches
    lifetime_s: Distribution  # of one component
    detect_s: float
    replace: bool
    repair_mean_s: float
    loses_data: bool = False
    attributable: bool = False  # a node's fault: nodes with a lasting fault fail more often
    fault_prob: float = 0.0  # a failure comes from a lasting fault of its node (attributable)
    while_idle: bool = True  # false: strikes only while the job computes
    rollback_checkpoints: int = 1  # recovery restarts from the n-th newest kept checkpoint
    silent: bool = False  # silent data corruption: found only after detect_s, rolls back past it
    needs_human: bool = False  # recovery waits for the on-call engineer
    in_service: bool = False  # at the start, residual lives of components long in service
    refail_prob: float = 0.0  # the node's repair of a failure of the class does not hold ...
    refail_s: float = 0.0  # ... and the class fails on it again after this long (mean)


@dataclass(frozen=True)
class StragglerPlan:
    """Slow nodes (scenario `stragglers:`) in seconds and per-node rates."""

    rate_per_node_s: float  # onsets per node-second (a healthy node)
    slowdown: float
    slowdown_max: float  # == slowdown: every straggler the same
    detect_s: float  # inf: never detected
    detect_threshold: float
    clear_mean_s: float  # inf: never clears by itself
    repair_mean_s: float
    attributable: bool


@dataclass(frozen=True)
class OncallPlan:
    """On-call response times (scenario `oncall:`) and the working day, in seconds."""

    response_s: float
    night_response_s: float
    weekend_response_s: float
    workday_start_s: float  # seconds after midnight
    workday_end_s: float

    def response_at(self, week_s: float) -> float:
        """The response time for a call at `week_s` seconds after Monday 00:00."""
        day, clock = divmod(week_s % (7 * 86400.0), 86400.0)
        if day >= 5:
            return self.weekend_response_s
        if self.workday_start_s <= clock < self.workday_end_s:
            return self.response_s
        return self.night_response_s


@dataclass(frozen=True)
class RepairPlan:
    """The repair pipeline in seconds (scenario `repair:`)."""

    auto_s: float
    escalate_prob: float
    auto_false_fix_prob: float
    manual_s: float
    manual_false_fix_prob: float
    technicians: int  # 0: unlimited
    rma_after_manual_repairs: int
    rma_s: float
    retire_after_failures: int  # 0: never retire
    retire_window_s: float
    return_to: str  # spares | origin
    misdiagnosis_prob: float


@dataclass(frozen=True)
class HealthCheckPlan:
    every_s: float
    cost_s: float
    catch_prob: float
    lead_s: float


@dataclass(frozen=True)
class MaintenancePlan:
    every_s: float
    duration_s: float


@dataclass(frozen=True)
class ReplicaPlan:
    scenario: str
    nodes: int
    gpus_per_node: int
    spare_nodes: int
    gpus_per_replica: int
    full_replicas: int
    step_s: float  # nominal step of the full job
    total_steps: int
    interval_steps: int
    checkpoint_GB: float
    tier_write_GB_s: float
    tier_read_GB_s: float
    client_GB_s_per_node: float
    tier_latency_s: float
    keep_last: int
    read_GB_per_step: float  # data reads on the checkpoint tier (shared data tier), else 0
    memory_every: int  # 0: no in-memory level
    mode: str  # sync | async
    snapshot_GB_s_per_node: float
    restart_s: float  # launch part, the checkpoint load comes on top
    rescale_s: float
    policy: str
    elastic_min_replicas: int
    horizon_s: float
    mfu: float
    gpu_hour_usd: float
    failure_classes: tuple[FailureClassPlan, ...]
    fabric: FabricDegradation | None = None  # only when link or switch failures are simulated
    pool_nodes: int = 0  # cold pool
    host_selection_s: float = 0.0
    preemptible_nodes: int = 0
    preemption_s: float = 0.0
    lemon_fraction: float = 0.0
    lemon_multiplier: float = 1.0
    lemons_permanent: bool = False  # a true fix does not cure a lemon
    node_rate_cv: float = 0.0  # the spread of the nodes' own rate multipliers (gamma, mean 1)
    aging: FleetAge | None = None  # the fleet's power-law trend of the node classes' rates
    spare_order: str = "oldest"  # oldest | newest | random: which warm spare fills a slot
    repair: RepairPlan | None = None  # None: the flat per-class repair_hours
    health_checks: HealthCheckPlan | None = None
    maintenance: MaintenancePlan | None = None
    backup_every: int = 0  # 0: no backup tier
    backup_copy_s: float = 0.0
    backup_restore_s: float = 0.0
    corrupt_prob: float = 0.0  # each checkpoint written is corrupt with this probability
    validate: bool = False  # every checkpoint is read back after its write; corrupt ones rewritten
    stragglers: StragglerPlan | None = None
    oncall: OncallPlan | None = None
    week_start_s: float = 0.0  # the run's start, seconds after Monday 00:00
    # nominal step times with elastic_min_replicas, ..., full_replicas data-parallel
    # replicas (sim.model.perf's step model); empty: the step grows as full/replicas (a fixed
    # MFU, an abstract job, or a policy that never shrinks)
    step_s_by_replicas: tuple[float, ...] = ()

    @cached_property  # read by every replica's build (the plan is frozen: computed once)
    def keeps_history(self) -> bool:
        """Whether recovery may roll back past the newest durable checkpoint (loss spikes,
        silent corruption, corrupt checkpoints): the kept checkpoints are then tracked."""
        return self.corrupt_prob > 0 or any(
            fc.rollback_checkpoints > 1 or fc.silent for fc in self.failure_classes
        )

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def fleet_nodes(self) -> int:
        """Every node of the cluster: the job's, the warm spares, the cold and preemptible pools."""
        return self.nodes + self.spare_nodes + self.pool_nodes + self.preemptible_nodes

    @cached_property
    def faults_matter(self) -> bool:
        """Whether a lasting fault changes a node's hazard: the multiplier is above 1 and a
        node can have one (lemons, or a node-attributable class with `fault_prob` > 0). False
        fixes and misdiagnoses only keep faults that exist: alone they make none."""
        return self.node_rate_cv > 0 or (
            self.lemon_multiplier != 1.0
            and (
                self.lemon_fraction > 0
                or any(fc.attributable and fc.fault_prob > 0 for fc in self.failure_classes)
            )
        )

    @property
    def billed_gpus(self) -> int:
        return (self.nodes + self.spare_nodes) * self.gpus_per_node

    def write_s(self, nodes: int) -> float:
        """Writing a whole checkpoint to the tier from `nodes` nodes (plus the tier's latency)."""
        return self.tier_latency_s + self.checkpoint_GB / checkpoints.storage_GB_s(
            self.tier_write_GB_s, nodes, self.client_GB_s_per_node
        )

    def snapshot_s(self, nodes: int) -> float:
        """The blocking part of a checkpoint: the write (sync) or the device-to-host copy (async)."""
        if self.mode == "sync":
            return self.write_s(nodes) + self.validate_s(nodes)
        return self.checkpoint_GB / nodes / self.snapshot_GB_s_per_node

    def validate_s(self, nodes: int) -> float:
        """Reading a checkpoint back to validate it (0 without validation)."""
        return self.load_s(nodes) if self.validate else 0.0

    def memory_s(self, nodes: int) -> float:
        """An in-memory checkpoint: the device-to-host copy (the copy to a peer overlaps it)."""
        return (
            self.checkpoint_GB / nodes / self.snapshot_GB_s_per_node if self.memory_every else 0.0
        )

    def drain_s(self, nodes: int, replicas: int | None = None) -> float:
        """The background part of a checkpoint: none (sync), or host memory to the tier
        (async), sharing the tier with the data reads when they use it too."""
        if self.mode == "sync":
            return 0.0
        if not self.read_GB_per_step:
            return self.write_s(nodes) + self.validate_s(nodes)
        step = self.step_s_with(self.replicas_on(nodes) if replicas is None else replicas)
        _, drain = self._drain_shares(nodes, step)
        return self.tier_latency_s + self.checkpoint_GB / drain + self.validate_s(nodes)

    def load_s(self, nodes: int) -> float:
        return self.tier_latency_s + self.checkpoint_GB / checkpoints.storage_GB_s(
            self.tier_read_GB_s, nodes, self.client_GB_s_per_node
        )

    def replicas_on(self, nodes: int) -> int:
        """Whole data-parallel replicas that fit on `nodes` nodes (capped at the full job)."""
        return min(self.full_replicas, nodes * self.gpus_per_node // self.gpus_per_replica)

    def nodes_for(self, replicas: int) -> int:
        return math.ceil(replicas * self.gpus_per_replica / self.gpus_per_node)

    def shrunk_step_s(self, replicas: int) -> float:
        """The nominal step on `replicas` data-parallel replicas. The global batch is fixed,
        so each replica computes more: the step model's time (more microbatches shrink the
        bubble, a smaller all-reduce group changes its cost), or proportionally longer
        without a table."""
        index = replicas - self.elastic_min_replicas
        if self.step_s_by_replicas and 0 <= index < len(self.step_s_by_replicas):
            return self.step_s_by_replicas[index]
        return self.step_s * self.full_replicas / replicas

    def step_s_with(self, replicas: int) -> float:
        """The nominal step on `replicas` replicas (`shrunk_step_s`). With a shared data
        tier a step also waits for its data when the tier cannot feed it."""
        compute = self.shrunk_step_s(replicas)
        if self.read_GB_per_step:
            return max(compute, self.read_GB_per_step / self.tier_read_GB_s)
        return compute

    def _drain_shares(self, nodes: int, step_s: float) -> tuple[float, float]:
        """Max-min fair shares (reads, drain) of the tier's write bandwidth while a drain runs."""
        capacity = self.tier_write_GB_s
        reads = self.read_GB_per_step / step_s
        drain = nodes * self.client_GB_s_per_node
        if reads + drain <= capacity:
            return reads, drain
        half = capacity / 2.0
        if reads <= half:
            return reads, capacity - reads
        if drain <= half:
            return capacity - drain, drain
        return half, half

    def slow_step_s(self, nodes: int, replicas: int) -> float:
        """A step while an async drain shares the tier with the data reads."""
        step = self.step_s_with(replicas)
        if self.mode != "async" or not self.read_GB_per_step:
            return step
        reads, _ = self._drain_shares(nodes, step)
        return max(step, self.read_GB_per_step / reads)


def build_plan(scenario: Scenario) -> ReplicaPlan:
    tier = scenario.storage.checkpoint_tier
    classes = tuple(
        FailureClassPlan(
            index=i,
            name=f.name,
            scope=f.scope,
            components=reliability.components(f, scenario)
            if f.scope in ("job", "link", "switch", "storage")
            else 0,
            lifetime_s=lifetime(
                f.distribution,
                reliability.component_mtbf_hours(f, scenario) * perf.HOUR_S,
                f.weibull_shape,
                f.lognormal_sigma,
            ),
            detect_s=f.detect_minutes * 60.0
            if f.detect_hours is None
            else f.detect_hours * perf.HOUR_S,
            replace=f.replaces_nodes,
            repair_mean_s=f.repair_hours * perf.HOUR_S,
            loses_data=f.loses_data,
            attributable=f.attributable,
            fault_prob=f.fault_prob,
            while_idle=f.while_idle,
            rollback_checkpoints=f.rollback_checkpoints,
            silent=f.silent,
            needs_human=f.needs_human,
            in_service=f.age == "in_service",
            refail_prob=f.refail_prob,
            refail_s=f.refail_hours * perf.HOUR_S,
        )
        for i, f in enumerate(scenario.failures)
    )
    cluster, repair = scenario.cluster, scenario.repair
    health, maintenance = scenario.health_checks, scenario.maintenance
    full_replicas = batch.data_parallel_size(scenario)
    elastic_min_replicas = max(
        1, math.ceil(scenario.recovery.elastic_min_fraction * full_replicas - 1e-9)
    )
    return ReplicaPlan(
        scenario=scenario.name,
        nodes=scenario.cluster.nodes,
        gpus_per_node=scenario.cluster.gpus_per_node,
        spare_nodes=scenario.cluster.spare_nodes,
        gpus_per_replica=batch.gpus_per_replica(scenario),
        full_replicas=full_replicas,
        step_s=perf.step_time_s(scenario),
        total_steps=perf.total_steps(scenario)
        if scenario.simulation.until == "finished"
        # never finished: more steps than the horizon holds at full speed
        else max(
            perf.total_steps(scenario),
            math.ceil(scenario.simulation.horizon_days * perf.DAY_S / perf.step_time_s(scenario))
            + 1,
        ),
        interval_steps=reliability.interval_steps(scenario),
        checkpoint_GB=checkpoints.checkpoint_GB(scenario),
        tier_write_GB_s=checkpoints.tier_share_GB_s(
            tier.write_GB_s, scenario.storage.background_load
        ),
        tier_read_GB_s=checkpoints.tier_share_GB_s(
            tier.read_GB_s, scenario.storage.background_load
        ),
        client_GB_s_per_node=scenario.storage.client_GB_s_per_node,
        tier_latency_s=tier.latency_ms / 1e3,
        keep_last=scenario.checkpoint.keep_last,
        read_GB_per_step=(
            scenario.storage.data_bytes_per_token * scenario.model.global_batch_tokens / 1e9
            if scenario.storage.data_tier == "shared"
            else 0.0
        ),
        memory_every=scenario.checkpoint.memory_every_steps or 0,
        mode=scenario.checkpoint.mode,
        snapshot_GB_s_per_node=scenario.checkpoint.snapshot_GB_s_per_node,
        restart_s=scenario.recovery.restart_minutes * 60.0,
        rescale_s=scenario.recovery.rescale_minutes * 60.0,
        policy=scenario.recovery.policy,
        elastic_min_replicas=elastic_min_replicas,
        step_s_by_replicas=perf.step_times_by_replicas(scenario, elastic_min_replicas)
        if scenario.recovery.policy == "elastic"
        else (),
        horizon_s=scenario.simulation.horizon_days * perf.DAY_S,
        mfu=perf.mfu(scenario),
        gpu_hour_usd=scenario.cost.gpu_hour_usd,
        failure_classes=classes,
        backup_every=scenario.storage.backup.every if scenario.storage.backup else 0,
        backup_copy_s=checkpoints.backup_copy_s(scenario) if scenario.storage.backup else 0.0,
        backup_restore_s=checkpoints.backup_restore_s(scenario) if scenario.storage.backup else 0.0,
        fabric=FabricDegradation(scenario)
        if any(f.scope in ("link", "switch") for f in scenario.failures)
        else None,
        pool_nodes=cluster.pool_nodes,
        host_selection_s=cluster.host_selection_minutes * 60.0,
        preemptible_nodes=cluster.preemptible_nodes,
        preemption_s=cluster.preemption_minutes * 60.0,
        lemon_fraction=cluster.lemon_fraction,
        lemon_multiplier=cluster.lemon_rate_multiplier,
        lemons_permanent=cluster.lemons_permanent,
        node_rate_cv=cluster.node_rate_cv,
        aging=FleetAge(
            start_s=cluster.aging.start_days * perf.DAY_S,
            rated_s=cluster.aging.rated_at_days * perf.DAY_S,
            beta=cluster.aging.beta,
        )
        if cluster.aging is not None and cluster.aging.beta != 1.0
        else None,
        spare_order=cluster.spare_order,
        repair=RepairPlan(
            auto_s=repair.auto_minutes * 60.0,
            escalate_prob=repair.escalate_prob,
            auto_false_fix_prob=repair.auto_false_fix_prob,
            manual_s=repair.manual_hours * perf.HOUR_S,
            manual_false_fix_prob=repair.manual_false_fix_prob,
            technicians=repair.technicians or 0,
            rma_after_manual_repairs=repair.rma_after_manual_repairs,
            rma_s=repair.rma_days * perf.DAY_S,
            retire_after_failures=repair.retire_after_failures or 0,
            retire_window_s=repair.retire_window_days * perf.DAY_S,
            return_to=repair.return_to,
            misdiagnosis_prob=repair.misdiagnosis_prob,
        )
        if repair is not None
        else None,
        health_checks=HealthCheckPlan(
            every_s=health.every_hours * perf.HOUR_S,
            cost_s=health.cost_minutes * 60.0,
            catch_prob=health.catch_prob,
            lead_s=health.lead_hours * perf.HOUR_S,
        )
        if health is not None
        else None,
        maintenance=MaintenancePlan(
            every_s=maintenance.every_days * perf.DAY_S,
            duration_s=maintenance.duration_hours * perf.HOUR_S,
        )
        if maintenance is not None
        else None,
        corrupt_prob=scenario.checkpoint.corrupt_prob,
        validate=scenario.checkpoint.validate_writes,
        stragglers=_straggler_plan(scenario),
        oncall=_oncall_plan(scenario),
        week_start_s=WEEKDAYS.index(scenario.simulation.start_weekday) * perf.DAY_S
        + scenario.simulation.start_hour * perf.HOUR_S,
    )


def _straggler_plan(scenario: Scenario) -> StragglerPlan | None:
    s = scenario.stragglers
    if s is None:
        return None
    return StragglerPlan(
        # rate per 1,000 GPU-days → onsets per node-second
        rate_per_node_s=s.rate_per_1k_gpu_day * scenario.cluster.gpus_per_node / 1000 / perf.DAY_S,
        slowdown=s.slowdown,
        slowdown_max=s.slowdown if s.slowdown_max is None else s.slowdown_max,
        detect_s=math.inf if s.detect_hours is None else s.detect_hours * perf.HOUR_S,
        detect_threshold=s.detect_threshold,
        clear_mean_s=math.inf if s.clear_hours is None else s.clear_hours * perf.HOUR_S,
        repair_mean_s=s.repair_hours * perf.HOUR_S,
        attributable=s.node_attributable,
    )


def _oncall_plan(scenario: Scenario) -> OncallPlan | None:
    o = scenario.oncall
    if o is None:
        return None
    return OncallPlan(
        response_s=o.response_minutes * 60.0,
        night_response_s=o.night_response_minutes * 60.0,
        weekend_response_s=o.weekend_response_minutes * 60.0,
        workday_start_s=o.workday_start_hour * perf.HOUR_S,
        workday_end_s=o.workday_end_hour * perf.HOUR_S,
    )
