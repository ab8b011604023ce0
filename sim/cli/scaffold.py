"""`trainsim init NAME [--like SCENARIO]`: a commented scenario file to start from.

Without --like it is the worked example of docs/scenarios.md (a 7B model on 128 H100s
with NFS checkpoints); with --like, the values of that scenario (a shipped one by name,
or any file). Every required key and the common optional ones are written, each with a
comment giving its unit and where the value comes from: a published source
(docs/references.md), the scenario it was taken from, or a stated assumption. The text is
validated (schema, model, feasibility) before it is written: `trainsim validate` passes on
it as written.
"""

from __future__ import annotations

import copy
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

from sim.model import feasibility
from sim.model.hardware import TIERS
from sim.model.safe_yaml import parse_yaml, read_yaml
from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError
from sim.model.schema import Scenario, keys_of
from sim.runs.files import protect_run_files, write_regular

# the shipped scenarios (scenarios/<name>.yaml in the checkout)
SHIPPED = Path(__file__).resolve().parents[2] / "scenarios"
NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")

# --------------------------------------------------------------------------- the worked example

# The default scenario: a Llama-2-7B-like model on 16 HGX H100 nodes, checkpoints on one NFS
# server. Sources (short names as in docs/references.md) are in SOURCES below.
EXAMPLE: dict[str, Any] = {
    "name": "my-7b",
    "description": "7B on 128 H100s, 2T tokens, NFS checkpoints every hour, Llama 3 failure mix",
    "model": {
        "params": 7.0e9,
        "tokens": 2.0e12,
        "global_batch_tokens": 4194304,
        "seq_len": 4096,
        "layers": 32,
        "hidden": 4096,
    },
    "cluster": {"gpu": "H100-SXM", "nodes": 16, "gpus_per_node": 8, "spare_nodes": 1},
    "parallelism": {"tensor": 1, "pipeline": 1},
    "performance": {"mfu": 0.5},
    "storage": {"checkpoint_tier": {"kind": "nfs"}, "client_GB_s_per_node": 25.0},
    "checkpoint": {
        "interval_minutes": 60.0,
        "mode": "sync",
        "state_bytes_per_param": 14.0,
        "keep_last": 5,
    },
    # Llama 3 405B's 419 unexpected interruptions in 54 days on 16,384 GPUs, per 1,000
    # GPU-days: count / 884.7 (docs/references.md, "The Llama 3 failure mix")
    "failures": [
        {
            "name": "gpu",
            "scope": "gpu",
            "rate_per_1k_gpu_day": 0.3029,
            "detect_minutes": 3.0,
            "repair_hours": 48.0,
        },
        {
            "name": "host",
            "scope": "node",
            "rate_per_1k_gpu_day": 0.0599,
            "detect_minutes": 5.0,
            "repair_hours": 24.0,
        },
        {
            "name": "network",
            "scope": "node",
            "rate_per_1k_gpu_day": 0.0396,
            "detect_minutes": 5.0,
            "repair_hours": 8.0,
        },
        {"name": "software", "scope": "job", "rate_per_1k_gpu_day": 0.0633, "detect_minutes": 2.0},
        {
            "name": "nccl_hang",
            "scope": "job",
            "rate_per_1k_gpu_day": 0.0079,
            "detect_minutes": 10.0,
        },
    ],  # fmt: skip
    "recovery": {"policy": "restart", "restart_minutes": 10.0},
    "cost": {"gpu_hour_usd": 2.5},
    "simulation": {"replicas": 1000, "seed": 0, "horizon_days": 365.0},
}

# Where each value of EXAMPLE comes from.
SOURCES: dict[str, str] = {
    "model.params": "published: Llama 2 7B",
    "model.tokens": "published: Llama 2 (2T tokens)",
    "model.global_batch_tokens": "published: Llama 2, §2.2 (4M tokens)",
    "model.seq_len": "published: Llama 2, §2.2",
    "model.layers": "published: LLaMA, Table 2 (7B)",
    "model.hidden": "published: LLaMA, Table 2 (7B)",
    "cluster.gpu": "published: H100 datasheet (989 dense BF16 TFLOPS, 80 GB)",
    "cluster.nodes": "assumption: 16 HGX nodes = 128 GPUs",
    "cluster.gpus_per_node": "published: DGX H100 datasheet",
    "cluster.spare_nodes": "assumption: one warm spare",
    "parallelism.tensor": "assumption: pure data parallel (7B fits a GPU)",
    "parallelism.pipeline": "assumption: pure data parallel",
    "performance.mfu": "assumption: inside the published 38-55% (Llama 3, PaLM, Megatron-LM)",
    "storage.checkpoint_tier.kind": "approx.: one NFS server, ~5 GB/s write, 8 GB/s read",
    "storage.client_GB_s_per_node": "assumption: a node's own path to storage",
    "checkpoint.interval_minutes": "assumption: hourly; compare with `trainsim calc` (Daly)",
    "checkpoint.mode": "assumption: training blocks while the checkpoint is written",
    "checkpoint.state_bytes_per_param": "published: bf16 weights 2 + fp32 master 4 + Adam 8",
    "checkpoint.keep_last": "assumption",
    "failures": "published: Llama 3, Table 5 (rates); detection and repair times: assumption",
    "recovery.policy": "assumption: wait for a full complement of nodes",
    "recovery.restart_minutes": "assumption: requeue, launch and NCCL initialisation",
    "cost.gpu_hour_usd": "assumption: an H100 GPU-hour under a committed contract",
    "simulation.replicas": "assumption: enough for a p95 within a few hours",
    "simulation.seed": "any seed; the same seed gives the same numbers",
    "simulation.horizon_days": "assumption: a replica not done in a year is reported unfinished",
    "name": "your choice",
    "description": "your choice",
}
# The classes of EXAMPLE: Llama 3's root causes behind each rate (Table 5 counts).
FAILURE_NOTES = {
    "gpu": "faulty GPU 148 + HBM3 72 + SRAM 19 + GSP 17 + thermal 6 + SDC 6 = 268",
    "host": "host maintenance 32 + NIC 7 + SSD 3 + PSU 3 + chassis 2 + IO board 2 + CPU 2 "
    "+ memory 2 = 53",
    "network": "network switch/cable 35: the node behind the cable is swapped out",
    "software": "software bug 54 + dependency 2 = 56: a crash",
    "nccl_hang": "NCCL watchdog timeout 7: noticed when the 10-minute watchdog fires",
}
WIDTH = 100  # a line with its comment; longer comments go on the lines above the key

# The common optional keys written (with their defaults) when the source does not give them.
COMMON: dict[str, list[str]] = {
    "cluster": ["gpus_per_node", "spare_nodes"],
    "parallelism": ["tensor", "pipeline"],
    "storage": ["client_GB_s_per_node"],
    "checkpoint": ["mode", "state_bytes_per_param", "keep_last"],
    "recovery": ["policy", "restart_minutes"],
    "cost": ["gpu_hour_usd"],
    "simulation": ["replicas", "seed", "horizon_days"],
}
SECTION_ORDER = [
    "name", "description", "model", "cluster", "parallelism", "performance", "network",
    "storage", "checkpoint", "failures", "recovery", "repair", "health_checks",
    "maintenance", "stragglers", "oncall", "memory", "cost", "simulation", "sweep",
]  # fmt: skip

# What each key means, with its unit (keys not listed: the unit their name carries).
MEANING: dict[str, str] = {
    "name": "names the results directory: [a-z0-9_-], at most 64 characters",
    "description": "one line, shown by validate and in reports",
    "model.params": "trainable parameters (count)",
    "model.tokens": "training tokens (count)",
    "model.global_batch_tokens": "tokens per optimizer step (integer)",
    "model.seq_len": "tokens per sequence",
    "model.layers": "transformer layers",
    "model.hidden": "hidden size (model width)",
    "model.flops_per_token": "FLOPs per token (default 6 x params + attention)",
    "cluster.gpu": "GPU catalogue name (H100-SXM, H200, A100-80GB, B200) or a mapping",
    "cluster.nodes": "nodes the job runs on",
    "cluster.gpus_per_node": "GPUs per node",
    "cluster.spare_nodes": "warm spare nodes (billed like job nodes)",
    "parallelism.tensor": "tensor-parallel size (GPUs, inside a node)",
    "parallelism.pipeline": "pipeline-parallel size (stages)",
    "parallelism.virtual_stages": "model chunks per pipeline stage (interleaved 1F1B)",
    "parallelism.recompute": "activation recomputation: none, selective or full",
    "performance.mfu": "model FLOP utilisation at this configuration (0.01 to 1)",
    "performance.compute_efficiency": "matmul efficiency of the FLOPs executed (0.01 to 1)",
    "performance.overlap": "share of the gradient all-reduce hidden behind the backward pass",
    "storage.checkpoint_tier": "where checkpoints go",
    "storage.checkpoint_tier.kind": "preset: lustre, gpfs, weka, nfs or object",
    "storage.client_GB_s_per_node": "a node's own path to storage (GB/s)",
    "checkpoint.interval_steps": "steps between checkpoints",
    "checkpoint.interval_minutes": "minutes between checkpoints (at the nominal step time)",
    "checkpoint.interval": "young or daly: the interval from the failure rate",
    "checkpoint.mode": "sync (training blocks for the write) or async",
    "checkpoint.state_bytes_per_param": "checkpoint bytes per parameter",
    "checkpoint.keep_last": "checkpoints kept on the tier",
    "recovery.policy": "restart (wait for a full complement) or elastic",
    "recovery.restart_minutes": "requeue + launch + collective init (minutes)",
    "cluster.pool_nodes": "cold pool nodes, join after host_selection_minutes",
    "cluster.preemptible_nodes": "nodes borrowed from other work, join after preemption_minutes",
    "cluster.lemon_fraction": "share of nodes with a lasting fault at the start (0 to 1)",
    "cluster.lemon_rate_multiplier": "a faulty node fails this many times as often",
    "cluster.spare_order": "which warm spare fills a slot: oldest, newest or random",
    "network.link_Gb_s": "line rate per NIC port (gigabits/s)",
    "network.nics_per_node": "NICs per node (rail-optimised)",
    "network.switch_radix": "ports per switch",
    "network.oversubscription": "leaf ports down : up (1.0 = non-blocking)",
    "network.collective": "all-reduce algorithm: ring, tree or auto",
    "network.efficiency": "achievable share of line rate (0 to 1)",
    "network.placement": "contiguous or scattered",
    "checkpoint.corrupt_prob": "probability a checkpoint written is corrupt (0 to 1)",
    "checkpoint.validate": "read every checkpoint back after its write (true or false)",
    "stragglers.rate_per_1k_gpu_day": "slow-node onsets per 1,000 GPU-days",
    "stragglers.slowdown": "a straggler makes the job 1/(1 - slowdown) slower (0 to 1)",
    "stragglers.slowdown_max": "slowdowns uniform on [slowdown, slowdown_max]",
    "stragglers.detect_threshold": "slowdowns below this are never caught (0 to 1)",
    "health_checks.catch_prob": "probability a check catches a node about to fail",
    "repair.escalate_prob": "probability automated repair escalates to a manual one",
    "repair.technicians": "manual repairs at once (null: unlimited)",
    "cost.gpu_hour_usd": "price per GPU-hour (US dollars), job and spare GPUs",
    "simulation.replicas": "Monte Carlo replicas per sweep point (at most 1,000,000)",
    "simulation.seed": "base seed (0 to 2**63 - 1)",
    "simulation.horizon_days": "a replica not finished by then is reported unfinished (days)",
}
FAILURE_KEYS = (
    "a failure class: scope gpu|node|job|link|switch|storage; rate_per_1k_gpu_day: "
    "failures per 1,000 GPU-days (or mtbf_hours: hours per component); detect_minutes: "
    "minutes until noticed; repair_hours: hours until a replaced node is back"
)

_SUFFIX_UNITS = [
    ("rate_per_1k_gpu_day", "per 1,000 GPU-days"),
    ("_Gb_s", "Gb/s"),
    ("GB_s", "GB/s"),
    ("_hours", "hours"),
    ("_minutes", "minutes"),
    ("_days", "days"),
    ("_hour", "hour of the day"),
    ("_TB_s", "TB/s"),
    ("_TB", "TB (10^12 bytes)"),
    ("_GB", "GB (10^9 bytes)"),
    ("_ms", "milliseconds"),
    ("_us", "microseconds"),
    ("_prob", "probability, 0 to 1"),
    ("_fraction", "share, 0 to 1"),
    ("_multiplier", "times as often"),
    ("_usd", "US dollars"),
    ("_tflops", "TFLOPS"),
]


def _unit(key: str, value: Any) -> str:
    """What a key not in MEANING measures, from its name (units are in the key names)."""
    for suffix, unit in _SUFFIX_UNITS:
        if key.endswith(suffix):
            return unit
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, str):
        return "a name (docs/scenarios.md lists them)"
    if isinstance(value, int):
        return "count"
    return "a number without unit"


# --------------------------------------------------------------------------- writing


class InitError(ScenarioError):
    """init refused: the name, the --like scenario or the output file."""


def source_document(like: str | None) -> tuple[dict[str, Any], Path | None]:
    """The document to start from, and the file it came from (None: the worked example)."""
    if like is None:
        return copy.deepcopy(EXAMPLE), None
    path = Path(like)
    if not path.suffix and NAME.match(like) and (SHIPPED / f"{like}.yaml").is_file():
        path = SHIPPED / f"{like}.yaml"
    elif not path.is_file():
        shipped = sorted(p.stem for p in SHIPPED.glob("*.yaml"))
        raise InitError(
            "--like",
            like,
            "no such shipped scenario or file; shipped: " + ", ".join(shipped),
        )
    return _numbers(read_yaml(path)), path


def render(name: str, like: str | None = None) -> str:
    """The commented scenario text for NAME (validated; raises ScenarioError if not)."""
    if not NAME.match(name):
        raise InitError(
            "NAME",
            name,
            "a scenario name is [a-z0-9_-], 1 to 64 characters (it names the results "
            "directory and the file NAME.yaml)",
        )
    doc, source = source_document(like)
    origin = source.name if source is not None else None
    doc["name"] = name
    added: set[str] = set()  # the common optional keys the source did not give
    for section, keys in COMMON.items():
        block = doc.setdefault(section, {})
        if not isinstance(block, dict):
            continue
        model = keys_of(Scenario)[section].annotation
        fields = keys_of(model)
        for key in keys:
            if key not in block and key in fields:
                block[key] = fields[key].default
                added.add(f"{section}.{key}")
    ordered = {k: doc[k] for k in SECTION_ORDER if k in doc}
    ordered.update({k: v for k, v in doc.items() if k not in ordered})
    text = _header(name, source) + _emit(ordered, origin, added)
    # as written: the text parses, validates and can run
    loaded = load_document(parse_yaml(text), f"{name}.yaml")
    feasibility.check(loaded)
    return text


def write(
    name: str, like: str | None = None, force: bool = False, directory: Path | None = None
) -> Path:
    """Write NAME.yaml in `directory` (the current one); an existing file only with force.
    NAME may be given with its .yaml."""
    name = name.removesuffix(".yaml")
    text = render(name, like)
    if directory is None:
        try:
            directory = Path.cwd()
        except OSError as exc:  # the shell's directory was deleted (or moved) under it
            raise InitError(
                "init", "", f"the current directory cannot be read ({exc.strerror}): it was "
                "deleted or moved; cd to an existing directory and run init again",
            ) from None  # fmt: skip
    path = directory / f"{name}.yaml"
    if path.is_symlink():  # never written through, dangling or not
        raise InitError(
            str(path), "", "a symbolic link: init writes a regular file only and never "
            "through a link (it could point at a run's scenario.yaml); choose another NAME",
        )  # fmt: skip
    if path.exists() and not force:
        raise InitError(
            str(path), "", "the file exists; choose another NAME, or overwrite it with --force"
        )
    if path.exists() and not path.is_file():
        raise InitError(str(path), "", "exists and is not a regular file; choose another NAME")
    protect_run_files(None, path, "init", "")
    try:
        write_regular(path, text)
    except OSError as exc:
        raise InitError(str(path), "", f"cannot write the scenario ({exc.strerror})") from None
    return path


def _header(name: str, source: Path | None) -> str:
    shipped = source is not None and source.resolve().parent == SHIPPED
    start = (
        f"the values of scenarios/{source.name} (where they come from: docs/references.md, "
        f"its section on {source.name}; keys it does not give are the defaults, marked so)"
        if source is not None and shipped
        else f"the values of {source} (keys it does not give are the defaults, marked so)"
        if source is not None
        else "the worked example of docs/scenarios.md: a 7B model on 128 H100s with NFS checkpoints"
    )
    text = (
        f"{name}: a scenario written by `trainsim init`, starting from {start}. Each comment "
        "gives the key's unit and where its value comes from: published (a source in "
        "docs/references.md), approx., or an assumption to replace with your own figures. "
        "Every key is documented in docs/scenarios.md. Check the file with `trainsim "
        f"validate {name}.yaml`; see its numbers with `trainsim calc {name}.yaml`."
    )
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, WIDTH - 2)) + "\n"


def _emit(doc: dict[str, Any], origin: str | None, added: set[str]) -> str:
    out: list[str] = []
    for key, value in doc.items():
        if isinstance(value, dict):
            anchor = "cost-simulation-sweep" if key in ("cost", "simulation", "sweep") else key
            out.append(f"\n# {key}: docs/scenarios.md#{anchor}\n{key}:\n")
            out += _block(value, key, origin, added, 1)
        elif key == "failures" and isinstance(value, list):
            out.append("\n")
            out += _comment(f"failures: {FAILURE_KEYS}. {_source('failures', origin, added)}", 0)
            out.append("failures:\n" if value else "failures: []\n")
            for item in value:
                note = FAILURE_NOTES.get(item.get("name")) if origin is None else None
                if note:
                    out += _comment(note, 1)
                out.append(f"  - {_flow(item)}\n")
        else:
            out.append(_line(key, value, key, origin, added, 0))
    return "".join(out)


def _block(
    node: dict[str, Any], path: str, origin: str | None, added: set[str], depth: int
) -> list[str]:
    out = []
    indent = "  " * depth
    for key, value in node.items():
        here = f"{path}.{key}"
        if isinstance(value, dict) and value and path != "sweep":
            meaning = MEANING.get(here)
            out.append(f"{indent}{key}:" + (f"  # {meaning}" if meaning else "") + "\n")
            out += _block(value, here, origin, added, depth + 1)
            if key in ("checkpoint_tier", "backup") and value.get("kind") in TIERS:
                out += _preset(value, depth + 1)
        else:
            out.append(_line(key, value, here, origin, added, depth))
    return out


def _preset(tier: dict[str, Any], depth: int) -> list[str]:
    """The preset's figures a tier does not override, as a comment under it."""
    kind = tier["kind"]
    preset = TIERS[kind]
    shown = [
        f"{key}: {_scalar(getattr(preset, key))}"
        for key in ("write_GB_s", "read_GB_s", "capacity_TB", "latency_ms")
        if key not in tier and hasattr(preset, key)
    ]
    if not shown:
        return []
    return _comment(
        f"the {kind} preset (docs/references.md) gives {', '.join(shown)}; "
        "give a key here to override it",
        depth,
    )


def _line(key: str, value: Any, path: str, origin: str | None, added: set[str], depth: int) -> str:
    meaning = MEANING.get(path) or (
        "values of the swept key, one sweep point each"
        if path.startswith("sweep.")
        else _unit(key, value)
    )
    line = f"{'  ' * depth}{key}: {_scalar(value)}"
    comment = f"{meaning}; {_source(path, origin, added)}"
    if len(line) + 4 + len(comment) <= WIDTH:
        return f"{line}  # {comment}\n"
    return "".join(_comment(comment, depth)) + line + "\n"


def _comment(text: str, depth: int) -> list[str]:
    indent = "  " * depth
    return [f"{indent}# {part}\n" for part in textwrap.wrap(text, WIDTH - len(indent) - 2)]


def _source(path: str, origin: str | None, added: set[str]) -> str:
    if path in added:
        return "the default (docs/references.md)"
    if origin is not None:
        return f"as in {origin}"
    return SOURCES.get(path, "the default (docs/references.md)")


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict | list):
        return _flow(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").strip()


def _float(value: float) -> str:
    """7.0e+9 for large round numbers, 0.3029 or 25.0 otherwise (YAML 1.1 floats)."""
    if math.isfinite(value) and abs(value) >= 1e6:
        mantissa, exponent = f"{value:.6e}".split("e")
        mantissa = mantissa.rstrip("0")
        mantissa += "0" if mantissa.endswith(".") else ""
        return f"{mantissa}e{int(exponent):+d}"
    return repr(value)


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return _scalar(value)


def _numbers(node: Any) -> Any:
    """Numbers PyYAML reads as strings (7.0e9: YAML 1.1 wants the exponent's sign) as
    floats, so that they are written back as numbers."""
    if isinstance(node, dict):
        return {k: _numbers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_numbers(v) for v in node]
    if isinstance(node, str) and _NUMBER.fullmatch(node) and ("e" in node.lower() or "." in node):
        return float(node)
    return node
