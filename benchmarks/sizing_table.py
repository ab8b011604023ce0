"""The sizing table reproduced: the shipped preset scenarios beside the GPU ranges of the
table "Cluster requirements by model size" from the project's original brief, and the two
figures of its 70B row checked (training time, InfiniBand switch count). Writes docs/sizing.md.

Deterministic columns come from the calculator behind `trainsim calc` (sim/model/perf.py) and the
fat-tree sizing behind `trainsim fabric` (sim/model/network.py); the columns with failures from the
Monte Carlo behind `trainsim run` (sim.runs.api.run_scenario, into a temporary directory). The same
seed and replicas give the same page for any worker count. `--replicas 0` skips the Monte
Carlo (the calculator's tables only, in seconds).

Usage:
    .venv/bin/python benchmarks/sizing_table.py [--replicas N] [--seed S] [--workers W] [--out docs/sizing.md]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.model import batch, calculator, checkpoints, memory, network, perf, sizing  # noqa: E402
from sim.model.scenario import load_scenario  # noqa: E402
from sim.model.scenario_set import ScenarioSet  # noqa: E402
from sim.model.schema import Scenario  # noqa: E402

DEFAULT_OUT = Path("docs/sizing.md")
DEFAULT_SEED = 42
SCRIPT = "benchmarks/sizing_table.py"

# The guide's GPU range for each model size ("Cluster requirements by model size").
GUIDE_GPUS: dict[str, tuple[int, int]] = {
    "7B": (64, 128),
    "70B": (512, 2048),
    "405B": (2048, 8192),
    "1T": (8192, 32768),
}
# The two figures of its 70B row that this page checks.
GUIDE_70B_GPUS = 1000
GUIDE_70B_MFU = 0.5
GUIDE_70B_WEEKS = (3, 4)
GUIDE_70B_SWITCHES = 125
HDR_RADIX = 40  # NVIDIA Quantum QM8700: 40 ports of HDR 200 Gb/s (docs/references.md)


@dataclass(frozen=True)
class Row:
    """One row of the page: a shipped scenario (with optional --set overrides) and its replicas."""

    label: str
    size: str  # the guide's row: a key of GUIDE_GPUS
    scenario: str  # file name in scenarios/
    replicas: int  # Monte Carlo replicas by default: the page regenerates in ~2 minutes
    overrides: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return ROOT / "scenarios" / self.scenario

    @property
    def name(self) -> str:
        return self.scenario.removesuffix(".yaml")


ROWS: tuple[Row, ...] = (
    Row("7B", "7B", "llama7b-128.yaml", 1000),
    Row("70B", "70B", "llama70b-1k.yaml", 1000),
    Row("70B at MFU 0.5", "70B", "llama70b-1k.yaml", 1000, ("performance.mfu=0.5",)),
    Row("405B", "405B", "llama405b-8k.yaml", 500),
    # the slowest per replica: ~600 failures in a 72-day run
    Row("405B (Llama 3)", "405B", "llama3-405b-16k.yaml", 300),
    Row("1T", "1T", "dense1t-16k.yaml", 500),
    Row("1T", "1T", "dense1t-32k.yaml", 500),
)


def load(row: Row, extra: tuple[str, ...] = ()) -> ScenarioSet:
    return load_scenario(row.path, [*row.overrides, *extra])


# --------------------------------------------------------------------------- calculator


@dataclass(frozen=True)
class CalcRow:
    """What the calculator and the fat-tree sizing say about one row (no randomness)."""

    row: Row
    scenario: Scenario
    calc: calculator.Calculation
    tree: network.FatTree
    allreduce: network.CollectiveCost
    write_GB_s: float


def calc_row(row: Row) -> CalcRow:
    scenario = load(row).base
    return CalcRow(
        row,
        scenario,
        calculator.calculate(scenario),
        network.scenario_fat_tree(scenario),
        network.gradient_allreduce(scenario),
        checkpoints.write_GB_s(scenario.storage, scenario.cluster.nodes),
    )


def calc_rows() -> list[CalcRow]:
    return [calc_row(row) for row in ROWS]


@dataclass(frozen=True)
class RangeRow:
    """Ideal time to train of a size's first preset at both ends of the guide's GPU range."""

    row: Row
    mfu: float
    tokens: float
    ends: tuple[sizing.SizingRow, sizing.SizingRow]  # the low and the high end


def range_rows() -> list[RangeRow]:
    out, seen = [], set()
    for row in ROWS:
        if row.size in seen or row.overrides:
            continue
        seen.add(row.size)
        base = load(row).base
        nodes = [gpus // base.cluster.gpus_per_node for gpus in GUIDE_GPUS[row.size]]
        low, high = sizing.sizing_table(row.path, nodes, overrides=row.overrides)
        out.append(RangeRow(row, perf.mfu(base), base.model.tokens, (low, high)))
    return out


@dataclass(frozen=True)
class FlopsCheck:
    """The guide's 70B training time against the FLOPs arithmetic, with the preset's model."""

    params: float
    tokens: float
    flops_6nd: float
    flops_full: float  # with the attention term of the preset's shape
    cluster_flops_s: float  # GUIDE_70B_GPUS at GUIDE_70B_MFU
    days_6nd: float
    days_full: float
    tokens_for_weeks: tuple[float, float]  # what 3 and 4 weeks would train at that MFU (6·N·D)
    mfu_for_weeks: tuple[float, float]  # the MFU 3 and 4 weeks mean with the preset's tokens
    goodput_for_weeks: tuple[float, float]  # the goodput they mean at 50% MFU (with attention)


def flops_check() -> FlopsCheck:
    scenario = load(next(r for r in ROWS if r.size == "70B")).base
    n, d = scenario.model.params, scenario.model.tokens
    rate = GUIDE_70B_GPUS * scenario.cluster.gpu_spec.peak_tflops * 1e12 * GUIDE_70B_MFU
    flops_6nd = 6.0 * n * d
    flops_full = perf.flops_per_token(scenario) * d
    days_6nd = flops_6nd / rate / perf.DAY_S
    days_full = flops_full / rate / perf.DAY_S
    weeks_days = tuple(7.0 * w for w in GUIDE_70B_WEEKS)
    return FlopsCheck(
        n,
        d,
        flops_6nd,
        flops_full,
        rate,
        days_6nd,
        days_full,
        tuple(days * perf.DAY_S * rate / (6.0 * n) for days in weeks_days),
        tuple(GUIDE_70B_MFU * days_6nd / days for days in weeks_days),
        tuple(days_full / days for days in weeks_days),
    )


@dataclass(frozen=True)
class TreeVariant:
    what: str
    gpus: int
    radix: int
    rails: int  # fat trees: one per rail (rail-optimised), or 1 over all NICs
    nics_per_node: int
    tree: network.FatTree


def tree_variants() -> list[TreeVariant]:
    """Fabrics for ~1,000 GPUs of 8-GPU nodes, sized by sim/model/network.py's fat_tree."""
    cases = [
        ("the 70B preset: NDR, one NIC per GPU, rail-optimised", 1024, 64, 8, 8),
        ("1,000 GPUs, otherwise as the preset", 1000, 64, 8, 8),
        ("1,000 GPUs, one fat tree over all NICs", 1000, 64, 1, 8),
        ("1,000 GPUs, one NIC per node", 1000, 64, 1, 1),
        ("1,000 GPUs, 40-port switches, one fat tree over all NICs", 1000, HDR_RADIX, 1, 8),
        ("1,000 GPUs, 40-port switches, rail-optimised", 1000, HDR_RADIX, 8, 8),
        ("1,024 GPUs, 40-port switches, one fat tree over all NICs", 1024, HDR_RADIX, 1, 8),
    ]
    out = []
    for what, gpus, radix, rails, nics in cases:
        endpoints = gpus // 8 * nics
        tree = network.fat_tree(endpoints, radix, 1.0, 400.0 if radix == 64 else 200.0, rails)
        out.append(TreeVariant(what, gpus, radix, rails, nics, tree))
    return out


# --------------------------------------------------------------------------- Monte Carlo


@dataclass(frozen=True)
class MonteCarloRow:
    replicas: int
    finished: int
    days_p50: float
    days_p95: float
    goodput_p50: float
    failures_p50: float
    cost_p50: float
    cost_p95: float


def monte_carlo(row: Row, replicas: int, seed: int, workers: int) -> MonteCarloRow:
    """`trainsim run` of the row, into a temporary directory that is removed afterwards."""
    from sim.runs.api import run_scenario

    with tempfile.TemporaryDirectory(prefix="trainsim-sizing-") as tmp:
        outcome = run_scenario(
            load(row),
            replicas=replicas,
            seed=seed,
            workers=workers,
            executor="processes" if workers > 1 else "serial",
            out=tmp,
            progress=False,
            figures=None,
        )
    point = outcome.summary_doc["points"][0]
    m = point["metrics"]
    return MonteCarloRow(
        replicas,
        point["finished"],
        m["time_to_train_days"]["p50"],
        m["time_to_train_days"]["p95"],
        m["goodput"]["p50"],
        m["failures"]["p50"],
        m["cost_usd"]["p50"],
        m["cost_usd"]["p95"],
    )


# --------------------------------------------------------------------------- formatting


def _gpus(n: float) -> str:
    return f"{n:,.0f}"


def _range(size: str) -> str:
    low, high = GUIDE_GPUS[size]
    return f"{low:,}–{high:,}"


def _tokens(t: float) -> str:
    return f"{t / 1e12:.1f}T"


def _usd_m(usd: float) -> str:
    return f"${usd / 1e6:.2f}M"


def _size(gb: float) -> str:
    return f"{gb / 1e3:.3g} TB" if gb >= 1e3 else f"{gb:.0f} GB"


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


def _sci(x: float) -> str:
    exponent = math.floor(math.log10(x))
    return f"{x / 10**exponent:.2f} × 10^{exponent}"


def _scenario_link(row: Row) -> str:
    text = f"`{row.name}`" + (f" `--set {' '.join(row.overrides)}`" if row.overrides else "")
    return f"[{text}](../scenarios/{row.scenario})"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def calc_table(rows: list[CalcRow]) -> str:
    header = [
        "row",
        "guide: GPUs",
        "scenario",
        "GPUs (+ spares)",
        "tokens",
        "MFU",
        "step",
        "ideal days",
        "Daly days",
        "checkpoint",
        "storage (keep_last)",
        "write GB/s, time",
        "fat tree: switches",
        "gradient all-reduce",
        "failures/day",
        "cost, ideal",
    ]
    body = []
    for r in rows:
        c, cluster = r.calc, r.scenario.cluster
        tree = r.tree
        parts = [tree.leaves, tree.spines] + ([tree.cores] if tree.tiers == 3 else [])
        body.append(
            [
                r.row.label,
                _range(r.row.size),
                _scenario_link(r.row),
                f"{_gpus(c.gpus)} (+{_gpus(cluster.spare_nodes * cluster.gpus_per_node)})",
                _tokens(r.scenario.model.tokens),
                f"{c.mfu:.2f}",
                _seconds(c.step_time_s),
                f"{c.ideal_days:.1f}",
                f"{c.daly_expected_days:.1f}",
                _size(c.checkpoint_GB),
                f"{c.checkpoint_storage_TB:.1f} TB ({r.scenario.checkpoint.keep_last})",
                f"{r.write_GB_s:,.0f}, {_seconds(c.checkpoint_write_s)}",
                " + ".join(f"{p:,}" for p in parts) + f" = {tree.switches:,}",
                f"{r.allreduce.seconds * 1e3:,.0f} ms ({r.allreduce.algorithm}, {r.allreduce.ranks:,})",
                f"{c.failures_per_day:.2f}",
                _usd_m(c.ideal_cost_usd),
            ]
        )
    return _table(header, body)


def _end(end: sizing.SizingRow) -> str:
    if end.ideal_days is None or end.mfu is None:
        key = (end.infeasible or "").partition(":")[0]
        return f"cannot run on {_gpus(end.gpus)} GPUs (`{key}`)"
    return f"{end.ideal_days:.1f} ({_gpus(end.gpus)} GPUs, MFU {end.mfu:.2f})"


def range_table(rows: list[RangeRow]) -> str:
    header = ["size", "scenario", "MFU", "tokens", "guide: GPUs", "ideal days at the low end",
              "ideal days at the high end"]  # fmt: skip
    body = [
        [
            r.row.size,
            _scenario_link(r.row),
            f"{r.mfu:.2f}",
            _tokens(r.tokens),
            _range(r.row.size),
            _end(r.ends[0]),
            _end(r.ends[1]),
        ]
        for r in rows
    ]
    return _table(header, body)


def flops_table(f: FlopsCheck) -> str:
    w0, w1 = GUIDE_70B_WEEKS
    gpus = f"{GUIDE_70B_GPUS:,}"
    body = [
        [f"training FLOPs 6·N·D (N = {f.params / 1e9:.0f}B, D = {_tokens(f.tokens)})",
         _sci(f.flops_6nd)],
        ["with the attention term, (6·N + 12·L·h·T)·D", _sci(f.flops_full)],
        [f"{gpus} H100s at {GUIDE_70B_MFU:.0%} MFU", f"{f.cluster_flops_s / 1e15:,.1f} PFLOP/s"],
        [f"time, 6·N·D at {GUIDE_70B_MFU:.0%} MFU",
         f"{f.days_6nd:.1f} days ({f.days_6nd / 7:.1f} weeks)"],
        ["time, with the attention term", f"{f.days_full:.1f} days ({f.days_full / 7:.1f} weeks)"],
        [f"tokens that {w0}–{w1} weeks train at {GUIDE_70B_MFU:.0%} MFU (6·N·D)",
         f"{_tokens(f.tokens_for_weeks[0])}–{_tokens(f.tokens_for_weeks[1])}"],
        [f"MFU that {w0}–{w1} weeks mean with {_tokens(f.tokens)} tokens (6·N·D)",
         f"{f.mfu_for_weeks[0]:.0%}–{f.mfu_for_weeks[1]:.0%}"],
        [f"goodput that {w0}–{w1} weeks mean at {GUIDE_70B_MFU:.0%} MFU (with attention)",
         f"{f.goodput_for_weeks[0]:.2f}–{f.goodput_for_weeks[1]:.2f}"],
    ]  # fmt: skip
    return _table(["quantity", "value"], body)


def tree_table(variants: list[TreeVariant]) -> str:
    header = ["fabric", "endpoints", "switch ports", "fat trees", "tiers",
              "leaf + spine + core", "switches"]  # fmt: skip
    body = []
    for v in variants:
        t = v.tree
        body.append(
            [
                v.what,
                _gpus(t.endpoints),
                str(v.radix),
                f"{v.rails} (one per rail)" if v.rails > 1 else "1",
                str(t.tiers),
                f"{t.leaves} + {t.spines} + {t.cores}",
                f"**{t.switches}**" if t.switches == GUIDE_70B_SWITCHES else str(t.switches),
            ]
        )
    return _table(header, body)


STRONG = "megatron-core-gpt3-177b-strong.yaml"
STRONG_NODES = (12, 36, 144, 288, 576)  # 96 → 4,608 GPUs, as the README's figure


def published_table() -> str:
    """sim.model.sizing.PUBLISHED_POINTS: published MFU, the step model's, the error in points."""
    header = ["study", "configuration", "published MFU", "predicted MFU", "error (points)",
              "bar (points)"]  # fmt: skip
    body = []
    for point in sizing.PUBLISHED_POINTS:
        predicted = sizing.predicted_mfu(point)
        error = 100 * (predicted - point.published_mfu)
        link = (
            f"[`{point.scenario.removesuffix('.yaml')}`](../scenarios/published/{point.scenario})"
        )
        verdict = (
            "calibrated here"
            if point.calibrated
            else f"{'within' if abs(error) <= point.tolerance_points else 'outside'} "
            f"{point.tolerance_points:g}"
        )
        body.append(
            [
                f"{point.study} ({link})",
                point.label,
                f"{point.published_mfu:.3f}",
                f"{predicted:.3f}",
                f"{error:+.1f}",
                verdict,
            ]
        )
    return _table(header, body)


def strong_scaling() -> list[tuple[Scenario, perf.StepBreakdown]]:
    """The 177B strong-scaling study at each of STRONG_NODES: the scenario and its step."""
    out = []
    for nodes in STRONG_NODES:
        s = load_scenario(sizing.PUBLISHED / STRONG, [f"cluster.nodes={nodes}"]).base
        out.append((s, perf.step_breakdown(s)))
    return out


# the parts of a step the 177B study has (no context parallelism), as StepBreakdown.shares
STRONG_PARTS = ("compute", "pipeline bubble", "exposed data-parallel", "pipeline sends",
                "tensor-parallel", "slowest GPU", "optimizer step")  # fmt: skip


def weak_scaling_words() -> str:
    """What the weak-scaling tables lose from their smallest size to their largest, published
    and predicted (sizing.PUBLISHED_POINTS)."""
    studies: dict[str, list[sizing.PublishedPoint]] = {}
    for point in sizing.PUBLISHED_POINTS:
        if "weak scaling" in point.study:
            studies.setdefault(point.study, []).append(point)
    losses, within = [], True
    for study, points in studies.items():
        first, last = points[0], points[-1]
        predicted = {p: sizing.predicted_mfu(p) for p in points}
        published_loss = 100 * (first.published_mfu - last.published_mfu)
        predicted_loss = 100 * (predicted[first] - predicted[last])
        gpus = [p.label.split(" GPUs")[0] + " GPUs" for p in (first, last)]  # "2,304 GPUs"
        losses.append(
            f"{study.split(' (')[0]}, {published_loss:.1f} points from {gpus[0]} to "
            f"{gpus[1]}, and the model {predicted_loss:.1f}"
        )
        within &= all(
            abs(100 * (predicted[p] - p.published_mfu)) <= p.tolerance_points for p in points
        )
    return (
        "On the weak-scaling tables the batch per replica stays the same, so the bubble and "
        "the compute beside each reduction do too; what grows with the data-parallel size is "
        "the ring's latency and the wait for the slowest of more GPUs. The published MFU "
        "falls more than that gives: "
        + "; ".join(losses)
        + ". The rest of the loss at scale is not modelled"
        + (" (every row is within its bar)." if within else ".")
    )


def step_parts_table() -> str:
    """Where the step's time goes as the 177B strong-scaling study grows (perf.step_breakdown):
    each row's parts add up to its step."""
    header = ["GPUs", "microbatches per replica", "step", "MFU", *STRONG_PARTS]
    body = []
    for s, b in strong_scaling():
        shares = b.shares()
        body.append(
            [
                _gpus(s.cluster.gpus),
                f"{batch.microbatches(s):,.0f}",
                _seconds(b.step_s),
                f"{perf.mfu(s):.3f}",
                *(f"{shares[n]:.1%}" for n in STRONG_PARTS),
            ]
        )
    return _table(header, body)


def strong_scaling_words() -> str:
    """The paragraph on the 177B study's loss, from its smallest and largest size."""
    (small, first), (large, last) = strong_scaling()[0], strong_scaling()[-1]
    para = large.parallelism
    m = batch.microbatches(large)

    def share(b: perf.StepBreakdown, part: str) -> str:
        return f"{b.shares()[part]:.1%}"

    return (
        f"The Megatron-Core study falls from {perf.mfu(small):.1%} MFU on "
        f"{_gpus(small.cluster.gpus)} H100s to {perf.mfu(large):.1%} on "
        f"{_gpus(large.cluster.gpus)} in the model (published: 47% and 42%). Most of it is "
        f"the bubble: {m:,.0f} microbatches per replica on {para.pipeline} stages of "
        f"{para.virtual_stages} model chunks leave ({para.pipeline} − 1) / "
        f"({para.virtual_stages} · {m:,.0f}) of the busy time idle, "
        f"{share(last, 'pipeline bubble')} of the step (from {share(first, 'pipeline bubble')}); "
        "the bubble depends on the number of model chunks per stage, which the README does "
        f"not give ({para.virtual_stages} taken; the scenario's comments give the prediction "
        "for the others). The wait for the slowest GPU grows with the GPUs: each GPU's "
        f"compute varies from step to step (`performance.jitter`, "
        f"{large.performance.jitter:.0%}) and a synchronous step waits for the slowest, the "
        f"expected largest of N standard normals: {perf.slowest_of(small.cluster.gpus):.2f} "
        f"for {_gpus(small.cluster.gpus)} GPUs, {perf.slowest_of(large.cluster.gpus):.2f} for "
        f"{_gpus(large.cluster.gpus)}, so {first.slowest_gpu_s / first.compute_s:.1%} and "
        f"{last.slowest_gpu_s / last.compute_s:.1%} of the compute "
        f"({share(first, 'slowest GPU')} and {share(last, 'slowest GPU')} of the step). The "
        "gradients' reduce-scatter, chunk by chunk as each chunk's last backward runs, hides "
        f"behind the cool-down but for {share(last, 'exposed data-parallel')} of the step; the "
        "optimizer step (each GPU's shard of the parameters, at HBM bandwidth) takes "
        f"{last.optimizer_s * 1e3:.1f} ms."
    )


LLAMA3_TABLE4 = "llama3-405b-8k-table4.yaml"


def llama3_table4_words() -> str:
    """The paragraph on Llama 3 405B's Table 4 configuration and the memory it needs."""
    s = load_scenario(sizing.PUBLISHED / LLAMA3_TABLE4).base
    para, gpu = s.parallelism, s.cluster.gpu_spec
    use = memory.memory_use(s)
    scores = s.model_copy(
        update={"memory": s.memory.model_copy(update={"attention": "stored-scores"})}
    )
    margin = f"{abs(use.margin_GB):.1f} GB {'under' if use.margin_GB >= 0 else 'over'}"
    return (
        f"Llama 3 405B as Meta ran it (Table 4: TP {para.tensor}, PP {para.pipeline} with "
        f"the interleaved schedule of {para.virtual_stages} one-layer chunks per stage, "
        f"{_gpus(s.cluster.gpus)} H100s, sequences of {s.model.seq_len:,}, 16M tokens, no "
        f"activation recomputation) needs {use.total_GB:.1f} GB per GPU in the model "
        f"([`{LLAMA3_TABLE4.removesuffix('.yaml')}`](../scenarios/published/{LLAMA3_TABLE4})): "
        "FlashAttention-style activations (the default, `memory.attention: flash`), the keys "
        f"and values of {s.model.kv_heads} of {s.model.heads} heads (grouped-query "
        "attention), no dropout masks "
        "(`memory.dropout: false`), the interleaved schedule's extra microbatches in flight "
        f"as Megatron counts them (× {use.interleave:.4g}), and the optimizer states and "
        f"gradients sharded over the {memory.sharding_ranks(s)} data-parallel ranks as Llama "
        f"3's FSDP does ({use.bytes_per_param:.4g} bytes per parameter). That is {margin} the "
        f"{gpu.name}'s {use.capacity_GB:g} GB, within the estimate's uncertainty of "
        f"{use.uncertainty_GB:.0f} GB: it runs, and `calc`, `validate`, `run` and `plan` "
        "warn with the margin. The old formula (`memory.attention: stored-scores`) needs "
        f"{memory.memory_use(scores).total_GB:,.0f} GB and refuses it."
    )


def deterministic_tables() -> list[str]:
    """The page's tables that follow from the scenarios alone (what the test keeps in sync)."""
    return [
        calc_table(calc_rows()),
        range_table(range_rows()),
        flops_table(flops_check()),
        tree_table(tree_variants()),
        published_table(),
        step_parts_table(),
    ]


ONE_STEP = """\
one optimizer step on one GPU of the first pipeline stage
(1F1B: p stages, m microbatches per replica; v model chunks per stage when interleaved)

 ├ warm-up ┤├──────── steady state: one forward, one backward ────────┤├ cool-down ┤
  F F … F    F B F B F B … F B                                          B B … B
  └─ the bubble: (p − 1)/(v·m) of the busy time, idle in warm-up and cool-down ─┘
  (fewer microbatches than stages: the warm-up is all m forwards, the pipeline never
   fills, and the bubble, the same formula, can exceed the busy time)

  each F and B: its compute + tensor-parallel all-reduces (+ the context-parallel ring),
  then a send of the activations (F) or their gradients (B) to the next stage (when
  interleaved, hidden behind the next chunk's compute but for 1 − overlap)
  the slowest GPU: every GPU's compute varies from step to step (jitter), and all wait
  for the slowest of the job's N: compute · jitter · E[max of N standard normals]
                                                       ├ last microbatch's backward ┤
  gradients' reduce-scatter, bucket by bucket:                ▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓░░░░
  (chunk by chunk when interleaved)                     hidden: overlap × window ┘ exposed
  optimizer step: the GPU's shard of the parameters updated, at HBM bandwidth  ├─┤
  next step's first forward ├────┤  parameters' all-gather:  ▓▓▓▓▓▓░░░░░ (ZeRO 1-2)
  ZeRO-3: per microbatch, the parameters gathered for each F and B and the gradients
  reduce-scattered, one collective per layer prefetched behind the compute (layer), or
  one per tensor the compute waits for (tensor); each collective pays the ring's latency
  all-reduces: ring, tree or NVLS (inside an NVLink 4 node), as network.collective says

  step = busy · (1 + bubble) + exposed reduction + optimizer step
  busy = compute + slowest GPU + tensor-parallel + context-parallel + exposed sends
         + exposed ZeRO-3"""


def mc_table(rows: list[CalcRow], results: list[MonteCarloRow | None]) -> str:
    header = ["row", "scenario", "GPUs", "replicas", "finished", "time to train p50 / p95 (days)",
              "p50 / ideal", "goodput p50", "failures p50", "cost p50 / p95"]  # fmt: skip
    body = []
    for r, mc in zip(rows, results):
        head = [r.row.label, _scenario_link(r.row), _gpus(r.calc.gpus)]
        if mc is None:
            body.append(head + ["0"] + ["—"] * 6)
            continue
        body.append(
            head
            + [
                f"{mc.replicas:,}",
                f"{mc.finished:,}",
                f"{mc.days_p50:.1f} / {mc.days_p95:.1f}",
                f"{mc.days_p50 / r.calc.ideal_days:.3f}",
                f"{mc.goodput_p50:.3f}",
                f"{mc.failures_p50:,.0f}",
                f"{_usd_m(mc.cost_p50)} / {_usd_m(mc.cost_p95)}",
            ]
        )
    return _table(header, body)


# --------------------------------------------------------------------------- the page


def command_line(replicas: int | None, seed: int, out: Path) -> str:
    parts = [".venv/bin/python", SCRIPT]
    if replicas is not None:
        parts += ["--replicas", str(replicas)]
    if seed != DEFAULT_SEED:
        parts += ["--seed", str(seed)]
    if out != DEFAULT_OUT:
        parts += ["--out", str(out)]
    return " ".join(parts)


def _by_label(rows: list[CalcRow], results: list[MonteCarloRow | None], scenario: str, label: str):
    for r, mc in zip(rows, results):
        if r.row.scenario == scenario and r.row.label == label:
            return r, mc
    raise KeyError(scenario)


def render(
    rows: list[CalcRow], results: list[MonteCarloRow | None], seed: int, command: str
) -> str:
    ranges, flops, trees = range_rows(), flops_check(), tree_variants()
    replicas = ", ".join(f"{mc.replicas if mc else 0:,}" for mc in results)
    r70, mc70 = _by_label(rows, results, "llama70b-1k.yaml", "70B")
    r70h, mc70h = _by_label(rows, results, "llama70b-1k.yaml", "70B at MFU 0.5")
    r1t, mc1t = _by_label(rows, results, "dense1t-16k.yaml", "1T")
    r1t2, mc1t2 = _by_label(rows, results, "dense1t-32k.yaml", "1T")
    r405, _ = _by_label(rows, results, "llama405b-8k.yaml", "405B")
    r405l, mc405l = _by_label(rows, results, "llama3-405b-16k.yaml", "405B (Llama 3)")
    r405_range = next(r for r in ranges if r.row.size == "405B")
    preset_tree = trees[0].tree
    hdr = next(v for v in trees if v.radix == HDR_RADIX and v.rails == 1 and v.gpus == 1000)
    hdr_rails = next(v for v in trees if v.radix == HDR_RADIX and v.rails > 1)
    w0, w1 = GUIDE_70B_WEEKS
    k = HDR_RADIX

    def weeks(days: float) -> str:
        return f"{days:.1f} days ({days / 7:.1f} weeks)"

    out = [
        "# Cluster sizing: the model against the sizing table",
        "",
        f"*Generated by `{SCRIPT}`; do not edit by hand. Regenerate with "
        f"`{command}` (seed {seed}; Monte Carlo replicas per row, top to bottom: {replicas}). "
        "The same seed and replicas give the same page on any machine and for any "
        "number of workers; it takes about two minutes on two cores.*",
        "",
        'The project\'s original brief ("the guide" below) sized clusters in a table, '
        "*Cluster requirements by model size*, with a GPU range per model size: "
        + ", ".join(f"{size} on {_range(size)} GPUs" for size in GUIDE_GPUS)
        + ". This page puts the shipped scenarios of those sizes beside it: what the "
        "calculator (`trainsim calc`, `trainsim fabric`) gives for each, and what the Monte "
        "Carlo with failures (`trainsim run`) gives. Below the tables, where the guide and "
        "the model disagree, and why. Every scenario value has its source in "
        "[references.md](references.md), which also lists the papers and datasheets named "
        "here under [Sources](references.md#sources); the metrics are defined in "
        "[metrics.md](metrics.md).",
        "",
        "## The calculator (no failures)",
        "",
        "One row per scenario; *guide: GPUs* is the guide's range for the size. *ideal days*: "
        "steps × step time, no failures and no checkpoints; *Daly days*: Daly's expected wall "
        "time with the scenario's failure rate, checkpoint cost and restart, to first order "
        "(no detection, no waiting for nodes). *storage*: the checkpoints kept (`keep_last`) "
        "× the checkpoint size (14 bytes per parameter). *write*: the bandwidth a checkpoint "
        "is written at (the tier, or the nodes' client paths if thinner) and the time it "
        "takes. *fat tree*: leaf + spine (+ core) switches of the compute fabric, one NIC per "
        "GPU, 64-port NDR switches, non-blocking, rail-optimised. *gradient all-reduce*: one "
        "data-parallel all-reduce of bf16 gradients (α–β model, algorithm and ranks). "
        "*cost, ideal*: job and spare GPUs for the ideal time at the scenario's price per "
        "GPU-hour ($2.50).",
        "",
        calc_table(rows),
        "",
        "The ideal time at both ends of the guide's range, for the first scenario of each "
        "size with its nodes changed (`--set cluster.nodes=...`). The MFU is the scenario's "
        "at its own size and follows the step model elsewhere (sim/model/sizing.py; "
        "[architecture.md](architecture.md#the-step-model)): a fixed batch spread over more "
        "GPUs leaves each data-parallel replica fewer microbatches, so a larger pipeline "
        "bubble and less compute beside the same exposed gradient reduction, and more GPUs for "
        "the step to wait for the slowest of. Where the batch cannot be split over the "
        "replicas, or the model does not fit in the GPU's memory, the configuration cannot "
        "run and the key at fault is named; fewer microbatches than pipeline stages run, with "
        "the bubble that leaves (BLOOM-176B's batch ramp-up ran 16 sequences on 12 stages):",
        "",
        range_table(ranges),
        "",
        "## With failures (Monte Carlo)",
        "",
        "Each scenario run as `trainsim run` runs it: the Llama 3 failure mix per 1,000 "
        "GPU-days, detection, spares, repair, restart from the last checkpoint. *p50 / "
        "ideal*: how much longer the median run takes than the ideal one; *cost*: the job's "
        "and spares' GPU-hours for the whole wall time.",
        "",
        mc_table(rows, results),
        "",
        "## The step model against published scaling",
        "",
        "How many GPUs rests on how the MFU moves when the cluster grows, at a fixed batch "
        "(strong scaling) or with the batch growing with it (weak scaling). "
        "The step model ([architecture.md](architecture.md#the-step-model), `sim/model/perf.py`) "
        "builds a step from its parts; the communication hides only behind the compute "
        "that runs while it is in flight:",
        "",
        "```",
        ONE_STEP,
        "```",
        "",
        "Each study below has a scenario in `scenarios/published/` at one of its "
        "configurations, with the MFU measured there (its comments give the configuration "
        "details the study did not publish, and which value was taken); the model, "
        "calibrated there, predicts the others (`--set cluster.nodes=...`, and "
        "`model.global_batch_tokens` with it for the weak-scaling tables). Megatron SC'21 "
        "reports teraFLOP/s by its own count (with the recomputed forward pass); they are "
        "converted to trainsim's MFU (6N + 12·L·h·T per token) by the paper's equation (3). "
        "Checked by `tests/unit/test_published_scaling.py`:",
        "",
        published_table(),
        "",
        weak_scaling_words(),
        "",
        "Megatron SC'21's PTD-P rows lose mostly what the pipeline bubble of 1F1B loses "
        "(11 / 384 to 11 / 96 of the busy time), and a little more waiting for the slowest "
        "of more GPUs; the exposed reduction is small beside steps of 20-80 s. "
        "Table 2's ZeRO-3 rows take the same 74 days for 300B "
        "tokens on 768 and 1,536 GPUs: the step stops shrinking with the compute. Their "
        "bandwidth does not explain it (each pass over the parameters moves 349 GB per GPU, "
        "under 2 s at the 188 GB/s NCCL's ring reaches over Selene's 8 HDR NICs per node); "
        "a cost per collective that grows with the ranks does. Gathered per layer and "
        "prefetched, as FSDP does (`zero3_gather: layer`), the gathers hide behind the "
        "compute at every size and the model predicts almost no loss (34.3% on 1,536 GPUs, "
        "the wait for the slowest GPU). The "
        "scenario takes `zero3_gather: tensor`, fitted to the rows' shape rather than "
        "published (its comments say why): a step is 4 passes (forward, recomputed forward, "
        "backward, reduce-scatter) of 96 × 12 collectives, one per parameter tensor, each "
        "paying the ring's latency of (n − 1) steps at 5 µs, 8.9 s on 384 GPUs and 35 s on "
        "1,536, which the compute waits for. With DeepSpeed's documented defaults (tensors "
        "under 10^5 elements kept whole: 4 collectives per layer) the model gives 28.8% and "
        "19.0%, outside the bar: what made the published steps stop shrinking is not known.",
        "",
        strong_scaling_words() + " Where its step goes, by size (each row adds up to its step):",
        "",
        step_parts_table(),
        "",
        llama3_table4_words(),
        "",
        "## Where the guide and the model disagree",
        "",
        f'### "Approximately {w0}–{w1} weeks" for 70B on {GUIDE_70B_GPUS:,} H100s at '
        f"{GUIDE_70B_MFU:.0%} MFU",
        "",
        f"The FLOPs do not add up to {w0}–{w1} weeks. With the 70B scenario's model "
        f"({flops.params / 1e9:.0f}B parameters, {_tokens(flops.tokens)} tokens: 20 tokens per "
        "parameter, the compute-optimal ratio of Chinchilla):",
        "",
        flops_table(flops),
        "",
        f"At {GUIDE_70B_MFU:.0%} MFU, {GUIDE_70B_GPUS:,} H100s train {_tokens(flops.tokens)} "
        f"tokens in {weeks(flops.days_6nd)} by 6·N·D, {weeks(flops.days_full)} with the "
        f"attention FLOPs: the guide's {w0}–{w1} weeks is "
        f"{7 * w0 / flops.days_full:.1f}–{7 * w1 / flops.days_full:.1f} times that.",
        "",
    ]
    if mc70h is not None and mc70 is not None:
        out += [
            f"Failures do not close the gap. The Monte Carlo of the same model at "
            f"{GUIDE_70B_MFU:.0%} MFU, on {_gpus(r70h.calc.gpus)} GPUs (the scenario's "
            f"TP {r70h.scenario.parallelism.tensor} × PP {r70h.scenario.parallelism.pipeline} "
            f"takes a multiple of {batch.gpus_per_replica(r70h.scenario)}), finishes in "
            f"{weeks(mc70h.days_p50)} at the median and {weeks(mc70h.days_p95)} at the 95th "
            f"percentile, goodput {mc70h.goodput_p50:.3f}; the scenario as shipped, at "
            f"{r70.calc.mfu:.0%} MFU, finishes in {weeks(mc70.days_p50)}, "
            f"{mc70.days_p95:.1f} days at the 95th percentile. At this scale the Llama 3 failure "
            f"rates strike about {r70.calc.failures_per_day:.1f} times a day and cost "
            f"{1 - mc70h.goodput_p50:.0%} of the time, not the "
            f"{1 - flops.goodput_for_weeks[0]:.0%}–{1 - flops.goodput_for_weeks[1]:.0%} "
            f"that {w0}–{w1} weeks would need.",
            "",
        ]
    out += [
        f"{w0}–{w1} weeks fit other assumptions: about "
        f"{_tokens(flops.tokens_for_weeks[0])}–{_tokens(flops.tokens_for_weeks[1])} tokens at "
        f"{GUIDE_70B_MFU:.0%} MFU (Llama 2 70B trained on 2T), or "
        f"{flops.mfu_for_weeks[1]:.0%}–{flops.mfu_for_weeks[0]:.0%} MFU with "
        f"{_tokens(flops.tokens)} tokens, or a schedule with that much slack for other "
        "causes. The guide's figure is a fair planning number for a run of about 2T tokens, "
        f"or for a cluster that reaches {flops.mfu_for_weeks[1]:.0%}–"
        f"{flops.mfu_for_weeks[0]:.0%} of its peak; it does not follow from the "
        f"{GUIDE_70B_MFU:.0%} MFU it states, with {_tokens(flops.tokens)} tokens.",
        "",
        f'### "Approximately {GUIDE_70B_SWITCHES} InfiniBand switches" for {GUIDE_70B_GPUS:,} GPUs',
        "",
        f"The model sizes the 70B scenario's compute fabric ({_gpus(preset_tree.endpoints)} NDR "
        f"ports: {r70.scenario.cluster.nodes} nodes × {r70.scenario.network.nics_per_node} NICs, "
        f"{preset_tree.radix}-port switches, non-blocking, rail-optimised) as "
        f"{preset_tree.tiers} tiers: {preset_tree.leaves} leaf + {preset_tree.spines} spine = "
        f"**{preset_tree.switches} switches**, the count NVIDIA's DGX SuperPOD reference "
        f"architecture gives for 1,024 GPUs. A two-tier fat tree of k-port switches serves up "
        f"to k²/2 endpoints ({preset_tree.radix**2 // 2:,} for k = {preset_tree.radix}), so "
        f"{GUIDE_70B_GPUS:,} GPUs need no third tier. Fabrics for about {GUIDE_70B_GPUS:,} "
        "GPUs, sized by the same rule (`sim/model/network.py`):",
        "",
        tree_table(trees),
        "",
        f"{GUIDE_70B_SWITCHES} is exactly what a non-blocking **three-tier** fat tree of "
        f"**{k}-port** switches needs for {_gpus(hdr.tree.endpoints)} endpoints: 2N/k leaves + "
        f"2N/k spines + N/k cores = 5N/k = {hdr.tree.leaves} + {hdr.tree.spines} + "
        f"{hdr.tree.cores}. {k} ports is the radix of the previous InfiniBand generation "
        f"(HDR, 200 Gb/s, NVIDIA Quantum QM8700), whose two tiers stop at k²/2 = "
        f"{k**2 // 2:,} endpoints, so {GUIDE_70B_GPUS:,} GPUs with one NIC each take a third "
        f"tier. The count arises under these assumptions: one NIC per GPU, {k}-port "
        "switches, non-blocking, and one fat tree over all the NICs; rail-optimising the "
        f"same fabric rounds each rail's leaves up and gives {hdr_rails.tree.switches}. "
        f"(The three-tier rule with 64-port switches would give 5 × {GUIDE_70B_GPUS:,} / 64 "
        f"≈ {5 * GUIDE_70B_GPUS / 64:.0f}, but two tiers suffice there.) {GUIDE_70B_SWITCHES} "
        f"is also the number of 8-GPU nodes in {GUIDE_70B_GPUS:,} GPUs, which may be a "
        "coincidence. With the NDR switches H100 clusters are built with, the compute fabric "
        f"needs {preset_tree.switches} switches, and the guide's {GUIDE_70B_SWITCHES} is "
        f"{GUIDE_70B_SWITCHES / preset_tree.switches:.1f} times that. Storage, in-band "
        "management and out-of-band networks add switches of their own, which trainsim "
        "does not size.",
        "",
        "### Scale and failures",
        "",
    ]
    scale = [
        "The guide's ranges say nothing about failures, which grow with the GPU count: with a "
        "fixed rate per GPU-day the job's mean time between failures falls from "
        f"{rows[0].calc.aggregate_mtbf_hours:.0f} hours on {_gpus(rows[0].calc.gpus)} GPUs to "
        f"{r1t2.calc.aggregate_mtbf_hours:.1f} hours on {_gpus(r1t2.calc.gpus)}."
    ]
    mc_first = results[0]
    if mc_first is not None and mc1t2 is not None:
        scale.append(
            f"The median goodput falls with it, from {mc_first.goodput_p50:.3f} for "
            f"{rows[0].row.label} on {_gpus(rows[0].calc.gpus)} GPUs to "
            f"{mc1t2.goodput_p50:.3f} for 1T on {_gpus(r1t2.calc.gpus)}."
        )
    if mc1t is not None and mc1t2 is not None:
        scale.append(
            f"Doubling the 1T job from {_gpus(r1t.calc.gpus)} to {_gpus(r1t2.calc.gpus)} GPUs "
            f"cuts the ideal time by {1 - r1t2.calc.ideal_days / r1t.calc.ideal_days:.0%} "
            f"(the MFU assumed drops from {r1t.calc.mfu:.2f} to {r1t2.calc.mfu:.2f}) but the "
            f"median time to train by {1 - mc1t2.days_p50 / mc1t.days_p50:.0%}, from "
            f"{mc1t.days_p50:.1f} to {mc1t2.days_p50:.1f} days: goodput falls from "
            f"{mc1t.goodput_p50:.2f} to {mc1t2.goodput_p50:.2f}, and the median cost rises "
            f"from {_usd_m(mc1t.cost_p50)} to {_usd_m(mc1t2.cost_p50)}."
        )
    scale.append(
        f"The top of the guide's 405B range, {_gpus(GUIDE_GPUS['405B'][1])} GPUs, is half of "
        f"the {_gpus(r405l.calc.gpus)} H100s Llama 3 405B was trained on; its "
        f"{_tokens(r405l.scenario.model.tokens)} tokens take {r405l.calc.ideal_days:.0f} ideal "
        f"days there"
        + (
            f" and {mc405l.days_p50:.0f} days at the median with failures"
            if mc405l is not None
            else ""
        )
        + f", and the {_tokens(r405.scenario.model.tokens)}-token 405B scenario takes "
        f"{r405_range.ends[0].ideal_days or math.nan:.0f} ideal days at the bottom of the "
        f"range ({_gpus(r405_range.ends[0].gpus)} GPUs)."
    )
    out += [" ".join(scale), ""]
    out += [
        "Only the guide's GPU ranges and its two 70B figures are quoted on this page. For "
        "its other columns (storage, network, checkpoint size, cost) the calculator's "
        f"columns above are the model's answer: checkpoints of "
        f"{rows[0].scenario.checkpoint.state_bytes_per_param:g} bytes per parameter "
        f"({_size(rows[0].calc.checkpoint_GB)} for 7B to {_size(r1t2.calc.checkpoint_GB)} for "
        "1T), the last five kept, a non-blocking NDR fat tree, and GPU-hours at $2.50.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--replicas",
        type=int,
        help="Monte Carlo replicas for every row (default: each row's own; 0: calculator only)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workers", type=int, default=2, help="worker processes [2]")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="[docs/sizing.md]")
    args = parser.parse_args(argv)
    if args.replicas is not None and (args.replicas == 1 or args.replicas < 0):
        parser.error("--replicas must be 0 (calculator only) or at least 2")
    started = time.perf_counter()
    rows = calc_rows()
    results: list[MonteCarloRow | None] = []
    for r in rows:
        count = r.row.replicas if args.replicas is None else args.replicas
        if count == 0:
            results.append(None)
            continue
        t0 = time.perf_counter()
        results.append(monte_carlo(r.row, count, args.seed, args.workers))
        print(
            f"{r.row.label:<16} {r.row.name:<16} {count:>5} replicas "
            f"{time.perf_counter() - t0:6.1f} s",
            file=sys.stderr,
        )
    page = render(rows, results, args.seed, command_line(args.replicas, args.seed, args.out))
    out = args.out if args.out.is_absolute() else ROOT / args.out
    out.write_text(page, encoding="utf-8")
    print(f"wrote {out} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
