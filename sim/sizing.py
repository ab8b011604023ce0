"""How a scenario's job scales with its cluster: one row per node count, by the step model.

`sizing_table` sweeps `cluster.nodes` as `--param` would (the MFU stays calibrated at the
file's own configuration, `performance.mfu`), so each row's MFU and step time follow the
built-up model (sim.perf): the pipeline bubble grows as the fixed batch spreads over more
data-parallel replicas, and the exposed gradient all-reduce stays while compute shrinks.
A node count the batch cannot be split over (or that does not fit in memory) is a row
with its reason and no figures. Plain data: for tables, notebooks and figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim import perf
from sim.scenario import load_document, read_yaml


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
                data_parallel=perf.data_parallel_size(s),
                microbatches=perf.microbatches(s),
                mfu=perf.mfu(s),
                step_s=perf.step_time_s(s),
                ideal_days=days,
                speedup_vs_linear=(base_days / days) / (n / baseline),
            )
        )
    return rows


def _ideal_days(scenario) -> float:
    return perf.total_steps(scenario) * perf.step_time_s(scenario) / perf.DAY_S
