"""The scenario space: a hypothesis generator of valid scenario documents over the whole
schema (docs/scenarios.md), mutations that make one key of a valid document bad, and the
properties every generated scenario must have. tests/properties/test_scenario_space.py runs
them with a bounded profile; benchmarks/scenario_space.py with a longer one.

A document is valid by construction: the few figures only the model knows (the GPU memory a
configuration needs, the MFU a configuration can reach, the rate a failure class has on
this fabric, the step time) are asked of it while drawing, so that every failure class,
straggler process, health check and maintenance window makes a bounded number of events
before the horizon, and each example takes well under a second. Draws shrink towards the
smallest document: an optional key or section is left out, a choice falls back to its
default, a count to its lower bound.
"""

from __future__ import annotations

import copy
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

import annotated_types
import pandas as pd
import yaml
from hypothesis import strategies as st

from sim.model import calculator, memory, perf, reliability
from sim.model.hardware import GPUS, TIERS
from sim.model.safe_yaml import read_yaml
from sim.model.schema import (
    MAX_DAYS,
    Scenario,
    keys_of,
    max_fat_tree_endpoints,
    model_at,
)
from sim.runs.api import run_scenario
from sim.runs.montecarlo import COLUMNS, COUNT_COLUMNS
from tests.conftest import COST_PARTS, ROOT, cli_in_process

MAX_GPUS = 32_768
EVENTS = 40.0  # the most failures (or onsets, checks, windows) a class draws in a horizon
REPLICAS = 3  # replicas of each run
# the gradient all-reduce's flow model takes seconds past a few hundred data-parallel ranks
# (minutes at thousands): the shipped scenarios go to 32k GPUs, the drawn ones to this
MAX_DATA_PARALLEL = 256
FABRIC_WORK = 2000.0  # fabric failures x NIC ports a replica may take (the flow model's cost)
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))

# the columns of the time identity and its parts (docs/metrics.md)
BUCKETS = ["ideal_hours", "slowdown_hours", "lost_work_hours", "checkpoint_stall_hours"]
DOWNTIME_PARTS = [
    "detect_hours",
    "node_wait_hours",
    "restart_hours",
    "checkpoint_load_hours",
    "rescale_hours",
    "storage_wait_hours",
    "maintenance_hours",
    "health_check_hours",
    "human_wait_hours",
]


# --------------------------------------------------------------------------- small draws


def log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """A float spread evenly in log between low and high (> 0); shrinks towards low."""
    a, b = math.log(low), math.log(high)
    return st.floats(0.0, 1.0).map(lambda u: min(high, max(low, math.exp(a + u * (b - a)))))


def fraction(low: float = 0.0, high: float = 1.0, high_open: bool = False) -> st.SearchStrategy:
    return st.floats(low, high, exclude_max=high_open)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class Doc:
    """Writes drawn keys into a document: `maybe` leaves an optional key out when the draw
    says so (a shrunk example is the smallest document that still fails)."""

    def __init__(self, draw):
        self.draw = draw

    def maybe(self, section: dict, key: str, strategy: st.SearchStrategy) -> Any:
        if self.draw(st.booleans()):
            section[key] = self.draw(strategy)
            return section[key]
        return None


def probe(doc: dict) -> Scenario:
    """The pydantic scenario of a document being drawn (the schema's checks only), to ask the
    model a figure: its memory use, step time or a class's failure rate."""
    full = {
        "name": "probe",
        "storage": {"checkpoint_tier": {"kind": "lustre", "capacity_TB": 1e9}},
        "checkpoint": {"interval_steps": 1},
        **copy.deepcopy(doc),
    }
    full["model"].setdefault("tokens", float(full["model"]["global_batch_tokens"]))
    return Scenario.model_validate(full)


def asked(question, fallback: Any) -> Any:
    """The model's answer while drawing, or `fallback` when the model raises: the scenario is
    drawn all the same, and the property that runs it finds the bug and shrinks it."""
    try:
        return question()
    except Exception:  # noqa: BLE001 - any bug of the model is the properties' to report
        return fallback


def rough_step_s(doc: dict) -> float:
    """A step's compute time at the stated MFU (or efficiency): FLOPs / (peak x share)."""
    model, cluster = doc["model"], doc["cluster"]
    gpu = cluster["gpu"]
    peak = GPUS[gpu].peak_tflops if isinstance(gpu, str) else gpu["peak_tflops"]
    gpus = cluster["nodes"] * cluster.get("gpus_per_node", 8)
    flops = model.get("flops_per_token") or 6 * model["params"]
    share = doc["performance"].get("mfu") or doc["performance"].get("compute_efficiency")
    return flops * model["global_batch_tokens"] / (gpus * peak * 1e12 * share)


# --------------------------------------------------------------------------- configuration


def numbers(node: Any) -> Any:
    """A loaded document with numbers written like 70.0e9 (YAML 1.1 strings) as floats."""
    if isinstance(node, dict):
        return {key: numbers(value) for key, value in node.items()}
    if isinstance(node, list):
        return [numbers(value) for value in node]
    if isinstance(node, str) and re.fullmatch(r"[0-9.]+e[0-9]+", node):
        return float(node)
    return node


@st.composite
def configurations(draw) -> dict:
    """model, cluster (the GPU and the sizes), parallelism, network, performance, memory:
    an abstract job (no seq_len), a job with sequences that splits its batch, or a shipped
    scenario's configuration (up to 405B and 1T parameters on 16k and 32k GPUs)."""
    kind = draw(st.sampled_from(["abstract", "sequences", "shipped"]))
    if kind == "shipped":
        source = numbers(read_yaml(draw(st.sampled_from(SHIPPED))))
        doc = {key: copy.deepcopy(source[key]) for key in ("model", "cluster", "performance")}
        for key in ("parallelism", "network", "memory"):
            if key in source:
                doc[key] = copy.deepcopy(source[key])
        doc["cluster"] = {
            key: value
            for key, value in doc["cluster"].items()
            if key in ("gpu", "nodes", "gpus_per_node")
        }
        return doc
    d = Doc(draw)
    gpn = draw(st.sampled_from([8, 1, 2, 4, 16]))
    nodes = draw(
        st.one_of(
            st.just(1),
            st.integers(2, 16),
            st.sampled_from([32, 64, 128, 256, 512, 1024, 2048, 4096]),
        )
    )
    nodes = max(1, min(nodes, MAX_GPUS // gpn))
    gpus = nodes * gpn
    cluster: dict[str, Any] = {"gpu": draw(st.sampled_from(sorted(GPUS))), "nodes": nodes}
    if gpn != 8 or draw(st.booleans()):
        cluster["gpus_per_node"] = gpn
    if draw(st.booleans()):
        cluster["gpu"] = {
            "name": "custom",
            "peak_tflops": draw(log_uniform(1e-3, 1e6)),
        }
        d.maybe(cluster["gpu"], "memory_GB", log_uniform(1.0, 1e4))
        d.maybe(cluster["gpu"], "hbm_TB_s", log_uniform(1e-6, 1e4))
        d.maybe(cluster["gpu"], "nvlink_GB_s", log_uniform(1e-3, 1e7))

    tensor = draw(st.sampled_from(divisors(gpn)))
    rest = gpus // tensor
    context = draw(st.sampled_from([c for c in (1, 2, 4) if rest % c == 0]))
    rest //= context
    stages = [p for p in divisors(rest) if p <= 64]
    # one data-parallel replica (all the GPUs split the model) now and then: no gradient
    # all-reduce at all
    pipeline = stages[-1] if draw(st.integers(0, 3)) == 3 else draw(st.sampled_from(stages))
    dp = rest // pipeline
    if dp > MAX_DATA_PARALLEL:  # a large cluster: tensor over the node, enough stages
        tensor, context = gpn, 1
        rest = gpus // tensor
        stages = [p for p in divisors(rest) if p <= 64 and rest // p <= MAX_DATA_PARALLEL]
        pipeline = draw(st.sampled_from(stages or [max(p for p in divisors(rest) if p <= 64)]))
        dp = rest // pipeline
        while dp > MAX_DATA_PARALLEL and dp % 2 == 0 and nodes % 2 == 0:
            nodes, gpus, dp = nodes // 2, gpus // 2, dp // 2
    cluster["nodes"] = nodes
    para: dict[str, Any] = {}
    for key, value in (("tensor", tensor), ("context", context), ("pipeline", pipeline)):
        if value != 1 or draw(st.booleans()):
            para[key] = value
    virtual = d.maybe(para, "virtual_stages", st.integers(1, 4)) or 1
    zero = d.maybe(para, "zero_stage", st.sampled_from([1, 0, 2, 3]))
    if zero == 3:
        d.maybe(para, "zero3_gather", st.sampled_from(["layer", "tensor"]))
    d.maybe(para, "recompute", st.sampled_from(["selective", "none", "full"]))
    size = d.maybe(para, "micro_batch_size", st.integers(1, 4)) or 1

    model: dict[str, Any] = {"params": draw(log_uniform(1e6, 1e12))}
    if kind == "sequences":
        seq_len = draw(st.sampled_from([1024, 128, 512, 2048, 4096, 8192]))
        seq_len -= seq_len % context
        layers = draw(st.integers(1, 48))
        hidden = 128 * draw(st.integers(1, 32))
        low = 1 if virtual > 1 else pipeline
        microbatches = draw(st.integers(low, low + 8))
        model.update(
            seq_len=seq_len,
            layers=layers,
            hidden=hidden,
            global_batch_tokens=seq_len * dp * size * microbatches,
        )
        heads = d.maybe(model, "heads", st.sampled_from([1, 2, 4, 8, 16]))
        if heads:
            d.maybe(model, "kv_heads", st.sampled_from(divisors(heads)))
        if draw(st.booleans()):
            para["microbatches"] = microbatches
    else:
        model["global_batch_tokens"] = draw(st.integers(1, 10**7))
        if d.maybe(model, "layers", st.integers(1, 128)):
            model["hidden"] = 128 * draw(st.integers(1, 64))
        if pipeline > 1:
            d.maybe(para, "microbatches", st.integers(pipeline, pipeline + 16))
    d.maybe(model, "flops_per_token", log_uniform(1e3, 1e15))

    network: dict[str, Any] = {}
    nics = d.maybe(network, "nics_per_node", st.sampled_from(divisors(gpn)))
    oversubscription = d.maybe(network, "oversubscription", log_uniform(1.0, 1000.0)) or 1.0
    endpoints = nodes * (nics or gpn)
    radices = [
        r
        for r in (64, 4, 8, 16, 32, 128, 256, 4096)
        if max_fat_tree_endpoints(r, oversubscription) >= endpoints
    ]
    radix = draw(st.sampled_from(radices))
    if radix != 64:
        network["switch_radix"] = radix
    d.maybe(network, "link_Gb_s", st.sampled_from([400.0, 200.0, 800.0, 100.0, 25.0]))
    d.maybe(network, "topology", st.just("fat-tree"))
    d.maybe(network, "collective", st.sampled_from(["ring", "tree", "auto"]))
    d.maybe(network, "latency_us", log_uniform(0.1, 100.0))
    d.maybe(network, "efficiency", fraction(0.3, 1.0))
    d.maybe(network, "nvlink_efficiency", fraction(0.3, 1.0))
    d.maybe(network, "placement", st.sampled_from(["contiguous", "scattered"]))
    d.maybe(network, "routing", st.sampled_from(["adaptive", "static"]))

    mem: dict[str, Any] = {}
    d.maybe(mem, "weight_bytes_per_param", st.floats(0.0, 8.0))
    d.maybe(mem, "grad_bytes_per_param", st.floats(0.0, 8.0))
    d.maybe(mem, "optimizer_bytes_per_param", st.floats(0.0, 16.0))
    d.maybe(mem, "attention", st.sampled_from(["flash", "stored-scores"]))

    performance: dict[str, Any] = {}
    doc = {"model": model, "cluster": cluster, "parallelism": para, "network": network}
    if mem:
        doc["memory"] = mem
    # the GPU holds what this configuration needs (else an inline GPU with room for it)
    needed_GB = asked(
        lambda: memory.memory_use(probe({**doc, "performance": {"mfu": 0.5}})).total_GB, 0.0
    )
    spec = GPUS[cluster["gpu"]] if isinstance(cluster["gpu"], str) else None
    capacity = spec.memory_GB if spec else cluster["gpu"].get("memory_GB", 80.0)
    if needed_GB > capacity:
        peak = spec.peak_tflops if spec else cluster["gpu"]["peak_tflops"]
        cluster["gpu"] = {"name": "roomy", "peak_tflops": peak, "memory_GB": needed_GB * 1.25}
    d.maybe(performance, "overlap", fraction())
    d.maybe(performance, "bucket_MB", log_uniform(1e-3, 1e6))
    abstract = kind == "abstract"
    efficiency_mode = (
        abstract
        and draw(st.booleans())
        and (tensor == 1 or "layers" in model)
        and (pipeline == 1 or "microbatches" in para)
    )
    if efficiency_mode or (not abstract and draw(st.booleans())):
        performance["compute_efficiency"] = draw(fraction(0.01, 1.0))
        return {**doc, "performance": performance}
    if abstract:
        performance["mfu"] = draw(fraction(0.01, 1.0))
        d.maybe(performance, "mfu_scaling", st.sampled_from(["model", "fixed"]))
        return {**doc, "performance": performance}
    # a job with sequences: its mfu is one the configuration can reach (at efficiency 1)
    reachable = asked(
        lambda: (
            calculator.calculate(
                probe({**doc, "performance": {**performance, "compute_efficiency": 1.0}})
            ).mfu
        ),
        0.5,
    )
    if reachable < 0.0125:
        performance["compute_efficiency"] = draw(fraction(0.01, 1.0))
        return {**doc, "performance": performance}
    performance["mfu"] = max(0.01, reachable * draw(fraction(0.2, 0.95)))
    scaling = d.maybe(performance, "mfu_scaling", st.sampled_from(["model", "fixed"]))
    if scaling != "fixed" and draw(st.booleans()):
        # measured on a faster fabric: reachable there too
        better = min(1.0, network.get("efficiency", 0.94) + draw(fraction(0.0, 0.1)))
        performance["mfu_at"] = {"network.efficiency": better}
    return {**doc, "performance": performance}


# --------------------------------------------------------------------------- the rest


SCOPES = ["node", "gpu", "job", "link", "switch", "storage"]


@st.composite
def failure_class(draw, index: int, oncall: bool) -> tuple[dict, float]:
    """A failure class (its rate a placeholder) and the failures it should make in the horizon."""
    d = Doc(draw)
    scope = draw(st.sampled_from(SCOPES))
    fc: dict[str, Any] = {"name": f"c{index}", "scope": scope}
    fc["rate_per_1k_gpu_day" if draw(st.booleans()) else "mtbf_hours"] = 1.0
    law = d.maybe(fc, "distribution", st.sampled_from(["exponential", "weibull", "lognormal"]))
    if law == "weibull":
        fc["weibull_shape"] = draw(log_uniform(0.2, 20.0))
    if law == "lognormal":
        fc["lognormal_sigma"] = draw(fraction(0.05, 3.0))
    if draw(st.booleans()):
        d.maybe(fc, "detect_minutes", st.floats(0.0, 60.0))
    else:
        d.maybe(fc, "detect_hours", st.floats(0.0, 5.0))
    hardware = scope in ("gpu", "node", "switch")
    d.maybe(fc, "replace", st.booleans() if hardware else st.just(False))
    d.maybe(fc, "repair_hours", log_uniform(1e-2, 1e3))
    if scope == "storage":
        d.maybe(fc, "loses_data", st.booleans())
    d.maybe(fc, "while_idle", st.booleans())
    d.maybe(fc, "age", st.sampled_from(["new", "in_service"]))
    node = scope in ("gpu", "node")
    attributable = d.maybe(fc, "node_attributable", st.booleans() if node else st.just(False))
    if node and attributable is not False:
        d.maybe(fc, "fault_prob", fraction())
    if node and fc.get("replace", True):  # a repair that does not hold follows a repair
        d.maybe(fc, "refail_prob", fraction(0.0, 0.9))
        d.maybe(fc, "refail_hours", log_uniform(0.1, 100.0))
    d.maybe(fc, "rollback_checkpoints", st.integers(1, 3))
    if scope in ("gpu", "node", "job"):
        d.maybe(fc, "silent", st.booleans())
    if oncall:
        d.maybe(fc, "needs_human", st.booleans())
    # now and then a busy class: a log with hundreds of failures to fit
    wanted = st.one_of(
        st.sampled_from([5.0, 0.0, 20.0, 30.0]),
        st.floats(0.0, EVENTS),
        st.floats(EVENTS, 10 * EVENTS),
    )
    return fc, draw(wanted)


def set_rates(doc: dict, wanted: list[float], horizon_h: float, step_s: float) -> None:
    """Each class's rate so that it makes its wanted failures in the horizon (its components
    on this fabric, lemons and lasting faults counted), within the schema's bounds and
    slower, all together, than one failure per four steps."""
    classes = doc.get("failures", [])
    if not classes:
        return
    scenario = probe(doc)
    cluster = doc["cluster"]
    faults = cluster.get("lemon_fraction", 0) > 0 or any(
        f.get("fault_prob", 0) > 0 for f in classes
    )
    boost = cluster.get("lemon_rate_multiplier", 5.0) if faults else 1.0
    unit = [reliability.failure_rate_per_hour(f, scenario) for f in scenario.failures]
    total = sum(w / horizon_h for w in wanted)
    squeeze = min(1.0, 3600.0 / (4.0 * step_s) / total) if total > 0 else 1.0
    ports = scenario.cluster.nodes * scenario.network.nics_per_node
    for fc, per_unit, want, config in zip(classes, unit, wanted, scenario.failures, strict=True):
        if config.scope in ("link", "switch"):
            # each reroutes every flow on the fabric: on the largest, the class never fires
            want = min(want, FABRIC_WORK / ports) if ports <= 4096 else 0.0
        rate_h = want * squeeze / horizon_h / (boost if config.attributable else 1.0)
        if "mtbf_hours" in fc:
            value = per_unit / rate_h if rate_h > 0 and per_unit > 0 else 1e15
            fc["mtbf_hours"] = min(1e15, max(1e-3, value))
        else:
            value = rate_h / per_unit if per_unit > 0 else 1e-9
            fc["rate_per_1k_gpu_day"] = min(1e6, max(1e-9, value))


def tier(d: Doc, kind_first: str, size_TB: float, keep: int) -> dict:
    """A storage tier: a preset, some of its figures overridden, room for `keep` checkpoints."""
    draw = d.draw
    kinds = [kind_first] + [k for k in sorted(TIERS) if k != kind_first]
    out: dict[str, Any] = {}
    kind = d.maybe(out, "kind", st.sampled_from(kinds)) or kind_first
    if kind == "lustre" and draw(st.booleans()):
        out["osts"] = draw(st.integers(1, 256))
        d.maybe(out, "ost_GB_s", log_uniform(0.1, 50.0))
    else:
        d.maybe(out, "write_GB_s", log_uniform(1e-3, 1e5))
    d.maybe(out, "read_GB_s", log_uniform(1e-3, 1e5))
    d.maybe(out, "latency_ms", log_uniform(1e-3, 1e3))
    capacity = d.maybe(out, "capacity_TB", log_uniform(1e-3, 1e6))
    if (capacity or TIERS[kind].capacity_TB) < size_TB * keep:
        out["capacity_TB"] = min(1e9, size_TB * keep * draw(fraction(1.01, 3.0)))
    return out


@st.composite
def scenario_documents(draw) -> dict:
    """A valid scenario document (a mapping as YAML loads it) over the whole schema."""
    d = Doc(draw)
    doc = draw(configurations())
    doc = {"name": draw(st.from_regex(r"[a-z0-9_-]{1,12}", fullmatch=True)), **doc}
    d.maybe(
        doc,
        "description",
        st.text(st.characters(codec="utf-8", exclude_categories=("C", "Zl", "Zp")), max_size=40),
    )
    cluster, model = doc["cluster"], doc["model"]
    nodes = cluster["nodes"]

    # the run's length: a few steps to a few thousand, a horizon past the ideal time
    step_s = asked(lambda: perf.step_time_s(probe(doc)), rough_step_s(doc))
    # the engine's cost grows with checkpoints and failures, not steps: some runs of weeks
    steps = draw(st.one_of(st.integers(1, 3000), st.integers(3000, 10**6)))
    steps = max(1, min(steps, int(MAX_DAYS * 86400 / 2 / step_s)))
    model["tokens"] = float(model["global_batch_tokens"] * steps - draw(st.integers(0, 1)) * 0.5)
    if model["tokens"] <= 0:
        model["tokens"] = float(model["global_batch_tokens"])
    ideal_days = steps * step_s / 86400
    # mostly a little past the ideal time: the failures drawn for the horizon strike the run
    slack = draw(st.one_of(st.floats(1.05, 2.0), log_uniform(2.0, 40.0)))
    horizon_days = min(MAX_DAYS, ideal_days * slack + 1e-6)
    horizon_h = horizon_days * 24

    # the fleet around the job
    d.maybe(cluster, "spare_nodes", st.integers(0, max(1, nodes // 4)))
    if draw(st.booleans()):
        d.maybe(cluster, "pool_nodes", st.integers(0, 4))
        d.maybe(cluster, "host_selection_minutes", st.floats(0.0, 30.0))
        d.maybe(cluster, "preemptible_nodes", st.integers(0, 4))
        d.maybe(cluster, "preemption_minutes", st.floats(0.0, 60.0))
    if draw(st.booleans()):
        d.maybe(cluster, "lemon_fraction", fraction(0.0, 1.0, high_open=True))
        d.maybe(cluster, "lemon_rate_multiplier", log_uniform(1.0, 1000.0))
        d.maybe(cluster, "lemons_permanent", st.booleans())
    d.maybe(cluster, "node_rate_cv", st.one_of(st.just(0.0), st.floats(1e-6, 10.0)))
    d.maybe(cluster, "spare_order", st.sampled_from(["oldest", "newest", "random"]))
    if draw(st.booleans()):  # the fleet's age: rates within a few times the written ones
        rated = draw(log_uniform(1.0, 2000.0))
        aging = {"beta": draw(fraction(0.5, 2.0)), "rated_at_days": rated}
        d.maybe(aging, "age_days", fraction(rated / 10, rated * 2))
        cluster["aging"] = aging

    # checkpoints
    ckpt: dict[str, Any] = {}
    # (young and daly bound the checkpoints by the failures only: on short runs)
    ways = ["interval_steps", "interval_minutes", "interval"][: 3 if steps <= 3000 else 2]
    how = draw(st.sampled_from(ways))
    count = draw(st.integers(1, 100))  # checkpoints in the run
    every = max(1, math.ceil(steps / count))
    if how == "interval_steps":
        ckpt["interval_steps"] = every
    elif how == "interval_minutes":
        ckpt["interval_minutes"] = min(MAX_DAYS * 1440, max(1e-6, every * step_s / 60))
    else:
        ckpt["interval"] = draw(st.sampled_from(["young", "daly"]))
    mode = d.maybe(ckpt, "mode", st.sampled_from(["sync", "async"]))
    state_bytes = d.maybe(ckpt, "state_bytes_per_param", log_uniform(0.5, 32.0)) or 14.0
    keep = d.maybe(ckpt, "keep_last", st.integers(1, 8)) or 5
    d.maybe(ckpt, "snapshot_GB_s_per_node", log_uniform(1e-2, 1e4))
    in_memory = d.maybe(ckpt, "memory_every_steps", st.integers(max(1, every // 50), every))
    d.maybe(ckpt, "corrupt_prob", fraction(0.0, 0.5))
    d.maybe(ckpt, "validate", st.booleans())
    doc["checkpoint"] = ckpt
    copies = (mode == "async") + 2 * (in_memory is not None)
    per_node_GB = model["params"] * state_bytes / 1e9 / nodes
    host = d.maybe(cluster, "host_memory_GB", log_uniform(64.0, 1e5)) or 2048.0
    if copies * per_node_GB > host:
        cluster["host_memory_GB"] = min(1e7, copies * per_node_GB * 1.5)

    # storage: room for keep_last checkpoints on the tier
    size_TB = model["params"] * state_bytes / 1e12
    storage: dict[str, Any] = {"checkpoint_tier": tier(d, "lustre", size_TB, keep)}
    d.maybe(storage, "client_GB_s_per_node", log_uniform(1e-2, 1e4))
    if in_memory is None:
        d.maybe(storage, "data_tier", st.sampled_from(["separate", "shared"]))
    d.maybe(storage, "data_bytes_per_token", st.floats(0.0, 16.0))
    d.maybe(storage, "background_load", fraction(0.0, 0.95))
    if draw(st.booleans()):
        storage["backup"] = tier(d, "object", size_TB, keep)
        d.maybe(storage["backup"], "every", st.integers(1, 4))
    doc["storage"] = storage

    # operations
    oncall = draw(st.booleans())
    if oncall:
        hours: dict[str, Any] = {}
        d.maybe(hours, "response_minutes", st.floats(0.0, 120.0))
        d.maybe(hours, "night_response_minutes", st.floats(0.0, 240.0))
        d.maybe(hours, "weekend_response_minutes", st.floats(0.0, 600.0))
        start = d.maybe(hours, "workday_start_hour", st.floats(0.0, 23.0))
        if (start or 0.0) >= 17.5 or draw(st.booleans()):
            hours["workday_end_hour"] = draw(st.floats((start or 9.0) + 0.5, 24.0))
        doc["oncall"] = hours
    drawn = draw(st.lists(st.integers(0, 0), max_size=5))
    classes = [draw(failure_class(i, oncall)) for i in range(len(drawn))]
    if classes:
        doc["failures"] = [fc for fc, _ in classes]
    if draw(st.booleans()):
        repair: dict[str, Any] = {}
        d.maybe(repair, "auto_minutes", log_uniform(0.1, 1e3))
        d.maybe(repair, "escalate_prob", fraction())
        d.maybe(repair, "auto_false_fix_prob", fraction())
        d.maybe(repair, "manual_hours", log_uniform(0.01, 1e3))
        d.maybe(repair, "manual_false_fix_prob", fraction())
        d.maybe(repair, "technicians", st.integers(1, 4))
        d.maybe(repair, "rma_after_manual_repairs", st.integers(1, 4))
        d.maybe(repair, "rma_days", log_uniform(0.01, 60.0))
        d.maybe(repair, "retire_after_failures", st.integers(1, 4))
        d.maybe(repair, "retire_window_days", log_uniform(0.01, 60.0))
        d.maybe(repair, "return_to", st.sampled_from(["spares", "origin"]))
        d.maybe(repair, "misdiagnosis_prob", fraction(0.0, 0.9))
        doc["repair"] = repair
    if draw(st.booleans()):
        checks: dict[str, Any] = {}
        checks["every_hours"] = min(MAX_DAYS * 24, horizon_h / draw(st.floats(0.5, EVENTS)))
        d.maybe(checks, "cost_minutes", st.floats(0.0, 60.0))
        d.maybe(checks, "catch_prob", fraction())
        d.maybe(checks, "lead_hours", log_uniform(0.01, 100.0))
        doc["health_checks"] = checks
    if draw(st.booleans()):
        windows = {"every_days": min(MAX_DAYS, horizon_days / draw(st.floats(0.5, EVENTS)))}
        d.maybe(windows, "duration_hours", log_uniform(0.01, 24.0))
        doc["maintenance"] = windows
    if draw(st.booleans()):
        slow: dict[str, Any] = {}
        onsets = draw(st.floats(0.1, EVENTS))
        gpus = nodes * cluster.get("gpus_per_node", 8)
        slowdown = d.maybe(slow, "slowdown", fraction(0.01, 0.9)) or 0.3
        if draw(st.booleans()):
            slow["slowdown_max"] = draw(fraction(slowdown, 0.95))
        d.maybe(slow, "detect_hours", st.one_of(st.none(), log_uniform(0.01, 48.0)))
        d.maybe(slow, "detect_threshold", fraction(0.0, 0.9))
        d.maybe(slow, "clear_hours", log_uniform(0.01, 100.0))
        d.maybe(slow, "repair_hours", log_uniform(0.01, 100.0))
        d.maybe(slow, "node_attributable", st.booleans())
        boost = cluster.get("lemon_rate_multiplier", 5.0)
        slow["rate_per_1k_gpu_day"] = min(
            1e6, max(1e-9, onsets / horizon_days / (gpus / 1000.0) / boost)
        )
        doc["stragglers"] = slow
    recovery: dict[str, Any] = {}
    # elastic steps at every data-parallel size are built up front, each running the flow
    # model: kept to small sizes for jobs whose step follows the model (seconds each)
    para = doc.get("parallelism", {})
    split = para.get("tensor", 1) * para.get("context", 1) * para.get("pipeline", 1)
    replicas = nodes * cluster.get("gpus_per_node", 8) // split
    policies = ["restart", "elastic"] if "seq_len" not in model or replicas <= 64 else ["restart"]
    d.maybe(recovery, "policy", st.sampled_from(policies))
    d.maybe(recovery, "restart_minutes", st.floats(0.0, 30.0))
    d.maybe(recovery, "elastic_min_fraction", fraction(0.01, 1.0))
    d.maybe(recovery, "rescale_minutes", st.floats(0.0, 30.0))
    if recovery:
        doc["recovery"] = recovery
    if draw(st.booleans()):
        doc["cost"] = {"gpu_hour_usd": draw(st.floats(0.0, 100.0))}
    sim: dict[str, Any] = {"horizon_days": horizon_days}
    d.maybe(sim, "until", st.sampled_from(["finished", "horizon"]))
    d.maybe(sim, "replicas", st.integers(1, 1000))
    d.maybe(sim, "seed", st.integers(0, 2**63 - 1))
    d.maybe(sim, "executor", st.sampled_from(["serial", "processes", "dask"]))
    d.maybe(
        sim,
        "start_weekday",
        st.sampled_from(
            ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        ),
    )
    d.maybe(sim, "start_hour", st.floats(0.0, 24.0, exclude_max=True))
    doc["simulation"] = sim
    set_rates(doc, [want for _, want in classes], horizon_h, step_s)

    # a sweep of keys that leave every point runnable
    axes: dict[str, st.SearchStrategy] = {
        "cost.gpu_hour_usd": st.floats(0.0, 10.0),
        "recovery.restart_minutes": st.floats(0.0, 30.0),
        "checkpoint.interval_steps": st.integers(max(1, every // 2), every * 2),
        "cluster.spare_nodes": st.integers(0, 4),
        "cluster.node_rate_cv": st.one_of(st.just(0.0), st.floats(1e-6, 3.0)),
        "simulation.horizon_days": st.floats(horizon_days, min(MAX_DAYS, horizon_days * 2)),
    }
    if classes:
        axes["failures.0.repair_hours"] = log_uniform(0.01, 100.0)
    keys = draw(st.lists(st.sampled_from(sorted(axes)), max_size=2, unique=True))
    if keys:
        doc["sweep"] = {
            key: draw(st.lists(axes[key], min_size=1, max_size=3, unique=True)) for key in keys
        }
    return doc


# --------------------------------------------------------------------------- mutations


def leaf_keys(doc: dict) -> list[str]:
    """The dotted paths of the document's scalar keys (list items by index), not the sweep."""
    out = []

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*path, str(key)])
        elif isinstance(node, list) and path != ["sweep"]:
            for i, value in enumerate(node):
                walk(value, [*path, str(i)])
        elif path and path[0] not in ("sweep",):
            out.append(".".join(path))

    walk(doc, [])
    return out


def field_of(path: str) -> Any:
    """The pydantic field a dotted key path names (None when it names none)."""
    parts = path.split(".")
    parent = model_at(parts[:-1])
    return None if parent is None else keys_of(parent).get(parts[-1])


def bounds(field: Any) -> tuple[float | None, float | None, bool, bool]:
    """(low, high, low inclusive, high inclusive) of a numeric field (None: unbounded)."""
    low = high = None
    low_in = high_in = True
    metadata = list(field.metadata)
    annotation = field.annotation
    for arg in getattr(annotation, "__args__", ()):
        metadata += list(getattr(arg, "__metadata__", ()))
    for item in metadata:
        for part in getattr(item, "metadata", [item]):
            if isinstance(part, annotated_types.Gt):
                low, low_in = part.gt, False
            elif isinstance(part, annotated_types.Ge):
                low, low_in = part.ge, True
            elif isinstance(part, annotated_types.Lt):
                high, high_in = part.lt, False
            elif isinstance(part, annotated_types.Le):
                high, high_in = part.le, True
    return low, high, low_in, high_in


REQUIRED = [
    "name",
    "model",
    "model.params",
    "model.tokens",
    "model.global_batch_tokens",
    "cluster",
    "cluster.gpu",
    "cluster.nodes",
    "performance",
    "storage",
    "storage.checkpoint_tier",
    "checkpoint",
]


@st.composite
def mutations(draw, doc: dict) -> tuple[dict, str, str]:
    """A valid document made bad at one key: (the document, the key path the error must
    name, what was done). A required key removed, a key misspelt, a value of the wrong type
    or outside its documented bounds."""
    bad = copy.deepcopy(doc)
    bad.pop("sweep", None)  # one error at a time: a sweep would name its point
    what = draw(st.sampled_from(["removed", "misspelt", "wrong type", "out of range"]))
    leaves = leaf_keys(bad)
    if what == "removed":
        path = draw(
            st.sampled_from(
                REQUIRED + [f"failures.{i}.name" for i in range(len(bad.get("failures", [])))]
            )
        )
    elif what == "out of range":
        numeric = [
            p for p in leaves
            if isinstance(value_at(bad, p), int | float)
            and not isinstance(value_at(bad, p), bool)
            and field_of(p) is not None
            and any(b is not None for b in bounds(field_of(p))[:2])
        ]  # fmt: skip
        path = draw(st.sampled_from(numeric))
    else:
        path = draw(st.sampled_from([p for p in leaves if field_of(p) is not None]))
    parts = path.split(".")
    parent = value_at(bad, ".".join(parts[:-1])) if len(parts) > 1 else bad
    key: Any = int(parts[-1]) if isinstance(parent, list) else parts[-1]
    if what == "removed":
        del parent[key]
        return bad, path, what
    if what == "misspelt":
        typo = draw(st.sampled_from(["x", "_", "s"]))
        new = key + typo
        parent[new] = parent.pop(key)
        return bad, ".".join([*parts[:-1], new]), what
    old = parent[key]
    if what == "wrong type":
        if isinstance(old, bool):
            parent[key] = draw(st.sampled_from(["maybe", 3, [True]]))
        elif isinstance(old, int | float):
            parent[key] = draw(st.sampled_from(["lots", [1], {"a": 1}, True]))
        elif isinstance(old, str):
            parent[key] = draw(st.sampled_from([[old], {"x": old}, 7.5]))
        else:
            parent[key] = "nonsense"
        return bad, path, what
    low, high, low_in, high_in = bounds(field_of(path))
    sides = [s for s, b in (("low", low), ("high", high)) if b is not None]
    side = draw(st.sampled_from(sides))
    integer = isinstance(old, int)
    if side == "low":
        value = (
            (low - 1 if low_in else low)
            if integer
            else (low - max(1.0, abs(low)) if low_in else low)
        )
    else:
        value = (high + 1 if high_in else high) if integer else (high * 2 + 1 if high_in else high)
    parent[key] = value
    return bad, path, what


def value_at(doc: Any, path: str) -> Any:
    node = doc
    for part in path.split(".") if path else []:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


# --------------------------------------------------------------------------- properties


def write(doc: dict, folder: Path, name: str = "scenario.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def command(*args: str) -> Any:
    """A trainsim command in this process: (exit code, stdout, stderr)."""
    done = cli_in_process(list(args))
    return done.returncode, done.stdout, done.stderr


def refused_naming_a_key(code: int, err: str, what: str) -> None:
    """Exit 2 with one message that names a key path of the scenario (never exit 1)."""
    assert code == 2, f"{what} exited {code}: {err[-2000:]}"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, f"{what}: expected one error message, got {err[-2000:]}"
    assert re.search(r"[a-z_]+(\.[a-z0-9_]+)+|\b[a-z_]+:", errors[0]), errors[0]


# figures calc gives as infinite by design: the MTBF and intervals of a job that never
# fails, and Daly's expected time (and its cost) of a job that would never finish
INFINITE_WITHOUT_FAILURES = {
    "aggregate_mtbf_hours",
    "young_interval_minutes",
    "daly_interval_minutes",
}
INFINITE_NEVER_FINISHING = {"daly_expected_days", "daly_expected_cost_usd"}


def check_calculation(scenario_set) -> None:
    """calc's answer: every number finite (bar the MTBF and intervals of a job that never
    fails) and none negative."""
    for point in scenario_set.feasible:
        c = calculator.calculate(point.scenario)
        for name, value in vars(c).items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isinf(value) and name in INFINITE_WITHOUT_FAILURES and c.failures_per_day == 0:
                continue
            if value == math.inf and name in INFINITE_NEVER_FINISHING:
                continue
            assert math.isfinite(value), f"calc: {name} = {value}"
            assert value >= 0, f"calc: {name} = {value}"


def check_table(table: pd.DataFrame) -> None:
    """Each replica's row: no error, the time identity and its parts, the cost's parts,
    nothing negative, counts whole."""
    errors = table.loc[
        table["error"].fillna("").astype(str).ne("") & table["error"].ne("nan"), "error"
    ]
    assert errors.empty, f"replicas raised: {errors.iloc[0]}"
    for _, row in table.iterrows():
        wall = row["wall_hours"]
        tol = 1e-9 * max(1.0, wall)
        parts = sum(row[c] for c in BUCKETS) + row["downtime_hours"]
        assert abs(parts - wall) <= tol, f"replica {row['replica']}: parts {parts} != wall {wall}"
        down = sum(row[c] for c in DOWNTIME_PARTS)
        assert abs(down - row["downtime_hours"]) <= tol, (
            f"downtime {down} != {row['downtime_hours']}"
        )
        cost = sum(row[c] for c in COST_PARTS)
        assert abs(cost - row["cost_usd"]) <= 1e-9 * max(1.0, row["cost_usd"]), "cost parts"
        if row["finished"]:
            assert math.isclose(row["time_to_train_days"] * 24, wall, rel_tol=1e-9)
        else:
            assert pd.isna(row["time_to_train_days"])
    numeric = [c for c in table.columns if c in COLUMNS or c.startswith("failures_")]
    for column in numeric:
        values = table[column]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        present = values.dropna()
        assert (present >= -1e-12).all(), f"{column} negative: {present.min()}"
        if column in COUNT_COLUMNS or column.startswith("failures"):
            assert pd.api.types.is_integer_dtype(values), f"{column} is {values.dtype}"
            assert present.notna().all()
    assert (table["goodput"].dropna() <= 1 + 1e-9).all()


def check_scenario(doc: dict) -> None:
    """validate accepts it; calc answers with finite numbers; run of a few replicas exits 0
    (or 2 naming a key, never 1) and every replica keeps the identity; the same seed gives
    the same table serially and with 2 workers."""
    from sim.model.scenario import load_document

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(doc, folder)
        code, out, err = command("validate", str(path))
        assert code == 0, f"validate exited {code}: {err[-2000:]}"
        code, out, err = command("calc", str(path), "--json")
        assert code == 0, f"calc exited {code}: {err[-2000:]}"
        json.loads(out)
        scenario_set = load_document(copy.deepcopy(doc), "scenario")
        check_calculation(scenario_set)
        code, out, err = command(
            "run", str(path), "--replicas", str(REPLICAS), "--executor", "serial",
            "--out", str(folder / "runs"), "--no-figures", "--no-progress", "--json",
        )  # fmt: skip
        if code == 2:
            refused_naming_a_key(code, err, "run")
            return
        assert code == 0, f"run exited {code}: {err[-2000:]}"
        assert "raised" not in err, err[-2000:]
        serial = run_scenario(
            scenario_set, replicas=REPLICAS, workers=1, executor="serial", progress=False
        )
        check_table(serial.table)
        parallel = run_scenario(
            scenario_set, replicas=REPLICAS, workers=2, executor="processes", progress=False
        )
        pd.testing.assert_frame_equal(serial.table, parallel.table)


def check_fit_round_trip(doc: dict) -> None:
    """run --incidents, then fit one replica's log: exit 0, and the fragment it writes, put
    into the scenario, passes validate and runs."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(doc, folder)
        code, out, err = command(
            "run", str(path), "--replicas", "2", "--executor", "serial", "--incidents",
            "--out", str(folder / "runs"), "--no-figures", "--no-progress", "--json",
        )  # fmt: skip
        assert code == 0, f"run --incidents exited {code}: {err[-2000:]}"
        (log,) = (folder / "runs").glob("*/*/incidents.parquet")
        incidents = pd.read_parquet(log)
        replica = int(incidents["replica"].value_counts().idxmax()) if len(incidents) else 0
        point = (
            int(incidents.loc[incidents["replica"] == replica, "point"].iloc[0])
            if len(incidents)
            else 0
        )
        code, out, err = command(
            "fit", str(log), "--replica", str(replica), "--point", str(point),
            "--out", str(folder / "fit"), "--no-figures", "--json",
        )  # fmt: skip
        assert code == 0, f"fit exited {code}: {err[-2000:]}"
        fragment = yaml.safe_load((folder / "fit" / "fitted.yaml").read_text())
        fitted = apply_fragment(doc, fragment)
        path = write(fitted, folder, "fitted-scenario.yaml")
        code, out, err = command("validate", str(path))
        assert code == 0, f"validate of the fitted scenario exited {code}: {err[-2000:]}"
        code, out, err = command(
            "run", str(path), "--replicas", "2", "--executor", "serial",
            "--out", str(folder / "runs-fitted"), "--no-figures", "--no-progress", "--json",
        )  # fmt: skip
        assert code == 0, f"run of the fitted scenario exited {code}: {err[-2000:]}"
        summary = json.loads(out)
        assert all(p["errors"] == 0 for p in summary["points"]), err[-2000:]


def apply_fragment(doc: dict, fragment: dict) -> dict:
    """The scenario with the fitted failure classes and cluster keys in place (a sweep of
    the old classes' keys dropped)."""
    out = copy.deepcopy(doc)
    out["failures"] = fragment.get("failures") or []
    out["cluster"].update(fragment.get("cluster") or {})
    if "sweep" in out:
        out["sweep"] = {k: v for k, v in out["sweep"].items() if not k.startswith("failures.")}
        if not out["sweep"]:
            del out["sweep"]
    if not out["failures"]:
        del out["failures"]
    return out


def check_mutation(bad: dict, path: str, what: str) -> None:
    """validate refuses the mutated document with exit 2, naming the key."""
    with tempfile.TemporaryDirectory() as tmp:
        file = write(bad, Path(tmp))
        code, out, err = command("validate", str(file))
        assert code == 2, f"{what} {path}: validate exited {code}: {err[-2000:]}{out[-500:]}"
        leaf = path.split(".")[-1]
        assert path in err or leaf in err, f"{what} {path}: the message does not name it: {err}"
