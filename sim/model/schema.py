"""The scenario schema: the frozen pydantic models a scenario file validates into, their
bounds and cross-field checks, and the introspection the loader's error messages use.

A public contract: keys load as documented in docs/scenarios.md; unknown keys are
errors that name the key path. Loading files, overrides and sweeps is `sim.model.scenario`'s.
"""

from __future__ import annotations

import copy
import reprlib
import types
import typing
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from sim.model.hardware import GPUS, TIERS, GpuSpec

_NAME = r"^[a-z0-9_-]+$"


MAX_ECHO = 80  # characters of a value quoted back in an error message

# Bounds on numbers no real scenario reaches. They keep every derived figure finite
# (no overflow to inf, no OverflowError) and are named in pydantic's message.
MAX_DAYS = 3652.5  # ten years: any duration (minutes, hours, days) a scenario gives
MAX_HOURS = MAX_DAYS * 24
MAX_MINUTES = MAX_HOURS * 60
MIN_GB_S, MAX_GB_S = 1e-3, 1e7  # any bandwidth: 1 MB/s to 10 PB/s
MAX_SEED = 2**63 - 1  # the replica table stores the seed as int64
MAX_COUNT = 10**6  # any count a scenario gives (nodes, parallel sizes, keep_last, ...)
MAX_REPLICAS = MAX_COUNT  # replicas per sweep point (simulation.replicas, --replicas)
# replicas of one run, every point together: its table (~60 columns a row) stays within a
# few gigabytes, and the replicas to run are counted before the first is simulated
MAX_RUN_REPLICAS = 10**7
# the smallest spread of the nodes' own rates (cluster.node_rate_cv) other than none
MIN_NODE_RATE_CV = 1e-6
# the smallest Weibull shape: at 0.05 (the bound before) over 90% of lifetimes are shorter
# than a second, a storm of failures no replica gets through in minutes (0.08: seconds)
MIN_WEIBULL_SHAPE = 0.1
MAX_RATE_PER_1K = 1e6  # a failure class's rate_per_1k_gpu_day
# keys a sweep (--param, plan --vary, sweep:) cannot vary: every point shares them
NOT_SWEEPABLE = ("simulation.seed", "simulation.replicas", "simulation.executor")


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
    # the keys (as a file writes them) of the fields that take a number
    _numeric_keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._numeric_keys = frozenset(
            field.alias or name
            for name, field in cls.model_fields.items()
            if _takes_numbers(field.annotation)
        )

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        """true and false are not numbers: pydantic's lax mode would read true as 1 (a
        one-parameter model, ZeRO stage 1), so every numeric key of every section refuses
        them here, before its own checks."""
        if isinstance(data, dict):
            for key in cls._numeric_keys:
                value = data.get(key)
                if isinstance(value, bool):
                    raise KeyPathError(
                        key, f"expected a number, got {str(value).lower()} (a boolean)"
                    )
        return data


def _takes_numbers(annotation: Any) -> bool:
    """Whether a field's type admits int or float (a Literal of numbers too), not bool."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _takes_numbers(args[0])
    if origin is Literal:
        return any(type(arg) in (int, float) for arg in args)
    if origin in (Union, types.UnionType):
        return any(_takes_numbers(arg) for arg in args)
    return annotation in (int, float)


# Common bounds (the fields below state the rest where they are declared).
Bandwidth = Annotated[float, Field(ge=MIN_GB_S, le=MAX_GB_S)]  # GB/s
Minutes = Annotated[float, Field(ge=0, le=MAX_MINUTES)]
PositiveMinutes = Annotated[float, Field(gt=0, le=MAX_MINUTES)]
PositiveHours = Annotated[float, Field(gt=0, le=MAX_HOURS)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Efficiency = Annotated[float, Field(ge=0.01, le=1)]  # a share of a peak that a time divides by
Count = Annotated[int, Field(gt=0, le=MAX_COUNT, strict=True)]
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
    # attention heads: only the memory check without recomputation needs them (the attention
    # scores' 5·a·s/h term); default hidden / 128 (a head dimension of 128, as Llama's)
    heads: Count | None = None
    # key/value heads (grouped-query attention): the context-parallel ring's traffic moves
    # keys and values; default: heads (multi-head attention)
    kv_heads: Count | None = None
    flops_per_token: Annotated[float, Field(gt=0, le=1e18)] | None = None


class GpuConfig(_Section):
    """A GPU given inline instead of by catalogue name."""

    name: Annotated[str, Field(min_length=1, max_length=64)]
    peak_tflops: Annotated[float, Field(ge=1e-3, le=1e6)]
    memory_GB: Annotated[float, Field(gt=0, le=1e6)] = 80.0
    hbm_TB_s: Annotated[float, Field(ge=MIN_GB_S / 1e3, le=MAX_GB_S / 1e3)] = 3.35
    nvlink_GB_s: Bandwidth = 900.0


class AgingConfig(_Section):
    """The fleet's age: every node-attributable class fails (a / rated_at_days)^(beta - 1)
    times as often as its written rate at fleet age a (a power law, Crow-AMSAA: beta < 1 a
    burn-in that fades as the fleet ages, 1 no trend)."""

    beta: Annotated[float, Field(ge=0.01, le=5)]
    # the fleet age (days since it was brought up) at which the classes' rates hold
    rated_at_days: Annotated[float, Field(gt=0, le=MAX_DAYS * 10)]
    # the fleet's age when the run starts (default: rated_at_days, the rates as written)
    age_days: Annotated[float, Field(ge=0, le=MAX_DAYS * 10)] | None = None

    @property
    def start_days(self) -> float:
        return self.rated_at_days if self.age_days is None else self.age_days


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
    # true: a lemon stays one through every repair (as `trainsim fit` finds lemons: nodes
    # that fail more often the whole window); false: a true fix cures it
    lemons_permanent: StrictBool = False
    # nodes unlike each other: each node's rate in node-attributable classes times its own
    # multiplier, gamma-distributed with mean 1 and this coefficient of variation, for the
    # node's whole life (0: all nodes alike)
    node_rate_cv: Annotated[float, Field(ge=0, le=10)] = 0.0  # 0, or MIN_NODE_RATE_CV to 10
    # which warm spare fills an empty job slot: the one idle longest (first in, first out),
    # the one back most recently (last in, first out), or one drawn at random
    spare_order: Literal["oldest", "newest", "random"] = "oldest"
    # the fleet's age and its power-law trend of the node classes' rates (None: no trend)
    aging: AgingConfig | None = None
    # DGX/HGX H100: 2 TB of host RAM per node
    host_memory_GB: Annotated[float, Field(gt=0, le=1e7)] = 2048.0

    @field_validator("node_rate_cv")
    @classmethod
    def _a_spread_or_none(cls, value: float) -> float:
        # the gamma's shape is 1/cv²: below ~1e-154 it is infinite (a division by zero in
        # the engine), and a spread of a millionth is no spread a replica could show
        if 0 < value < MIN_NODE_RATE_CV:
            raise ValueError(
                f"expected 0 (all nodes alike) or a spread from {MIN_NODE_RATE_CV:g} to 10, "
                f"got {value:g}: nodes whose rates differ by less than a millionth are alike; "
                "write 0"
            )
        return value

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
    """How the job is split. With `model.seq_len` the microbatches follow from the batch:
    global_batch_tokens / seq_len sequences per step, / data-parallel size per replica,
    / micro_batch_size; `microbatches`, when given, must agree (sim.model.perf checks it)."""

    tensor: Count = 1
    pipeline: Count = 1
    microbatches: Count | None = None
    micro_batch_size: Count = 1  # sequences per microbatch
    # interleaved 1F1B: model chunks per pipeline stage (bubble (pipeline-1)/(v*microbatches))
    virtual_stages: Count = 1
    # optimizer sharding over the data-parallel ranks (ZeRO stage): 0 none, 1 optimizer
    # states (Megatron's distributed optimizer), 2 and gradients, 3 and weights (FSDP)
    zero_stage: Literal[0, 1, 2, 3] = 1
    # ZeRO-3's parameter gathers: `layer`, one flat all-gather per layer prefetched behind
    # the compute before it (FSDP, Megatron-Core); `tensor`, one per parameter tensor
    # issued when its module runs, the compute waiting for it; each pays the ring's
    # latency, which grows with the ranks
    # (unset: layer; only with zero_stage 3)
    zero3_gather: Literal["layer", "tensor"] | None = None
    # activation recomputation: none, selective (the attention core), full (whole layers)
    recompute: Literal["none", "selective", "full"] = "selective"
    # context parallelism: GPUs that split each sequence (ring attention, Megatron's CP):
    # a data-parallel replica is tensor x context x pipeline GPUs
    context: Count = 1

    @model_validator(mode="after")
    def _gathers_need_zero3(self) -> ParallelismConfig:
        if self.zero3_gather is not None and self.zero_stage != 3:
            raise KeyPathError(
                "zero3_gather",
                f"zero3_gather says how ZeRO-3 gathers each layer's parameters; with "
                f"zero_stage {self.zero_stage} there are no per-layer gathers: set "
                f"zero_stage: 3 or drop the key",
            )
        return self


# The keys that describe the configuration a step runs on (`performance.mfu_at` names them).
CONFIGURATION_SECTIONS = ("model", "cluster", "parallelism", "network")
# ... of which these leave the step alone: a --set or sweep of them is not recorded
NOT_STEP_KEYS = ("model.tokens",) + tuple(
    f"cluster.{key}"
    for key in (
        "spare_nodes",
        "pool_nodes",
        "host_selection_minutes",
        "preemptible_nodes",
        "preemption_minutes",
        "lemon_fraction",
        "lemon_rate_multiplier",
        "spare_order",
        "host_memory_GB",
    )
)


class MeasuredPoint(_Section):
    """One more measured MFU (`performance.measured`): the value and where it differs from
    the configuration `mfu` was measured at (dotted configuration keys, as mfu_at)."""

    mfu: Efficiency
    at: dict[str, Any] = {}

    @field_validator("at")
    @classmethod
    def _configuration_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            problem = _configuration_key_problem(key)
            if problem:
                raise KeyPathError(str(key), problem)
        return value


class PerformanceConfig(_Section):
    """Exactly one of `mfu` (the MFU at this configuration; other sizes follow the built-up
    model) or `compute_efficiency` (matmul efficiency; MFU then follows from the bubble and
    exposed communication)."""

    mfu: Efficiency | None = None
    compute_efficiency: Efficiency | None = None
    # the best share of the compute running beside a data-parallel, ZeRO-3 or interleaved
    # pipeline transfer that the framework hides it behind (sim.model.perf: only the compute that
    # runs while the transfer is in flight can hide it)
    overlap: Annotated[float, Field(ge=0, le=1)] = 0.8
    # gradient buckets the data-parallel reduction is issued in (Megatron's default bucket
    # holds 40M parameters: 80 MB of bf16 gradients); the last bucket is never hidden
    bucket_MB: Annotated[float, Field(gt=0, le=1e6)] = 80.0
    # coefficient of variation of one GPU's compute time per step (GPUs of one model differ
    # in clocks, power and thermals: Sinha et al., SC'22, "Not All GPUs Are Created
    # Equal"): a synchronous step waits for the slowest of the job's GPUs,
    # sim.model.perf.slowest_of (0: all GPUs alike)
    jitter: Annotated[float, Field(ge=0, le=1)] = 0.02
    # model: `mfu` is calibrated at its configuration and the step follows the built-up
    # model elsewhere; fixed: the same MFU at every configuration
    mfu_scaling: Literal["model", "fixed"] = "model"
    # configuration keys (dotted) and the values at which `mfu` was measured, where they
    # differ from this document (null: the key not given, its default); empty: this document
    mfu_at: dict[str, Any] = {}
    # more measured points (a scaling test): with them the model's free figures (the
    # compute efficiency and the overlap) are fitted to `mfu` and all of these by least
    # squares, and the fitted model gives the step everywhere (sim.model.perf.calibration)
    measured: list[MeasuredPoint] = []

    @field_validator("mfu_at")
    @classmethod
    def _configuration_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            problem = _configuration_key_problem(key)
            if problem:
                raise KeyPathError(str(key), problem)  # the field's path comes first
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> PerformanceConfig:
        if (self.mfu is None) == (self.compute_efficiency is None):
            raise ValueError("give exactly one of mfu or compute_efficiency")
        if self.measured and (self.mfu is None or self.mfu_scaling == "fixed"):
            raise KeyPathError(
                "measured",
                "more measured points calibrate the step model with mfu: give mfu (at its "
                "configuration, mfu_at) with mfu_scaling: model",
            )
        return self


def _configuration_key_problem(key: Any) -> str | None:
    """Why `key` is not a dotted configuration key of the schema (None when it is)."""
    if not isinstance(key, str) or key.split(".")[0] not in CONFIGURATION_SECTIONS:
        return (
            f"{echo(key)} is not a configuration key: expected a dotted key under "
            f"{', '.join(CONFIGURATION_SECTIONS)} (e.g. cluster.nodes)"
        )
    model: Any = SWEEPABLE_ROOT
    for part in key.split("."):
        fields = keys_of(model) if model is not None else {}
        if part not in fields:
            return f"{echo(key)} names a key that does not exist in the schema"
        model = submodel(fields[part].annotation)
    return None


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
    # how the flow model routes between leaves: adaptive (adaptive routing / ECMP spraying
    # as a fluid: a leaf's traffic spreads over all its surviving uplinks, so a failed
    # spine or cable costs its share of them) or static (the subnet manager's
    # destination-mod-k routes: a failed part's flows move onto the next port)
    routing: Literal["adaptive", "static"] = "adaptive"

    @field_validator("switch_radix")
    @classmethod
    def _even_radix(cls, value: int) -> int:
        if value % 2:
            raise ValueError(
                f"switch_radix must be even (half the ports face down, half up); got {value}"
            )
        return value


class TierConfig(_Section):
    """A storage tier: `kind` fills typical figures (sim.model.hardware.TIERS) that any key overrides.
    A Lustre tier may give its write bandwidth as `osts` × `ost_GB_s` instead. An override or
    sweep that changes `kind` drops the figures the file gave for the old kind (load_document)."""

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
    validate_writes: StrictBool = Field(False, alias="validate")

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
    rate_per_1k_gpu_day: Annotated[float, Field(ge=1e-9, le=MAX_RATE_PER_1K)] | None = None
    distribution: Literal["exponential", "weibull", "lognormal"] = "exponential"
    weibull_shape: Annotated[float, Field(ge=MIN_WEIBULL_SHAPE, le=100)] | None = None
    lognormal_sigma: Annotated[float, Field(gt=0, le=5)] | None = None
    detect_minutes: Minutes = 3.0
    detect_hours: Annotated[float, Field(ge=0, le=MAX_HOURS)] | None = None  # or in hours
    replace: StrictBool | None = None
    repair_hours: PositiveHours = 48.0
    loses_data: StrictBool = False  # storage: the outage destroys the checkpoints on the tier
    # false: the class strikes only while the job computes (not while it is down)
    while_idle: StrictBool = True
    # the components' age when the run starts: new (every lifetime starts then) or
    # in_service (long in service: residual lives from the renewal process's equilibrium,
    # so the class fails at its rate from the first day); matters only for weibull and
    # lognormal lives
    age: Literal["new", "in_service"] = "new"
    # nodes with a lasting fault (lemons, and nodes a failure left one) fail more often in
    # this class (default: gpu, node)
    node_attributable: StrictBool | None = None
    # probability that a failure of the class comes from a lasting fault of its node (a bad
    # HBM stack a reboot hides) rather than a transient one (an Xid a reset clears); only
    # node-attributable classes
    fault_prob: Probability = 0.0
    # recovery rolls back this many checkpoints (a loss spike: 2 = past the newest one)
    rollback_checkpoints: Count = 1
    # silent data corruption: the job runs on until detection (detect_hours), then rolls
    # back to the newest checkpoint written before the corruption
    silent: StrictBool = False
    # recovery waits for the on-call engineer (`oncall:`) before the restart
    needs_human: StrictBool = False
    # a repair that does not hold: with this probability the node comes back from the
    # repair of a failure of this class with the fault still there, and the class fails on
    # it again after an exponential time in service of mean refail_hours
    refail_prob: Annotated[float, Field(ge=0, lt=1)] = 0.0
    refail_hours: PositiveHours = 24.0

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
        if self.fault_prob > 0 and not self.attributable:
            raise KeyPathError(
                "fault_prob",
                "fault_prob > 0 needs a node-attributable class (scope gpu or node, "
                "node_attributable not false): only a node can keep a lasting fault",
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
        if self.refail_prob > 0 and (self.scope not in ("gpu", "node") or not self.replaces_nodes):
            raise KeyPathError(
                "refail_prob",
                "refail_prob > 0 needs scope gpu or node with replace not false: a repair "
                "that does not hold follows a node's repair",
            )
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
    node_attributable: StrictBool = True

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


class MemoryConfig(_Section):
    """What a GPU holds (sim.model.memory; sim.model.perf checks that it fits): the model
    states by the precisions of the parameters, their gradients and the Adam moments, as
    Megatron-LM's distributed-optimizer documentation tabulates them (bf16 parameters and
    bf16 gradients: 20 bytes per parameter, 4 + 16/d with the distributed optimizer; fp32
    gradients: 18, 6 + 12/d; fp32 parameters: 16, 8 + 8/d), and the activations. The
    defaults are Megatron-Core's (DistributedDataParallelConfig: grad_reduce_in_fp32 false)
    and NeMo's performance recipes'; Megatron-LM's --bf16 keeps fp32 gradients.
    The *_bytes_per_param keys, when given, override what the precisions give."""

    param_precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    # the gradients accumulated and reduced over the data-parallel ranks (the main grads)
    grad_precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    # Adam's two moments (Megatron-Core's precision-aware optimizer: --exp-avg-dtype)
    moment_precision: Literal["fp32", "bf16"] = "fp32"
    weight_bytes_per_param: Annotated[float, Field(ge=0, le=1000)] | None = None
    grad_bytes_per_param: Annotated[float, Field(ge=0, le=1000)] | None = None
    optimizer_bytes_per_param: Annotated[float, Field(ge=0, le=1000)] | None = None
    # dropout masks kept for the backward pass (Korthikanti et al. 2022 count two per
    # layer, as GPT-3 trained; Llama 3 and Nemotron-4 train without dropout)
    dropout: StrictBool = True
    # attention activations: flash (FlashAttention-style kernels: the scores are never
    # stored, the default of modern stacks) or stored-scores (the a·s² scores, softmax and
    # dropout mask kept for the backward pass: Korthikanti et al. 2022's 5·a·s/h term)
    attention: Literal["flash", "stored-scores"] = "flash"


class CostConfig(_Section):
    gpu_hour_usd: Annotated[float, Field(ge=0, le=1e6)] = 2.5


# where replicas run: one process, a process pool, a Dask cluster (sim/runs/montecarlo.py)
EXECUTORS = ("serial", "processes", "dask")


class SimulationConfig(_Section):
    replicas: Count = 1000
    seed: Annotated[int, Field(ge=0, le=MAX_SEED, strict=True)] = 0
    horizon_days: Annotated[float, Field(gt=0, le=MAX_DAYS)] = 730.0
    # finished: a replica ends when the job has trained its tokens (or at the horizon);
    # horizon: every replica runs to the horizon, the job never finishing (a fleet over a
    # window, as `trainsim fit` writes one: its failures, not a time to train)
    until: Literal["finished", "horizon"] = "finished"
    # serial | processes | dask (None: processes with more than one worker, else serial)
    executor: Literal[EXECUTORS] | None = None  # type: ignore[valid-type]
    # the run's start on the weekly calendar (on-call response times depend on it)
    start_weekday: Literal[WEEKDAYS] = "monday"  # type: ignore[valid-type]
    start_hour: Annotated[float, Field(ge=0, lt=24)] = 9.0


def _check_fabric(cluster: ClusterConfig, net: NetworkConfig) -> None:
    """The fabric the job's collectives run on can be built: rail-optimised NICs, and a
    fat tree of the radix that holds every NIC port."""
    if cluster.gpus_per_node % net.nics_per_node:
        raise KeyPathError(
            "network.nics_per_node",
            f"{net.nics_per_node} NICs do not divide cluster.gpus_per_node={cluster.gpus_per_node} "
            "(rail-optimised: each NIC serves the same number of GPUs)",
        )
    endpoints = cluster.nodes * net.nics_per_node
    if endpoints > max_fat_tree_endpoints(net.switch_radix, net.oversubscription):
        raise KeyPathError(
            "network.switch_radix",
            f"{endpoints} NIC ports exceed a three-tier fat tree of radix {net.switch_radix} "
            f"(at most {max_fat_tree_endpoints(net.switch_radix, net.oversubscription)}); use a larger radix",
        )


class Configuration(_Section):
    """The configuration sections alone (CONFIGURATION_SECTIONS: what a step runs on), with
    the cross-checks about them: how `reference_scenario` validates the configuration
    `performance.mfu` was measured at, without the checks of the rest of the scenario."""

    model: ModelConfig
    cluster: ClusterConfig
    parallelism: ParallelismConfig = ParallelismConfig()
    network: NetworkConfig = NetworkConfig()

    @model_validator(mode="after")
    def _cross_checks(self) -> Configuration:
        _check_fabric(self.cluster, self.network)
        return self


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
    memory: MemoryConfig = MemoryConfig()
    cost: CostConfig = CostConfig()
    simulation: SimulationConfig = SimulationConfig()

    @field_validator("description")
    @classmethod
    def _one_line(cls, text: str) -> str:
        if any(mark in text for mark in "\n\r\v\f\x85\u2028\u2029"):
            raise ValueError(
                "one line, without line breaks (validate and the report show it as one line); "
                "put longer notes in YAML comments"
            )
        return text

    @model_validator(mode="before")
    @classmethod
    def _one_nic_per_gpu_by_default(cls, data: Any) -> Any:
        """`network.nics_per_node` defaults to one NIC per GPU (rail-optimised)."""
        if isinstance(data, dict) and isinstance(data.get("cluster"), dict):
            network = data.get("network", {})
            if isinstance(network, dict) and "nics_per_node" not in network:
                gpus = data["cluster"].get("gpus_per_node", 8)
                if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0:
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
        # whether the configuration can run (tensor*pipeline dividing the GPUs, tensor
        # inside a node, the batch split, the GPU memory, the tier holding keep_last
        # checkpoints) is sim.model.perf.configuration_problem's, called by the loader
        _check_fabric(self.cluster, self.network)
        if self.performance.compute_efficiency is not None:
            para, model = self.parallelism, self.model
            if para.pipeline > 1 and para.microbatches is None and model.seq_len is None:
                raise KeyPathError(
                    "parallelism.microbatches",
                    "compute_efficiency mode with pipeline > 1 needs microbatches, or "
                    "model.seq_len to derive them (bubble = (pipeline-1)/microbatches)",
                )
            if para.tensor > 1 and not (model.layers and model.hidden):
                raise KeyPathError(
                    "model.layers",
                    "compute_efficiency mode with tensor > 1 needs model.layers and model.hidden "
                    "(tensor-parallel traffic per step follows from them)",
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
        return self


SWEEPABLE_ROOT = Scenario  # the model whose key paths overrides and sweeps may name


def is_union_tag(part: Any) -> bool:
    # pydantic inserts the union member's name ("str", "GpuConfig") into error locations
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or part[:1].isupper())


def model_at(parts: list[str]) -> type[BaseModel] | None:
    model: Any = SWEEPABLE_ROOT
    for part in parts:
        if part.isdigit():
            continue
        field = keys_of(model).get(part)
        if field is None:
            return None
        model = submodel(field.annotation)
        if model is None:
            return None
    return model


def keys_of(model: type[BaseModel]) -> dict[str, Any]:
    """A section's fields by the key a scenario file uses (its alias, where it has one)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def submodel(annotation: Any) -> type[BaseModel] | None:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, list, Annotated):
        for arg in typing.get_args(annotation):
            found = submodel(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


# --------------------------------------------------------------------------- dotted keys


def remove_key(doc: dict[str, Any], parts: list[str]) -> None:
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


def set_key(doc: dict[str, Any], parts: list[str], value: Any) -> None:
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


def reference_scenario(scenario: Scenario) -> Scenario:
    """The configuration at which `performance.mfu` was measured: the scenario with
    `performance.mfu_at` applied (null: the key's default), or itself when mfu_at is empty.
    Only the configuration sections change and only they are validated (`Configuration`):
    the rest is the scenario's own, and checks of it against a configuration (host RAM,
    the tier's capacity) are not the step's. Raises pydantic's ValidationError when the
    keys describe no valid configuration."""
    at = scenario.performance.mfu_at
    if not at:
        return scenario
    sections = {
        name: getattr(scenario, name).model_dump(by_alias=True) for name in CONFIGURATION_SECTIONS
    }
    if sections["network"].get("nics_per_node") == scenario.cluster.gpus_per_node:
        del sections["network"]["nics_per_node"]  # the default (one per GPU) follows the node
    for key, value in at.items():
        if value is None:
            remove_key(sections, key.split("."))
        else:
            set_key(sections, key.split("."), copy.deepcopy(value))
    cluster, network = sections.get("cluster"), sections.get("network")
    if isinstance(network, dict) and "nics_per_node" not in network and isinstance(cluster, dict):
        network["nics_per_node"] = cluster.get("gpus_per_node", 8)
    configuration = Configuration.model_validate(sections)
    return scenario.model_copy(
        update={
            **{name: getattr(configuration, name) for name in CONFIGURATION_SECTIONS},
            "performance": scenario.performance.model_copy(update={"mfu_at": {}}),
        }
    )
