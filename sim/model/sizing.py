"""How a scenario's job scales with its cluster: one row per node count, by the step model.

`sizing_table` sweeps `cluster.nodes` as `--param` would (the MFU stays calibrated at the
file's own configuration, `performance.mfu`), so each row's MFU and step time follow the
built-up model (sim.model.perf): the pipeline bubble grows as the fixed batch spreads over more
data-parallel replicas, and the gradient reduction one microbatch's backward cannot hide
stays while compute shrinks.
A node count the batch cannot be split over (or that does not fit in memory) is a row
with its reason and no figures. Plain data: for tables, notebooks and figures.

Also the published measurements the step model is checked against (`PUBLISHED_POINTS`:
strong- and weak-scaling studies, each calibrated on one point and predicting the others;
the scenarios in scenarios/published say which configuration details they took and why).
`python -m sim.model.sizing` prints them: published MFU, predicted, error in points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.model import batch, perf
from sim.model.safe_yaml import read_yaml
from sim.model.scenario import load_document, load_scenario


@dataclass(frozen=True)
class SizingRow:
    nodes: int
    gpus: int
    data_parallel: int | None  # replicas (None: the configuration cannot run)
    microbatches: float | None  # per replica and step
    mfu: float | None
    step_s: float | None
    ideal_days: float | None
    # (baseline ideal time / this one) / (nodes / baseline nodes): 1 is linear scaling
    speedup_vs_linear: float | None
    infeasible: str | None = None  # "key.path: reason" when the configuration cannot run


def sizing_table(
    scenario: str | Path | dict,
    nodes: Sequence[int],
    baseline_nodes: int | None = None,
    overrides: Sequence[str] | None = None,
) -> list[SizingRow]:
    """One row per node count of `nodes`, for a scenario file (or its document) with
    `overrides` (--set) applied and its own sweep left out. Speed-up against linear is
    relative to `baseline_nodes` (default: the scenario's own cluster.nodes), which must be
    a node count the job can run on. Raises ScenarioError when none of them can run."""
    document = dict(scenario) if isinstance(scenario, dict) else read_yaml(scenario)
    document.pop("sweep", None)
    source = str(scenario) if not isinstance(scenario, dict) else "<scenario>"
    own = load_document(document, source, list(overrides or []))
    baseline = own.base.cluster.nodes if baseline_nodes is None else baseline_nodes
    wanted = list(dict.fromkeys([*nodes, baseline]))
    grid = load_document(
        document,
        source,
        list(overrides or []),
        [f"cluster.nodes={','.join(str(n) for n in wanted)}"],
    )
    by_nodes = {p.params["cluster.nodes"]: p for p in grid.points}
    base_point = by_nodes[baseline]
    if base_point.infeasible:
        raise ValueError(f"the baseline of {baseline} nodes cannot run: {base_point.infeasible}")
    base_days = _ideal_days(base_point.scenario)
    rows = []
    for n in nodes:
        point = by_nodes[n]
        s = point.scenario
        if point.infeasible:
            rows.append(
                SizingRow(n, s.cluster.gpus, None, None, None, None, None, None, point.infeasible)
            )
            continue
        days = _ideal_days(s)
        rows.append(
            SizingRow(
                nodes=n,
                gpus=s.cluster.gpus,
                data_parallel=batch.data_parallel_size(s),
                microbatches=batch.microbatches(s),
                mfu=perf.mfu(s),
                step_s=perf.step_time_s(s),
                ideal_days=days,
                speedup_vs_linear=(base_days / days) / (n / baseline),
            )
        )
    return rows


def _ideal_days(scenario) -> float:
    return perf.total_steps(scenario) * perf.step_time_s(scenario) / perf.DAY_S


# --------------------------------------------------------------------------- published checks

PUBLISHED = Path(__file__).resolve().parents[2] / "scenarios" / "published"


@dataclass(frozen=True)
class PublishedPoint:
    """One published measurement the step model is checked against: a scenario of
    scenarios/published (its own configuration is where its `mfu` was measured) with
    `overrides` (--set) that move it to the measured configuration."""

    study: str
    label: str  # the configuration, as the study gives it
    scenario: str  # file name in scenarios/published
    overrides: tuple[str, ...]
    published_mfu: float  # in trainsim's MFU: model FLOPs (6N + 12·L·h·T per token) / peak
    tolerance_points: float  # the bar: |predicted − published| in MFU points

    @property
    def calibrated(self) -> bool:
        """The row the scenario's `mfu` states (predicted = published by construction)."""
        return not self.overrides


def sc21_mfu(teraflops: float) -> float:
    """Narayanan et al. SC'21's per-GPU teraFLOP/s for their 174.6B GPT as trainsim's MFU:
    their equation (3) counts 96·s·l·h²·(1 + s/6h + V/16lh) per sequence (the recomputed
    forward included), trainsim (6N + 12·l·h·s) per token, on A100s of 312 teraFLOP/s."""
    layers, hidden, seq, vocab, params = 96, 12288, 2048, 51200, 174.6e9
    paper = 96 * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    model = 6 * params + 12 * layers * hidden * seq
    return teraflops * model / paper / 312.0


MEGATRON_CORE = "Megatron-Core GPT-3 177B strong scaling (Megatron-LM README), H100"
LLAMA31_WEAK = "Llama 3.1 405B weak scaling (NVIDIA DGX Cloud recipe, NeMo 24.09, BF16), H100"
NEMOTRON_WEAK = "Nemotron-4 340B weak scaling (NVIDIA DGX Cloud recipe, NeMo 24.11, BF16), H100"
SC21_PTDP = "Megatron SC'21 Table 2, 175B PTD-P (TP 8 x PP 12), A100"
SC21_ZERO3 = "Megatron SC'21 Table 2, 175B ZeRO-3 alone, A100"


def _weak(sequences: int, seq_len: int, nodes: int) -> tuple[str, ...]:
    """The overrides of a weak-scaling row: its nodes and its batch, grown with them."""
    return (f"cluster.nodes={nodes}", f"model.global_batch_tokens={sequences * seq_len}")


LLAMA31 = "llama31-405b-dgxc-weak.yaml"
NEMOTRON = "nemotron4-340b-dgxc-weak.yaml"

PUBLISHED_POINTS: tuple[PublishedPoint, ...] = (
    PublishedPoint(MEGATRON_CORE, "96 GPUs", "megatron-core-gpt3-177b-strong.yaml", (), 0.47, 1.0),
    PublishedPoint(
        MEGATRON_CORE,
        "2,304 GPUs (the README's model table)",
        "megatron-core-gpt3-177b-strong.yaml",
        ("cluster.nodes=288",),
        0.44,
        1.0,
    ),
    PublishedPoint(
        MEGATRON_CORE,
        "4,608 GPUs",
        "megatron-core-gpt3-177b-strong.yaml",
        ("cluster.nodes=576",),
        0.42,
        1.0,
    ),
    PublishedPoint(LLAMA31_WEAK, "576 GPUs, 252 sequences", LLAMA31, (), 0.5578, 1.0),
    PublishedPoint(
        LLAMA31_WEAK,
        "1,152 GPUs, 504 sequences",
        LLAMA31,
        _weak(504, 8192, 144),
        0.5476,
        1.0,
    ),
    PublishedPoint(
        LLAMA31_WEAK,
        "2,304 GPUs, 1,008 sequences",
        LLAMA31,
        _weak(1008, 8192, 288),
        0.5445,
        1.0,
    ),
    PublishedPoint(NEMOTRON_WEAK, "128 GPUs, 32 sequences", NEMOTRON, (), 0.5538, 2.0),
    *(
        PublishedPoint(
            NEMOTRON_WEAK,
            f"{8 * nodes:,} GPUs, {2 * nodes} sequences",
            NEMOTRON,
            _weak(2 * nodes, 4096, nodes),
            mfu_,
            2.0,
        )
        for nodes, mfu_ in ((32, 0.5467), (64, 0.5432), (128, 0.5398), (256, 0.5275))
    ),
    PublishedPoint(SC21_PTDP, "384 GPUs", "megatron-sc21-175b-ptdp.yaml", (), sc21_mfu(153), 2.0),
    PublishedPoint(
        SC21_PTDP,
        "768 GPUs",
        "megatron-sc21-175b-ptdp.yaml",
        ("cluster.nodes=96",),
        sc21_mfu(149),
        2.0,
    ),
    PublishedPoint(
        SC21_PTDP,
        "1,536 GPUs",
        "megatron-sc21-175b-ptdp.yaml",
        ("cluster.nodes=192",),
        sc21_mfu(141),
        2.0,
    ),
    PublishedPoint(
        SC21_ZERO3,
        "384 GPUs, microbatch 4",
        "megatron-sc21-175b-zero3.yaml",
        (),
        sc21_mfu(144),
        5.0,
    ),
    PublishedPoint(
        SC21_ZERO3,
        "768 GPUs, microbatch 2",
        "megatron-sc21-175b-zero3.yaml",
        ("cluster.nodes=96", "parallelism.micro_batch_size=2"),
        sc21_mfu(88),
        5.0,
    ),
    PublishedPoint(
        SC21_ZERO3,
        "1,536 GPUs, microbatch 1",
        "megatron-sc21-175b-zero3.yaml",
        ("cluster.nodes=192", "parallelism.micro_batch_size=1"),
        sc21_mfu(44),
        5.0,
    ),
)


def predicted_mfu(point: PublishedPoint) -> float:
    """The step model's MFU at the published configuration, calibrated at the scenario's."""
    return perf.mfu(load_scenario(PUBLISHED / point.scenario, list(point.overrides)).base)


def published_report() -> str:
    """Each published point: study, configuration, published and predicted MFU (%), error."""
    lines = []
    for point in PUBLISHED_POINTS:
        predicted = predicted_mfu(point)
        error = 100 * (predicted - point.published_mfu)
        verdict = "calibrated" if point.calibrated else f"bar {point.tolerance_points:g}"
        lines.append(
            f"{point.study} | {point.label} | published {100 * point.published_mfu:.2f} | "
            f"predicted {100 * predicted:.2f} | error {error:+.2f} points ({verdict})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(published_report())
