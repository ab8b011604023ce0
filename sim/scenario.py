"""Scenario files: safe YAML loading, `--set`/`--param` overrides, sweep expansion
and validation into frozen pydantic models.

This is the only place raw dicts exist. Everything downstream receives a
validated `Scenario` (or one of its typed sub-configs). Every problem is raised
as a `ScenarioError` that names the file, the key path and what was expected.
"""

from __future__ import annotations

import copy
import itertools
import math
import reprlib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from sim.hardware import GPUS, TIERS, GpuSpec

_NAME = r"^[a-z0-9_-]+$"

# Limits on the input itself, so that no file or command line can exhaust memory or
# the stack before validation has a chance to name the problem.
MAX_FILE_BYTES = 1_000_000  # a scenario file; the shipped ones are ~2 kB
MAX_DEPTH = 20  # nesting of mappings and lists, aliases expanded (the schema needs ~6)
MAX_NODES = 100_000  # values in a document once its aliases are expanded
MAX_POINTS = 10_000  # sweep points (the product of the sweep lists' lengths)
MAX_ECHO = 80  # characters of a value quoted back in an error message
MAX_PROBLEMS = 5  # validation problems listed in one message

# Bounds on numbers no real scenario reaches. They keep every derived figure finite
# (no overflow to inf, no OverflowError) and are named in pydantic's message.
MAX_DAYS = 3652.5  # ten years: any duration (minutes, hours, days) a scenario gives
MAX_HOURS = MAX_DAYS * 24
MAX_MINUTES = MAX_HOURS * 60
MIN_GB_S, MAX_GB_S = 1e-3, 1e7  # any bandwidth: 1 MB/s to 10 PB/s
MAX_SEED = 2**63 - 1  # the replica table stores the seed as int64


class ScenarioError(Exception):
    """Bad input: a one-paragraph message naming the file and key path."""

    def __init__(self, source: str, path: str, message: str):
        self.source, self.path, self.message = source, path, message
        shown = path if len(path) <= 2 * MAX_ECHO else path[: 2 * MAX_ECHO - 3] + "..."
        where = f"{source}: {shown}: " if path else f"{source}: "
        super().__init__(where + message)


_echo_repr = reprlib.Repr()
_echo_repr.maxlevel, _echo_repr.maxdict, _echo_repr.maxlist = 3, 4, 6
_echo_repr.maxstring = _echo_repr.maxother = _echo_repr.maxlong = MAX_ECHO


def echo(value: Any) -> str:
    """A value as quoted back in an error message: repr, at most MAX_ECHO characters
    (reprlib: a huge nested value is never expanded in full)."""
    text = _echo_repr.repr(value)
    return text if len(text) <= MAX_ECHO else text[: MAX_ECHO - 3] + "..."


class KeyPathError(ValueError):
    """A cross-field check that knows which key is at fault (pydantic reports the parent)."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


class _Section(BaseModel):
    # allow_inf_nan=False: .inf, .nan (and the strings "inf", "nan") are refused everywhere
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Common bounds (the fields below state the rest where they are declared).
Bandwidth = Annotated[float, Field(ge=MIN_GB_S, le=MAX_GB_S)]  # GB/s
Minutes = Annotated[float, Field(ge=0, le=MAX_MINUTES)]
PositiveMinutes = Annotated[float, Field(gt=0, le=MAX_MINUTES)]
PositiveHours = Annotated[float, Field(gt=0, le=MAX_HOURS)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Efficiency = Annotated[float, Field(ge=0.01, le=1)]  # a share of a peak that a time divides by
Count = Annotated[int, Field(gt=0, le=10**6, strict=True)]
Steps = Annotated[int, Field(gt=0, le=10**17, strict=True)]  # as many as tokens can make
NodeCount = Annotated[int, Field(ge=0, le=10**6, strict=True)]
Probability = Annotated[float, Field(ge=0, le=1)]


class ModelConfig(_Section):
    params: Annotated[float, Field(gt=0, le=1e15)]
    tokens: Annotated[float, Field(gt=0, le=1e17)]
    global_batch_tokens: Annotated[int, Field(gt=0, le=10**10, strict=True)]
    seq_len: Annotated[int, Field(gt=0, le=10**8, strict=True)] | None = None
    layers: Count | None = None
    hidden: Annotated[int, Field(gt=0, le=10**7, strict=True)] | None = None
    flops_per_token: Annotated[float, Field(gt=0, le=1e18)] | None = None


class GpuConfig(_Section):
    """A GPU given inline instead of by catalogue name."""

    name: Annotated[str, Field(min_length=1, max_length=64)]
    peak_tflops: Annotated[float, Field(ge=1e-3, le=1e6)]
    memory_GB: Annotated[float, Field(gt=0, le=1e6)] = 80.0
    hbm_TB_s: Annotated[float, Field(ge=MIN_GB_S / 1e3, le=MAX_GB_S / 1e3)] = 3.35
    nvlink_GB_s: Bandwidth = 900.0


class ClusterConfig(_Section):
    gpu: str | GpuConfig
    nodes: Count
    gpus_per_node: Annotated[int, Field(gt=0, le=1024, strict=True)] = 8
    spare_nodes: NodeCount = 0  # warm spares: swap in at once
    pool_nodes: NodeCount = 0  # cold pool: usable after host_selection_minutes
    host_selection_minutes: Minutes = 3.0
    preemptible_nodes: NodeCount = 0  # borrowed from other work, used last ...
    preemption_minutes: Minutes = 20.0  # ... after this long
    # share of all nodes (job, spares, pools) that start with a fault: they fail
    # lemon_rate_multiplier times as often in node-attributable classes until a true fix
    lemon_fraction: Annotated[float, Field(ge=0, lt=1)] = 0.0
    lemon_rate_multiplier: Annotated[float, Field(ge=1, le=1000)] = 5.0
    # DGX/HGX H100: 2 TB of host RAM per node
    host_memory_GB: Annotated[float, Field(gt=0, le=1e7)] = 2048.0

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str | GpuConfig) -> str | GpuConfig:
        if isinstance(value, str) and value not in GPUS:
            raise ValueError(
                f"unknown GPU {value!r}; expected one of {', '.join(sorted(GPUS))} "
                "or a mapping {name, peak_tflops, memory_GB}"
            )
        return value

    @property
    def gpu_spec(self) -> GpuSpec:
        if isinstance(self.gpu, str):
            return GPUS[self.gpu]
        return GpuSpec(**self.gpu.model_dump())

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class ParallelismConfig(_Section):
    tensor: Count = 1
    pipeline: Count = 1
    microbatches: Count | None = None


class PerformanceConfig(_Section):
    """Exactly one of `mfu` (step time follows directly) or `compute_efficiency`
    (matmul efficiency; MFU then follows from the bubble and exposed communication)."""

    mfu: Efficiency | None = None
    compute_efficiency: Efficiency | None = None
    overlap: Annotated[float, Field(ge=0, le=1)] = 0.8

    @model_validator(mode="after")
    def _one_mode(self) -> PerformanceConfig:
        if (self.mfu is None) == (self.compute_efficiency is None):
            raise ValueError("give exactly one of mfu or compute_efficiency")
        return self


def fat_tree_ports(radix: int, oversubscription: float) -> tuple[int, int]:
    """Leaf ports facing (endpoints, spines): split down:up = oversubscription:1."""
    up = max(1, round(radix / (1.0 + oversubscription)))
    return radix - up, up


def max_fat_tree_endpoints(radix: int, oversubscription: float) -> int:
    """Endpoints a three-tier fat tree of this radix can serve (radix³/4 when non-blocking)."""
    down, _ = fat_tree_ports(radix, oversubscription)
    return int(radix**3 // 4 * down / (radix / 2))


class NetworkConfig(_Section):
    """The InfiniBand fabric between nodes (NVLink inside a node comes from the GPU)."""

    link_Gb_s: Annotated[float, Field(ge=8 * MIN_GB_S, le=8 * MAX_GB_S)] = 400.0
    # the scenario fills in cluster.gpus_per_node when not given
    nics_per_node: Annotated[int, Field(gt=0, le=1024, strict=True)] = 8
    topology: Literal["fat-tree"] = "fat-tree"
    switch_radix: Annotated[int, Field(ge=4, le=4096, strict=True)] = 64
    oversubscription: Annotated[float, Field(ge=1, le=1000)] = 1.0
    collective: Literal["ring", "tree", "auto"] = "ring"
    latency_us: Annotated[float, Field(ge=0, le=1e6)] = 5.0
    # nccl-tests: ~46-48 GB/s per 400 Gb/s NDR NIC -> 47/50 (docs/references.md)
    efficiency: Efficiency = 0.94
    # nccl-tests: ~370 GB/s intra-node busbw of 450 GB/s per direction on H100 NVLink
    nvlink_efficiency: Efficiency = 0.82
    placement: Literal["contiguous", "scattered"] = "contiguous"

    @field_validator("switch_radix")
    @classmethod
    def _even_radix(cls, value: int) -> int:
        if value % 2:
            raise ValueError(
                f"switch_radix must be even (half the ports face down, half up); got {value}"
            )
        return value


class TierConfig(_Section):
    """A storage tier: `kind` fills typical figures (sim.hardware.TIERS) that any key overrides.
    A Lustre tier may give its write bandwidth as `osts` × `ost_GB_s` instead."""

    kind: Literal["lustre", "gpfs", "weka", "nfs", "object"] = "lustre"
    write_GB_s: Bandwidth
    read_GB_s: Bandwidth
    capacity_TB: Annotated[float, Field(gt=0, le=1e9)]
    latency_ms: Annotated[float, Field(ge=0, le=1e6)]
    osts: Count | None = None
    ost_GB_s: Bandwidth | None = None

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kind = data.get("kind", cls.model_fields["kind"].default)
        preset = TIERS.get(kind) if isinstance(kind, str) else None
        if preset is None:
            return data  # the Literal check names the kinds
        data = dict(data)
        if "osts" in data or "ost_GB_s" in data:
            if kind != "lustre":
                raise ValueError(f"osts and ost_GB_s describe a Lustre tier, not {kind!r}")
            if "write_GB_s" in data:
                raise ValueError("give write_GB_s or osts (× ost_GB_s), not both")
            osts, per_ost = data.get("osts"), data.get("ost_GB_s", preset.ost_GB_s)
            if (
                isinstance(osts, int)
                and isinstance(per_ost, int | float)
                and 0 < osts <= 10**6
                and MIN_GB_S <= per_ost <= MAX_GB_S  # else the field check names the key
            ):
                data["write_GB_s"] = osts * per_ost
                data.setdefault("read_GB_s", osts * per_ost * preset.read_GB_s / preset.write_GB_s)
                data.setdefault("ost_GB_s", per_ost)
        for key in ("write_GB_s", "read_GB_s", "capacity_TB", "latency_ms"):
            data.setdefault(key, getattr(preset, key))
        return data


class BackupConfig(TierConfig):
    """A second tier that every `every`-th durable checkpoint is copied to in the background."""

    kind: Literal["lustre", "gpfs", "weka", "nfs", "object"] = "object"
    every: Count = 1


class StorageConfig(_Section):
    checkpoint_tier: TierConfig
    client_GB_s_per_node: Bandwidth = 25.0
    data_tier: Literal["separate", "shared"] = (
        "separate"  # shared: data reads compete with checkpoints
    )
    data_bytes_per_token: Annotated[float, Field(ge=0, le=1e9)] = 4.0  # read per token
    background_load: Annotated[float, Field(ge=0, lt=1)] = (
        0.0  # share of the tier other tenants use
    )
    backup: BackupConfig | None = None


class CheckpointConfig(_Section):
    interval_steps: Steps | None = None
    interval_minutes: PositiveMinutes | None = None
    interval: Literal["young", "daly"] | None = None
    mode: Literal["sync", "async"] = "sync"
    state_bytes_per_param: Annotated[float, Field(gt=0, le=1000)] = 14.0
    keep_last: Count = 5
    snapshot_GB_s_per_node: Bandwidth = 50.0  # async: device-to-host copy, the part that blocks
    memory_every_steps: Steps | None = None  # in-memory level in peer hosts' RAM
    # each checkpoint written is corrupt with this probability; without validation that is
    # found only when a restart loads it (the load fails, the previous kept one is tried)
    corrupt_prob: Annotated[float, Field(ge=0, lt=1)] = 0.0
    # read every checkpoint back after its write (sync: blocking; async: in the drain) and
    # rewrite a corrupt one ("validate" in YAML; the attribute name is taken by pydantic)
    validate_writes: bool = Field(False, alias="validate")

    @model_validator(mode="after")
    def _one_interval(self) -> CheckpointConfig:
        given = [
            k
            for k in ("interval_steps", "interval_minutes", "interval")
            if getattr(self, k) is not None
        ]
        if len(given) != 1:
            found = " and ".join(given) if given else "none"
            raise ValueError(
                "give exactly one of interval_steps, interval_minutes, interval (young | daly); "
                f"found {found}"
            )
        return self


class FailureClassConfig(_Section):
    name: Annotated[str, Field(pattern=r"^[a-z0-9_]+$", max_length=64)]
    scope: Literal["gpu", "node", "job", "link", "switch", "storage"]
    # 1e-3 h is 3.6 s; 1e15 h (a hundred billion years) is how tests say "never"
    mtbf_hours: Annotated[float, Field(ge=1e-3, le=1e15)] | None = None
    rate_per_1k_gpu_day: Annotated[float, Field(ge=1e-9, le=1e6)] | None = None
    distribution: Literal["exponential", "weibull", "lognormal"] = "exponential"
    weibull_shape: Annotated[float, Field(ge=0.05, le=100)] | None = None
    lognormal_sigma: Annotated[float, Field(gt=0, le=5)] | None = None
    detect_minutes: Minutes = 3.0
    detect_hours: Annotated[float, Field(ge=0, le=MAX_HOURS)] | None = None  # or in hours
    replace: bool | None = None
    repair_hours: PositiveHours = 48.0
    loses_data: bool = False  # storage: the outage destroys the checkpoints on the tier
    # false: the class strikes only while the job computes (not while it is down)
    while_idle: bool = True
    # lemons and falsely fixed nodes fail more often in this class (default: gpu, node)
    node_attributable: bool | None = None
    # recovery rolls back this many checkpoints (a loss spike: 2 = past the newest one)
    rollback_checkpoints: Count = 1
    # silent data corruption: the job runs on until detection (detect_hours), then rolls
    # back to the newest checkpoint written before the corruption
    silent: bool = False
    # recovery waits for the on-call engineer (`oncall:`) before the restart
    needs_human: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> FailureClassConfig:
        if self.detect_hours is not None and "detect_minutes" in self.model_fields_set:
            raise KeyPathError("detect_hours", "give at most one of detect_minutes or detect_hours")
        if self.node_attributable and self.scope not in ("gpu", "node"):
            raise KeyPathError(
                "node_attributable",
                f"node_attributable: true needs scope gpu or node (a {self.scope} failure "
                "is not a node's fault)",
            )
        if self.silent and self.scope not in ("gpu", "node", "job"):
            raise KeyPathError(
                "silent",
                f"silent: true needs scope gpu, node or job (a {self.scope} failure is not "
                "a corruption of the training state)",
            )
        if self.loses_data and self.scope != "storage":
            raise ValueError("loses_data is only meaningful with scope: storage")
        if (self.mtbf_hours is None) == (self.rate_per_1k_gpu_day is None):
            raise ValueError("give exactly one of mtbf_hours or rate_per_1k_gpu_day")
        if self.distribution == "weibull" and self.weibull_shape is None:
            raise ValueError("distribution weibull needs weibull_shape")
        if self.distribution != "weibull" and self.weibull_shape is not None:
            raise ValueError("weibull_shape is only meaningful with distribution: weibull")
        if self.distribution == "lognormal" and self.lognormal_sigma is None:
            raise ValueError("distribution lognormal needs lognormal_sigma")
        if self.distribution != "lognormal" and self.lognormal_sigma is not None:
            raise ValueError("lognormal_sigma is only meaningful with distribution: lognormal")
        if self.replace and self.scope in ("job", "link", "storage"):
            raise KeyPathError(
                "replace",
                f"replace: true needs scope gpu, node or switch (a {self.scope} failure "
                "has no node to swap)",
            )
        return self

    @property
    def attributable(self) -> bool:
        """`node_attributable` defaults to true for the gpu and node scopes."""
        if self.node_attributable is None:
            return self.scope in ("gpu", "node")
        return self.node_attributable

    @property
    def replaces_nodes(self) -> bool:
        """`replace` defaults to true for hardware scopes and false for the job."""
        return (
            self.scope not in ("job", "link", "storage") if self.replace is None else self.replace
        )


class RecoveryConfig(_Section):
    policy: Literal["restart", "elastic"] = "restart"
    restart_minutes: Minutes = 10.0
    elastic_min_fraction: Fraction = 0.75
    rescale_minutes: Minutes = 5.0


class RepairConfig(_Section):
    """The repair pipeline a replaced node goes through (instead of the flat per-class
    `repair_hours`): automated repair, escalation to a technician, a vendor RMA for
    nodes manual repair keeps failing, false fixes, and retirement."""

    auto_minutes: PositiveMinutes = 120.0  # automated repair (reboot, reset, reimage)
    escalate_prob: Probability = 0.8  # automated repair fails over to manual
    auto_false_fix_prob: Probability = 0.4  # "repaired" but still faulty
    manual_hours: PositiveHours = 48.0  # a technician's repair
    manual_false_fix_prob: Probability = 0.2
    technicians: Count | None = None  # concurrent manual repairs (None: unlimited)
    rma_after_manual_repairs: Count = 2  # a node manual repair has seen this often goes ...
    rma_days: Annotated[float, Field(gt=0, le=MAX_DAYS)] = 14.0  # ... to the vendor instead
    retire_after_failures: Count | None = None  # retire a node after this many failures ...
    retire_window_days: Annotated[float, Field(gt=0, le=MAX_DAYS)] = 7.0  # ... within this
    return_to: Literal["spares", "origin"] = "spares"  # refill warm spares first, or its pool
    misdiagnosis_prob: Annotated[float, Field(ge=0, lt=1)] = 0.0  # the wrong node goes


class HealthChecksConfig(_Section):
    """Periodic checks of the job's nodes that catch failing hardware before it fails."""

    every_hours: PositiveHours = 24.0
    cost_minutes: Minutes = 10.0  # downtime of the job while the check runs
    catch_prob: Probability = 0.5  # share of node failures caught ...
    lead_hours: PositiveHours = 12.0  # ... that would strike within this lead


class MaintenanceConfig(_Section):
    """Planned interruptions: at its next checkpoint after every `every_days`, the job
    stops for `duration_hours` and restarts (downtime, no lost work)."""

    every_days: Annotated[float, Field(gt=0, le=MAX_DAYS)] = 14.0
    duration_hours: PositiveHours = 4.0


class StragglersConfig(_Section):
    """Slow nodes that drag the synchronous job (it waits for its slowest rank) until a
    detector drains them at the next checkpoint or the condition clears by itself."""

    rate_per_1k_gpu_day: Annotated[float, Field(gt=0, le=1e6)] = 0.3
    slowdown: Annotated[float, Field(gt=0, lt=1)] = 0.3  # the job runs 1/(1-slowdown) slower
    # each straggler's slowdown uniform on [slowdown, slowdown_max] (None: all `slowdown`)
    slowdown_max: Annotated[float, Field(gt=0, lt=1)] | None = None
    detect_hours: Annotated[float, Field(ge=0, le=MAX_HOURS)] | None = 2.0  # None: never
    detect_threshold: Annotated[float, Field(ge=0, lt=1)] = 0.0  # slower ones only are caught
    clear_hours: PositiveHours | None = None  # mean time until it clears by itself (None: never)
    repair_hours: PositiveHours = 24.0  # a drained node's repair (flat; or the repair pipeline)
    # lemons straggle `cluster.lemon_rate_multiplier`x as often
    node_attributable: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> StragglersConfig:
        if self.slowdown_max is not None and self.slowdown_max < self.slowdown:
            raise KeyPathError("slowdown_max", "slowdown_max must be at least slowdown")
        return self


class OncallConfig(_Section):
    """Failures of classes with `needs_human: true` wait for a person: a response time in
    working hours (Monday to Friday, from workday_start_hour to workday_end_hour), a
    longer one at night and at weekends."""

    response_minutes: Minutes = 15.0
    night_response_minutes: Minutes = 60.0
    weekend_response_minutes: Minutes = 120.0
    workday_start_hour: Annotated[float, Field(ge=0, lt=24)] = 9.0
    workday_end_hour: Annotated[float, Field(gt=0, le=24)] = 18.0

    @model_validator(mode="after")
    def _ordered(self) -> OncallConfig:
        if self.workday_end_hour <= self.workday_start_hour:
            raise KeyPathError(
                "workday_end_hour", "workday_end_hour must be after workday_start_hour"
            )
        return self


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class CostConfig(_Section):
    gpu_hour_usd: Annotated[float, Field(ge=0, le=1e6)] = 2.5


class SimulationConfig(_Section):
    replicas: Count = 1000
    seed: Annotated[int, Field(ge=0, le=MAX_SEED, strict=True)] = 0
    horizon_days: Annotated[float, Field(gt=0, le=MAX_DAYS)] = 730.0
    # serial | processes | dask (None: processes with more than one worker, else serial)
    executor: Literal["serial", "processes", "dask"] | None = None
    # the run's start on the weekly calendar (on-call response times depend on it)
    start_weekday: Literal[WEEKDAYS] = "monday"  # type: ignore[valid-type]
    start_hour: Annotated[float, Field(ge=0, lt=24)] = 9.0


class Scenario(_Section):
    """A validated scenario for one sweep point (no `sweep` key inside)."""

    name: Annotated[str, Field(pattern=_NAME, max_length=64)]  # names a directory
    description: Annotated[str, Field(max_length=1000)] = ""
    model: ModelConfig
    cluster: ClusterConfig
    parallelism: ParallelismConfig = ParallelismConfig()
    performance: PerformanceConfig
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig
    checkpoint: CheckpointConfig
    failures: list[FailureClassConfig] = []
    recovery: RecoveryConfig = RecoveryConfig()
    repair: RepairConfig | None = None
    health_checks: HealthChecksConfig | None = None
    maintenance: MaintenanceConfig | None = None
    stragglers: StragglersConfig | None = None
    oncall: OncallConfig | None = None
    cost: CostConfig = CostConfig()
    simulation: SimulationConfig = SimulationConfig()

    @model_validator(mode="before")
    @classmethod
    def _one_nic_per_gpu_by_default(cls, data: Any) -> Any:
        """`network.nics_per_node` defaults to one NIC per GPU (rail-optimised)."""
        if isinstance(data, dict) and isinstance(data.get("cluster"), dict):
            network = data.get("network", {})
            if isinstance(network, dict) and "nics_per_node" not in network:
                gpus = data["cluster"].get("gpus_per_node", 8)
                if isinstance(gpus, int) and gpus > 0:
                    data = {**data, "network": {**network, "nics_per_node": gpus}}
        return data

    def _check_host_memory(self) -> None:
        """Host RAM holds an async snapshot, and an in-memory checkpoint plus a peer's copy."""
        ckpt = self.checkpoint
        needs = [("an async snapshot", 1)] if ckpt.mode == "async" else []
        if ckpt.memory_every_steps is not None:
            needs.append(("an in-memory checkpoint and a peer's copy", 2))
        if not needs:
            return
        per_node_GB = self.model.params * ckpt.state_bytes_per_param / 1e9 / self.cluster.nodes
        copies = sum(n for _, n in needs)
        if copies * per_node_GB > self.cluster.host_memory_GB:
            raise KeyPathError(
                "checkpoint.memory_every_steps" if ckpt.memory_every_steps else "checkpoint.mode",
                f"host RAM must hold {' and '.join(w for w, _ in needs)}: {copies} x {per_node_GB:.0f} GB "
                f"per node exceeds cluster.host_memory_GB={self.cluster.host_memory_GB:g}",
            )

    @model_validator(mode="after")
    def _cross_checks(self) -> Scenario:
        gpus_per_replica = self.parallelism.tensor * self.parallelism.pipeline
        if self.cluster.gpus % gpus_per_replica:
            raise KeyPathError(
                "parallelism",
                f"tensor*pipeline = {gpus_per_replica} GPUs per data-parallel replica "
                f"does not divide the job's {self.cluster.gpus} GPUs (cluster.nodes*gpus_per_node)",
            )
        net = self.network
        if self.cluster.gpus_per_node % net.nics_per_node:
            raise KeyPathError(
                "network.nics_per_node",
                f"{net.nics_per_node} NICs do not divide cluster.gpus_per_node={self.cluster.gpus_per_node} "
                "(rail-optimised: each NIC serves the same number of GPUs)",
            )
        endpoints = self.cluster.nodes * net.nics_per_node
        if endpoints > max_fat_tree_endpoints(net.switch_radix, net.oversubscription):
            raise KeyPathError(
                "network.switch_radix",
                f"{endpoints} NIC ports exceed a three-tier fat tree of radix {net.switch_radix} "
                f"(at most {max_fat_tree_endpoints(net.switch_radix, net.oversubscription)}); use a larger radix",
            )
        if self.performance.compute_efficiency is not None:
            para, model = self.parallelism, self.model
            if para.pipeline > 1 and para.microbatches is None:
                raise KeyPathError(
                    "parallelism.microbatches",
                    "compute_efficiency mode with pipeline > 1 needs microbatches (bubble = (pipeline-1)/microbatches)",
                )
            if para.tensor > 1 and not (model.layers and model.hidden):
                raise KeyPathError(
                    "model.layers",
                    "compute_efficiency mode with tensor > 1 needs model.layers and model.hidden "
                    "(tensor-parallel traffic per step follows from them)",
                )
            if para.tensor > self.cluster.gpus_per_node:
                raise KeyPathError(
                    "parallelism.tensor",
                    f"tensor={para.tensor} spans nodes; compute_efficiency mode models tensor parallelism "
                    f"inside a node of {self.cluster.gpus_per_node} GPUs",
                )
        if self.storage.data_tier == "shared" and self.checkpoint.memory_every_steps is not None:
            raise KeyPathError(
                "storage.data_tier",
                "not supported yet: a shared data tier together with checkpoint.memory_every_steps",
            )
        self._check_host_memory()
        names = [f.name for f in self.failures]
        if "lemon" in names:
            raise KeyPathError(
                f"failures.{names.index('lemon')}.name",
                "'lemon' is reserved: failures_lemon counts failures of nodes with a fault",
            )
        for i, f in enumerate(self.failures):
            if f.needs_human and self.oncall is None:
                raise KeyPathError(
                    f"failures.{i}.needs_human",
                    "needs_human: true needs an oncall: section (the on-call response times)",
                )
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise KeyPathError(
                "failures", f"class names must be unique; repeated: {', '.join(dupes)}"
            )
        checkpoint_TB = self.model.params * self.checkpoint.state_bytes_per_param / 1e12
        needed_TB = checkpoint_TB * self.checkpoint.keep_last
        if needed_TB > self.storage.checkpoint_tier.capacity_TB:
            raise KeyPathError(
                "storage.checkpoint_tier.capacity_TB",
                f"checkpoint.keep_last={self.checkpoint.keep_last} "
                f"checkpoints of {checkpoint_TB:.3g} TB need {needed_TB:.3g} TB, more than the tier's "
                f"{self.storage.checkpoint_tier.capacity_TB:.3g} TB",
            )
        return self


SWEEPABLE_ROOT = Scenario  # the model whose key paths overrides and sweeps may name


@dataclass(frozen=True)
class Point:
    """One sweep point: the swept values that produced it and the scenario."""

    index: int
    params: dict[str, Any]
    scenario: Scenario


@dataclass(frozen=True)
class ScenarioSet:
    """A loaded scenario file: the resolved raw document and its sweep points."""

    source: str
    resolved: dict[str, Any]  # the document as run: overrides applied, sweep kept
    points: list[Point]

    @property
    def name(self) -> str:
        return self.points[0].scenario.name

    @property
    def base(self) -> Scenario:
        return self.points[0].scenario

    @property
    def swept_keys(self) -> list[str]:
        return list(self.resolved.get("sweep") or {})


# --------------------------------------------------------------------------- loading


class _InputLimit(yaml.YAMLError):
    """The YAML is well-formed but refused: too deep, too large, a duplicate key."""

    def __init__(self, message: str, mark: Any = None, path: str = ""):
        super().__init__(message)
        self.message, self.mark, self.path = message, mark, path


if getattr(yaml, "__with_libyaml__", False):
    from yaml.cyaml import CParser

    class _SafeBase(Composer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """`yaml.SafeLoader` with libyaml's scanner and parser (a 1 MB file in seconds, not
        tens of seconds) and PyYAML's composer, which `_Loader` extends."""

        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

else:  # PyYAML built without libyaml
    _SafeBase = yaml.SafeLoader  # type: ignore[misc,assignment]


class _Loader(_SafeBase):
    """A safe loader with limits checked while composing, before anything is built:
    nesting depth (no RecursionError), values once aliases are expanded (no billion
    laughs), no recursive aliases, and no key given twice in one mapping."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._values = 0  # values composed so far, aliases expanded: stops a bomb early
        self._path: list[str] = []
        self._measured: dict[int, tuple[int, int]] = {}  # id(node): (values, height)
        self._keep: list[yaml.Node] = []  # keeps ids in _measured unique

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            if id(node) not in self._measured:
                raise _InputLimit(
                    "an alias refers to a mapping or list that contains it (a recursive structure)",
                    mark,
                )
            self._count(self._measured[id(node)][0], mark)
            return node
        self._count(1, self.peek_event().start_mark)
        if self._depth >= MAX_DEPTH:
            raise _InputLimit(
                f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
            )
        label = (
            str(index.value)
            if isinstance(index, yaml.ScalarNode)
            else str(index)
            if isinstance(index, int)
            else None
        )
        self._depth += 1
        if label is not None:
            self._path.append(label)
        try:
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.MappingNode):
                self._check_duplicates(node)
        finally:
            self._depth -= 1
            if label is not None:
                self._path.pop()
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        sizes = [self._measured[id(child)] for child in children]
        values = 1 + sum(n for n, _ in sizes)
        height = 1 + max((h for _, h in sizes), default=0)
        if height > MAX_DEPTH:
            raise _InputLimit(
                f"nested deeper than {MAX_DEPTH} levels once aliases are expanded",
                node.start_mark,
            )
        self._measured[id(node)] = (values, height)
        self._keep.append(node)
        return node

    def _count(self, values: int, mark: Any) -> None:
        self._values += values
        if self._values > MAX_NODES:
            raise _InputLimit(f"expands to more than {MAX_NODES:,} values (aliases included)", mark)

    def _check_duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                raise _InputLimit(
                    f"duplicate key {echo(key.value)} (first given at line "
                    f"{first.start_mark.line + 1}); give each key once",
                    key.start_mark,
                    ".".join([*self._path, str(key.value)]),
                )


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load` with the limits of `_Loader`; raises `yaml.YAMLError`."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _yaml_problem(exc: yaml.YAMLError) -> tuple[str, str]:
    """(key path, one-line description) of a YAML error, value echoes shortened."""
    if isinstance(exc, _InputLimit):
        where = f"line {exc.mark.line + 1}, column {exc.mark.column + 1}: " if exc.mark else ""
        return exc.path, where + exc.message
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if len(problem) > 2 * MAX_ECHO:
        problem = problem[: 2 * MAX_ECHO - 3] + "..."
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return "", f"not valid YAML{where}: {problem}"


def read_yaml(path: str | Path) -> dict[str, Any]:
    source = str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)  # never more: /dev/zero, a huge log
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the scenario file ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(
            source,
            "",
            f"larger than {MAX_FILE_BYTES:,} bytes; a scenario file is a few kilobytes of YAML",
        )
    text = _decode(source, data)
    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        key, problem = _yaml_problem(exc)
        raise ScenarioError(source, key, problem) from None
    if not isinstance(document, dict):
        raise ScenarioError(
            source, "", "expected a YAML mapping of sections (name, model, cluster, ...)"
        )
    return document


def _decode(source: str, data: bytes) -> str:
    """UTF-8 (a UTF-8 byte-order mark is fine); anything else is refused with its position."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ScenarioError(
            source, "", "the file is UTF-16 (it starts with a byte-order mark); save it as UTF-8"
        )
    if b"\x00" in data:
        raise ScenarioError(
            source,
            "",
            "the file contains NUL bytes (a binary file, or UTF-16?); expected UTF-8 YAML text",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ScenarioError(
            source,
            "",
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column} "
            "(latin-1 or another encoding?); save the file as UTF-8",
        ) from None


def load_scenario(
    path: str | Path,
    overrides: list[str] | None = None,
    params: list[str] | None = None,
) -> ScenarioSet:
    """Read, override, expand and validate a scenario file."""
    return load_document(read_yaml(path), str(path), overrides, params)


def load_document(
    document: dict[str, Any],
    source: str = "<scenario>",
    overrides: list[str] | None = None,
    params: list[str] | None = None,
) -> ScenarioSet:
    raw = copy.deepcopy(document)
    for item in overrides or []:
        key, text = _split_assignment(source, item, "--set")
        value = _parse_value(source, key, text, "--set")
        _check_path(source, key, raw, origin="--set")
        _assign(raw, key, value)
    if raw.get("sweep") is not None and not isinstance(raw["sweep"], dict):
        raise ScenarioError(
            source,
            "sweep",
            f"expected a mapping of dotted keys to lists of values, got {echo(raw['sweep'])}",
        )
    sweep = dict(raw.get("sweep") or {})
    for key in sweep:
        if not isinstance(key, str):
            raise ScenarioError(
                source,
                "sweep",
                f"expected dotted keys such as checkpoint.interval_steps, got {echo(key)}",
            )
    given: set[str] = set()
    for item in params or []:
        key, text = _split_assignment(source, item, "--param")
        if key in given:
            raise ScenarioError(
                source,
                key,
                "--param is given twice for this key; give all its values in one "
                "--param KEY=V1,V2,...",
            )
        given.add(key)
        values = []
        for piece in text.split(","):
            if not piece.strip():
                raise ScenarioError(
                    source,
                    key,
                    f"--param value {echo(text)} has an empty item; expected KEY=V1,V2,... "
                    "(write null for an explicit null)",
                )
            values.append(_parse_value(source, key, piece, "--param", whole=text))
        sweep[key] = values  # replaces the file's list for this key, if it sweeps it
    if sweep:
        raw["sweep"] = sweep
    base = {k: v for k, v in raw.items() if k != "sweep"}
    for key, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(
                source, f"sweep.{key}", f"expected a non-empty list of values, got {echo(values)}"
            )
        _check_path(source, key, base, origin="sweep")
    count = math.prod(len(values) for values in sweep.values())
    if count > MAX_POINTS:
        sizes = " x ".join(str(len(values)) for values in sweep.values())
        raise ScenarioError(
            source,
            "sweep",
            f"{count:,} sweep points ({sizes}) exceed the limit of {MAX_POINTS:,}; "
            "sweep fewer values or fewer keys at once",
        )

    points = []
    keys = list(sweep)
    for index, combo in enumerate(itertools.product(*(sweep[k] for k in keys))):
        doc = copy.deepcopy(base)
        point_params = dict(zip(keys, combo))
        for key, value in point_params.items():
            _assign(doc, key, value)
        scenario = _validate(source, doc, point_params)
        points.append(Point(index=index, params=point_params, scenario=scenario))
    return ScenarioSet(source=source, resolved=raw, points=points)


def _validate(source: str, doc: dict[str, Any], point_params: dict[str, Any]) -> Scenario:
    try:
        return Scenario.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        problems = [_describe(error) for error in errors[:MAX_PROBLEMS]]
        path = problems[0][0]
        text = "; ".join(f"{p}: {m}" if p and i else m for i, (p, m) in enumerate(problems))
        if len(errors) > MAX_PROBLEMS:
            text += f"; and {len(errors) - MAX_PROBLEMS} more problems"
        if point_params:
            text += f" (at sweep point {echo(point_params)})"
        raise ScenarioError(source, path, text) from None


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    loc = [str(p) for p in error["loc"] if not _is_union_tag(p)]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, KeyPathError):
        loc = [*loc, *cause.path.split(".")]
    path = ".".join(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = ", ".join(parent.model_fields) if parent else ""
        return path, f"unknown key {echo(loc[-1])}" + (
            f"; expected one of: {allowed}" if allowed else ""
        )
    if kind == "missing":
        return path, "required key is missing"
    message = error["msg"]
    message = message.removeprefix("Value error, ")
    got = error.get("input")
    if kind not in ("value_error",) and not isinstance(got, dict | list):
        message += f" (got {echo(got)})"
    return path, message


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts the union member's name ("str", "GpuConfig") into error locations
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or part[:1].isupper())


def _model_at(parts: list[str]) -> type[BaseModel] | None:
    model: Any = SWEEPABLE_ROOT
    for part in parts:
        if part.isdigit():
            continue
        field = _keys_of(model).get(part)
        if field is None:
            return None
        model = _submodel(field.annotation)
        if model is None:
            return None
    return model


def _keys_of(model: type[BaseModel]) -> dict[str, Any]:
    """A section's fields by the key a scenario file uses (its alias, where it has one)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _submodel(annotation: Any) -> type[BaseModel] | None:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, list, Annotated):
        for arg in typing.get_args(annotation):
            found = _submodel(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


# --------------------------------------------------------------------------- overrides


def _split_assignment(source: str, item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise ScenarioError(
            source,
            item.strip()[: 2 * MAX_ECHO],
            f"{flag} expects KEY=VALUE, e.g. checkpoint.interval_steps=500",
        )
    key, _, text = item.partition("=")
    return key.strip(), text


def _parse_value(source: str, key: str, text: str, flag: str, whole: str | None = None) -> Any:
    """A command-line value as YAML (same limits as a file; no tags beyond safe ones).
    `whole`: the --param text this comma-separated item came from."""
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        _, problem = _yaml_problem(exc)
        what = f"{flag} value {echo(text)}"
        if whole is not None and whole != text:
            what = f"{flag} item {echo(text)} (items are split at commas)"
        raise ScenarioError(source, key, f"{what}: {problem}") from None


def _check_path(source: str, key: str, raw: dict[str, Any], origin: str) -> None:
    """A dotted key must name a key of the schema; list items by an existing index."""
    parts = key.split(".")
    model: Any = SWEEPABLE_ROOT
    node: Any = raw
    walked: list[str] = []
    for part in parts:
        walked.append(part)
        here = ".".join(walked)
        if model is None:
            raise ScenarioError(
                source, here, f"{origin} names a key that does not exist in the schema"
            )
        if isinstance(model, list):
            if not part.isdigit():
                raise ScenarioError(source, here, f"{origin}: expected a list index, got {part!r}")
            items = node if isinstance(node, list) else []
            appending = int(part) == len(items) and here == key  # --set failures.N={...} appends
            if int(part) >= len(items) and not appending:
                raise ScenarioError(
                    source,
                    here,
                    f"{origin}: list index {part} is out of range ({len(items)} items)",
                )
            model, node = model[0], (None if appending else items[int(part)])
            continue
        fields = _keys_of(model)
        if part not in fields:
            raise ScenarioError(
                source,
                here,
                f"{origin} names a key that does not exist; expected one of: {', '.join(fields)}",
            )
        annotation = fields[part].annotation
        sub = _submodel(annotation)
        is_list = typing.get_origin(annotation) is list or any(
            typing.get_origin(a) is list for a in typing.get_args(annotation)
        )
        node = node.get(part) if isinstance(node, dict) else None
        model = [sub] if is_list else sub


# Keys of which a scenario gives exactly one: an override or sweep of one replaces the others.
EXCLUSIVE = [
    ("checkpoint.interval_steps", "checkpoint.interval_minutes", "checkpoint.interval"),
    ("performance.mfu", "performance.compute_efficiency"),
    ("failures.*.mtbf_hours", "failures.*.rate_per_1k_gpu_day"),
]


def _assign(doc: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted key; setting one of a group of exclusive keys removes its siblings."""
    parts = key.split(".")
    pattern = ".".join("*" if p.isdigit() else p for p in parts)
    for group in EXCLUSIVE:
        if pattern in group and value is not None:
            for sibling in group:
                if sibling != pattern:
                    _remove(doc, [p if s == "*" else s for p, s in zip(parts, sibling.split("."))])
    _set(doc, parts, value)


def _remove(doc: dict[str, Any], parts: list[str]) -> None:
    node: Any = doc
    for part in parts[:-1]:
        node = (
            node[int(part)]
            if isinstance(node, list)
            else node.get(part)
            if isinstance(node, dict)
            else None
        )
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def _set(doc: dict[str, Any], parts: list[str], value: Any) -> None:
    node: Any = doc
    for part, nxt in zip(parts[:-1], parts[1:]):
        if isinstance(node, list):
            node = node[int(part)]
            continue
        if not isinstance(node.get(part), dict | list):
            node[part] = [] if nxt.isdigit() else {}
        node = node[part]
    last = parts[-1]
    if isinstance(node, list):
        if int(last) == len(node):
            node.append(value)
        else:
            node[int(last)] = value
    else:
        node[last] = value


def dump_resolved(scenario_set: ScenarioSet) -> str:
    return yaml.safe_dump(scenario_set.resolved, sort_keys=False)
