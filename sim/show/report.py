"""A run directory as one self-contained HTML page (`trainsim report RUN_DIR`).

The scenario in words, the calculator, summaries per sweep point, the sweep and plan
results, every figure (embedded as base64 `data:` PNGs), the cost, downtime and failure
splits, and the run's provenance. Inline CSS, no script, no network: the file can be
mailed or attached to a ticket and opens anywhere. Every text is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import json
import math
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim import __version__
from sim.decide import answer
from sim.decide.compare import FIGURE_PREFIX, fmt_metric
from sim.model import perf
from sim.model.columns import COST_COLUMNS, DOWNTIME_COLUMNS, SUMMARY_METRICS, unit_of
from sim.model.scenario import Point, ScenarioError, ScenarioSet, load_document, load_scenario
from sim.model.schema import Scenario
from sim.runs import summaries
from sim.runs.results import read_bounded, read_manifest, resume_command

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The metrics of the summary tables (those `trainsim run` prints), and the finished share.
KEY_METRICS = [*SUMMARY_METRICS, ("finished_fraction", "finished (share of replicas)")]

# The parts of cost_usd and of downtime_hours (sim.model.columns), shown when the table has them.
COST_PARTS = [
    (c, c.removeprefix("cost_").removesuffix("_usd").replace("_", " ")) for c in COST_COLUMNS
]
DOWNTIME_PARTS = [(c, c.removesuffix("_hours").replace("_", " ")) for c in DOWNTIME_COLUMNS]

# Known figures, in the order the report shows them (others follow by name).
FIGURE_TITLES = {
    "time_to_train_cdf.png": "Time-to-train distribution (unfinished replicas keep a curve below 1)",
    "wall_time_breakdown.png": "Where the wall time went (mean per replica)",
    "cost_breakdown.png": "Where the money went (mean per replica)",
    "downtime_split.png": "Downtime by cause (mean per replica)",
    "lost_work.png": "Lost work per run",
    "sweep_time_to_train_days.png": "Mean time to train across the sweep, with 95% CI",
    "sweep_lost_work_hours.png": "Mean lost work across the sweep, with 95% CI",
    "pareto.png": "Plan: time to train against cost, and the Pareto front",
}

# A sweep of many points: the tables with a column (or a summary) per point show the first
# ones; the sweep table has a row for every point.
MAX_POINT_COLUMNS = 12
MAX_POINT_SUMMARIES = 24

PROVENANCE_ORDER = [
    "trainsim_version",
    "command",
    "scenario",
    "source",
    "seed",
    "replicas",
    "points",
    "executor",
    "workers",
    "host",
    "python",
    "started",
    "ended",
    "status",
]


@dataclass(frozen=True)
class RunContents:
    """What a report reads from a run directory."""

    path: Path
    manifest: dict[str, Any]
    scenario_set: ScenarioSet
    table: pd.DataFrame | None  # the columns the report needs, error rows dropped
    replicas: int  # rows of replicas.parquet (error rows included)
    errors: int
    summary: pd.DataFrame | None  # summaries.summarize_file of replicas.parquet
    plan: dict[str, Any] | None
    figures: list[Path]
    replicas_per_point: dict[int, int] = field(default_factory=dict)  # error rows included


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of `run_dir` to `out` (default RUN_DIR/report.html); return its path."""
    contents = load(run_dir)
    path = Path(out) if out is not None else contents.path / "report.html"
    text = render(contents)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(
            "--out",
            str(path),
            f"cannot write the report there ({exc.strerror or exc}); choose a writable path "
            "with --out",
        ) from None
    return path


def load(run_dir: str | Path) -> RunContents:
    """Read a run directory (run.json and scenario.yaml at least), or raise a ScenarioError
    saying what was expected there."""
    path = Path(run_dir)
    expected = (
        "expected a run directory written by `trainsim run` "
        "(results/<name>/<run-id>/ with run.json, scenario.yaml and replicas.parquet)"
    )
    manifest = read_manifest(path, expected)
    if not (path / "scenario.yaml").is_file():
        raise ScenarioError(str(path), "", f"no scenario.yaml: {expected}")
    scenario_set = load_scenario(path / "scenario.yaml")
    table_path = path / "replicas.parquet"
    table = summary = None
    replicas = errors = 0
    per_point: dict[int, int] = {}
    if table_path.is_file():
        try:
            table, replicas, errors, summary, per_point = _read_table(
                table_path, scenario_set.swept_keys
            )
        except (OSError, ValueError, TypeError, KeyError, pa.ArrowException) as exc:
            raise ScenarioError(
                str(table_path),
                "",
                f"cannot read the replica table ({exc}): expected the replicas.parquet "
                "written by `trainsim run`",
            ) from None
    plan = None
    if (path / "plan.json").is_file():
        try:
            plan = json.loads(read_bounded(path / "plan.json", MAX_PLAN_BYTES, "plan (plan.json)"))
        except (OSError, ValueError) as exc:
            raise ScenarioError(str(path / "plan.json"), "", f"not readable JSON ({exc})") from None
    known = list(FIGURE_TITLES)
    figures = sorted(
        (path / "figures").glob("*.png"),
        key=lambda f: (known.index(f.name) if f.name in known else len(known), f.name),
    ) + sorted(path.glob(f"{FIGURE_PREFIX}*.png"))
    return RunContents(
        path, manifest, scenario_set, table, replicas, errors, summary, plan, figures, per_point
    )


def _read_table(
    table_path: Path, keys: list[str]
) -> tuple[pd.DataFrame, int, int, pd.DataFrame, dict[int, int]]:
    """The rows the report shows (error rows left out), the replica and error counts, the
    summary of the replica table and the replicas of each point (error rows included)."""
    names = pq.read_schema(table_path).names
    wanted = [
        "point",
        "replica",
        "finished",
        "error",
        "time_to_train_days",
        "wall_hours",
        "downtime_hours",
        "failures",
        "cost_usd",
        *(c for c, _ in COST_PARTS + DOWNTIME_PARTS),
        *(c for c in names if c.startswith("failures_")),
        *keys,
    ]
    columns = [c for c in dict.fromkeys(wanted) if c in names]
    rows = pd.read_parquet(table_path, columns=columns)
    wrong = [
        c
        for c in rows.columns
        if c not in ("error", *keys)
        and not (pd.api.types.is_numeric_dtype(rows[c]) or pd.api.types.is_bool_dtype(rows[c]))
    ]
    if wrong:
        raise ValueError(f"the columns {', '.join(wrong)} are not numbers")
    replicas, errors = len(rows), 0
    per_point = {int(p): int(n) for p, n in rows.groupby("point").size().items()}
    if "error" in rows:
        failed = rows["error"].fillna("") != ""
        errors = int(failed.sum())
        rows = rows[~failed]
    table = rows
    summary = summaries.summarize_file(table_path, keys)
    return table, replicas, errors, summary, per_point


# --------------------------------------------------------------------------- the page


def render(run: RunContents) -> str:
    """The report as one HTML document."""
    # the answer first, then the plan or sweep table it comes from, then what was simulated
    sections = [("answer", "Answer", _answer_section(run))]
    if run.plan is not None:
        sections.append(("plan", "Plan", _plan_section(run.plan)))
    elif len(run.scenario_set.points) > 1:  # a plan's table has every point already
        sections.append(("sweep", "Sweep", _sweep_section(run)))
    sections += [
        ("scenario", "Scenario", _scenario_section(run)),
        ("summary", "Summary", _summary_section(run)),
        ("figures", "Figures", _figures_section(run)),
        ("cost", "Cost breakdown", _cost_section(run)),
        ("downtime", "Downtime split", _downtime_section(run)),
        ("failures", "Failures by class", _failures_section(run)),
        ("calculator", "Calculator", _calculator_section(run)),
        ("provenance", "Provenance", _provenance_section(run)),
    ]
    name = run.scenario_set.name
    run_id = run.path.resolve().name
    status = str(run.manifest.get("status", "unknown"))
    nav = " · ".join(f'<a href="#{key}">{_e(title)}</a>' for key, title, _ in sections)
    body = "\n".join(
        f'<section id="{key}">\n<h2>{_e(title)}</h2>\n{content}\n</section>'
        for key, title, content in sections
    )
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    description = run.scenario_set.base.description
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(f"trainsim report: {name} ({run_id})")}</title>
<style>{CSS}</style>
</head>
<body>
<header>
<h1>{_e(name)}</h1>
{f"<p class='description'>{_e(description)}</p>" if description else ""}
<p class="meta">run <code>{_e(run_id)}</code> · status <span class="status {_e(status)}">{_e(status)}</span>
· {run.replicas:,} replica rows{f", {run.errors:,} errors" if run.errors else ""}
· report written {_e(generated)} by trainsim {_e(__version__)}</p>
<nav>{nav}</nav>
</header>
<main>
{body}
</main>
</body>
</html>
"""


CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d0d7de; --head: #f6f8fa; --accent: #4c72b0; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  color: var(--ink); margin: 0 auto; max-width: 1150px; padding: 1.5rem 2rem 4rem; background: #fff; }
h1 { margin: 0 0 .25rem; font-size: 1.9rem; }
h2 { margin: 2.2rem 0 .6rem; padding-bottom: .3rem; border-bottom: 2px solid var(--line); font-size: 1.35rem; }
h3 { margin: 1.4rem 0 .4rem; font-size: 1.05rem; }
p { margin: .4rem 0; }
.description { font-size: 1.05rem; }
.meta, .note, figcaption { color: var(--muted); font-size: .9rem; }
nav { margin-top: .8rem; padding: .5rem .8rem; background: var(--head); border-radius: 6px; font-size: .92rem; }
a { color: var(--accent); text-decoration: none; }
code { font: .88em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--head);
  padding: .05em .3em; border-radius: 4px; word-break: break-all; }
.scroll { overflow-x: auto; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: .88rem; }
th, td { border: 1px solid var(--line); padding: .28rem .6rem; vertical-align: top; }
th { background: var(--head); text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
.cards { display: flex; flex-wrap: wrap; gap: 0 2rem; }
.card h3 { margin-top: .8rem; }
tr.total td { font-weight: 600; border-top: 2px solid var(--ink); }
tr.best td { background: #eaf5ea; }
tr.infeasible td { color: var(--muted); white-space: normal; }
dl.words { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1.2rem; margin: .5rem 0 1rem; }
dl.words dt { font-weight: 600; }
dl.words dd { margin: 0; }
figure { margin: 1rem 0 2rem; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
.status { padding: 0 .4em; border-radius: 4px; background: var(--head); }
.status.complete { background: #dafbe1; }
.status.interrupted, .status.failed, .status.running { background: #fff1c2; }
.warning { background: #fff8c5; border-left: 4px solid #d4a72c; padding: .4rem .7rem; }
.headline { background: #eef4fb; border: 1px solid #b6cde8; border-left: 6px solid var(--accent);
  border-radius: 6px; padding: .7rem 1.1rem; margin: .6rem 0 1rem; font-size: 1.02rem; }
.headline p { margin: .35rem 0; }
.headline .point { font-weight: 600; }
.headline .best { font-weight: 600; }
"""


# --------------------------------------------------------------------------- sections


def _answer_section(run: RunContents) -> str:
    """The headline box: per point the answer lines `trainsim run` ends with (for a plan,
    its choice in a sentence and the chosen point's lines; for a sweep, which point is best
    on time and on cost)."""
    if run.summary is None or run.table is None:
        return _no_table(run)
    parts = []
    only = None
    if run.plan is not None and isinstance(run.plan, dict):
        parts.append(f"<p class='point'>{_e(answer.plan_sentence(run.plan))}</p>")
        shown = run.plan.get("chosen") or run.plan.get("highest_p_meet")
        only = [int(shown["point"])] if shown and "point" in shown else []
        rows = None  # the plan's race: not a sweep whose best point is asked for
    else:
        rows = answer.best_rows(run.table) if len(run.scenario_set.feasible) > 1 else None
        ran = sorted(run.replicas_per_point)
        if len(ran) > MAX_POINT_SUMMARIES and rows is not None:
            bests = answer.best_points(rows)
            only = sorted({b.point for b in bests})
    result = answer.run_answer(run.summary, run.scenario_set, rows, only)
    for label, (first, second) in result.points:
        name = f"<span class='point'>{_e(label)}</span>: " if label else ""
        parts.append(f"<p>{name}{_e(first)}<br>{_e(second)}</p>")
    for line in result.best:
        parts.append(f"<p class='best'>{_e(line[:1].upper() + line[1:])}.</p>")
    if only is not None and run.plan is None:
        parts.append(
            f"<p class='note'>The best points of {len(run.replicas_per_point)}; the sweep "
            "table has every one.</p>"
        )
    if result.legend:
        parts.append(f"<p class='note'>Where {_e(result.legend)}.</p>")
    return f'<div class="headline">{"".join(parts)}</div>'


def _scenario_section(run: RunContents) -> str:
    scenario_set = run.scenario_set
    s, base_note = _base_scenario(scenario_set)
    sweep = scenario_set.resolved.get("sweep") or {}
    parts = []
    swept_by_topic: dict[str, list[str]] = {}
    if sweep:
        for key, values in sweep.items():
            text = f"{key} = {', '.join(_value(v) for v in values)}"
            swept_by_topic.setdefault(_topic_of(key), []).append(text)
        listed = "; ".join(
            f"<code>{_e(k)}</code> = {_e(', '.join(_value(v) for v in values))}"
            for k, values in sweep.items()
        )
        parts.append(
            f"<p>The run sweeps {len(scenario_set.points)} points: {listed}. Below is the "
            f"base scenario{_e(base_note)}; each point replaces the swept keys' values "
            "(each named under its topic as <em>Swept</em>).</p>"
        )
        parts.append(_infeasible_note(run))
    words = []
    for topic, text in scenario_in_words(s):
        if topic == "simulation":
            text = _simulation_words(run, s)
        swept = swept_by_topic.pop(topic, [])
        if swept:
            text += " Swept: " + "; ".join(swept) + "."
        words.append((topic, text))
    for swept in swept_by_topic.values():  # keys of no topic above
        words.append(("swept", "; ".join(swept) + "."))
    parts.append(
        '<dl class="words">'
        + "".join(f"<dt>{_e(topic)}</dt><dd>{_e(text)}</dd>" for topic, text in words)
        + "</dl>"
    )
    if s.failures:
        rows = []
        for f in s.failures:
            per_hour = perf.failure_rate_per_hour(f, s)
            given = (
                f"MTBF {_value(f.mtbf_hours)} h per {f.scope}"
                if f.mtbf_hours is not None
                else f"{_value(f.rate_per_1k_gpu_day)} per 1,000 GPU-days"
            )
            shape = {
                "weibull": f"Weibull (shape {_value(f.weibull_shape)})",
                "lognormal": f"log-normal (σ {_value(f.lognormal_sigma)})",
            }.get(f.distribution, f.distribution)
            rows.append(
                [
                    f.name,
                    f.scope,
                    given,
                    shape,
                    f"{per_hour * 24:.3g}",
                    f"{1 / per_hour:,.1f}" if per_hour > 0 else "—",
                    _value(f.detect_minutes),
                    "yes" if f.replaces_nodes else "no",
                    _value(f.repair_hours) if f.replaces_nodes else "—",
                    "yes" if f.while_idle else "no",
                ]
            )
        parts.append("<h3>Failure classes</h3>")
        parts.append(
            _table(
                [
                    "class",
                    "scope",
                    "rate as given",
                    "distribution",
                    "failures/day (this job)",
                    "job MTBF (h)",
                    "detect (min)",
                    "replace nodes",
                    "repair (h)",
                    "strikes while idle",
                ],
                rows,
                numeric={4, 5, 6, 8},
            )
        )
    return "\n".join(parts)


# The topic of scenario_in_words a swept key belongs to, by its first part (cluster keys
# by their second).
TOPICS = {
    "model": "model",
    "parallelism": "GPUs",
    "performance": "GPUs",
    "network": "GPUs",
    "storage": "storage",
    "checkpoint": "checkpoints",
    "failures": "failures",
    "recovery": "recovery",
    "repair": "repair",
    "health_checks": "health checks",
    "maintenance": "maintenance",
    "cost": "cost",
    "simulation": "simulation",
}
SPARE_KEYS = ("spare_nodes", "pool_nodes", "preemptible_nodes", "host_selection_minutes",
              "preemption_minutes", "lemon_fraction", "lemon_rate_multiplier")  # fmt: skip


def _topic_of(key: str) -> str:
    first, _, rest = key.partition(".")
    if first == "cluster":
        return "spares" if rest.split(".")[0] in SPARE_KEYS else "GPUs"
    return TOPICS.get(first, "swept")


def _base_scenario(scenario_set: ScenarioSet) -> tuple[Scenario, str]:
    """The scenario without its sweep (the file's values with its --set overrides), and a
    note when that cannot run and the first point that can is described instead."""
    resolved = scenario_set.resolved
    if not resolved.get("sweep"):
        return scenario_set.base, ""
    try:
        base = load_document(
            {k: v for k, v in resolved.items() if k != "sweep"}, scenario_set.source
        ).base
        return base, " (the file's values, before the sweep)"
    except ScenarioError:
        return scenario_set.runnable_base, (
            " (the file's values cannot run without the sweep: the first point that can "
            "run is described)"
        )


def _simulation_words(run: RunContents, s: Scenario) -> str:
    """The replicas the run really used (a plan or --target-ci gives points different
    numbers), its seed and horizon."""
    counts = sorted(set(run.replicas_per_point.values()))
    seed = run.manifest.get("seed", s.simulation.seed)
    if not counts:
        used = f"{s.simulation.replicas:,} replicas per point asked for (no replica table)"
    elif len(run.replicas_per_point) == 1:
        used = f"{counts[0]:,} replicas"
    elif len(counts) == 1:
        used = f"{counts[0]:,} replicas per point"
    else:
        why = " (the plan's race: more replicas to the points still in it)" if run.plan else ""
        used = f"{counts[0]:,}–{counts[-1]:,} replicas per point{why}"
    return f"{used}, seed {seed}, horizon {_value(s.simulation.horizon_days)} days."


def scenario_in_words(s: Scenario) -> list[tuple[str, str]]:
    """The scenario as (topic, sentence) pairs: what a reader needs to know about the run."""
    c, m = s.cluster, s.model
    steps = perf.total_steps(s)
    words = [
        (
            "model",
            f"{_si(m.params)} parameters trained on {_si(m.tokens)} tokens, "
            f"{m.global_batch_tokens:,} tokens per optimizer step ({steps:,} steps)"
            + (
                f"; sequence length {m.seq_len:,}, {m.layers} layers, hidden size {m.hidden:,}"
                if m.seq_len and m.layers and m.hidden
                else ""
            )
            + f"; {perf.flops_per_token(s):.4g} FLOPs per token.",
        ),
        (
            "GPUs",
            f"{c.nodes:,} nodes × {c.gpus_per_node} {c.gpu_spec.name} = {c.gpus:,} GPUs; "
            f"tensor {s.parallelism.tensor} × pipeline {s.parallelism.pipeline} parallel, "
            f"{perf.data_parallel_size(s):,} data-parallel replicas; "
            + (
                _mfu_words(s)
                if s.performance.mfu is not None
                else f"compute efficiency {s.performance.compute_efficiency:g}, "
                f"so MFU {perf.mfu(s):.3f} after communication and the pipeline bubble."
            ),
        ),
        ("spares", _spares_words(s)),
        ("storage", _storage_words(s)),
        ("checkpoints", _checkpoint_words(s)),
        (
            "failures",
            f"{len(s.failures)} failure classes (below), together "
            f"{24 / perf.aggregate_mtbf_hours(s):.2f} failures per day on this job "
            f"(aggregate MTBF {perf.aggregate_mtbf_hours(s):,.1f} h)."
            if s.failures
            else "none: every replica runs without failures.",
        ),
        ("recovery", _recovery_words(s)),
        ("repair", _repair_words(s)),
    ]
    if s.health_checks is not None:
        h = s.health_checks
        words.append(
            (
                "health checks",
                f"every {_value(h.every_hours)} h, costing {_value(h.cost_minutes)} min of "
                f"downtime; they catch {h.catch_prob:.0%} of node failures due within "
                f"{_value(h.lead_hours)} h.",
            )
        )
    if s.maintenance is not None:
        words.append(
            (
                "maintenance",
                f"every {_value(s.maintenance.every_days)} days the job checkpoints and stops "
                f"for {_value(s.maintenance.duration_hours)} h.",
            )
        )
    words += [
        (
            "cost",
            f"${s.cost.gpu_hour_usd:,.2f} per GPU-hour, billed on the job's and the spares' "
            "GPUs for the whole wall time"
            + (
                "; cold-pool and preemptible nodes only while they serve in the job."
                if s.cluster.pool_nodes or s.cluster.preemptible_nodes
                else "."
            ),
        ),
        (
            "simulation",
            f"{s.simulation.replicas:,} replicas per point, seed {s.simulation.seed}, "
            f"horizon {_value(s.simulation.horizon_days)} days.",
        ),
    ]
    return words


def _spares_words(s: Scenario) -> str:
    c = s.cluster
    text = f"{c.spare_nodes} warm spare node{'s' if c.spare_nodes != 1 else ''}"
    if c.pool_nodes:
        text += (
            f"; a cold pool of {c.pool_nodes} nodes that join after "
            f"{_value(c.host_selection_minutes)} min"
        )
    if c.preemptible_nodes:
        text += (
            f"; {c.preemptible_nodes} preemptible nodes that join after "
            f"{_value(c.preemption_minutes)} min"
        )
    if c.lemon_fraction:
        text += (
            f"; {c.lemon_fraction:.1%} of the nodes are lemons failing "
            f"{_value(c.lemon_rate_multiplier)}× as often"
        )
    return text + "."


def _storage_words(s: Scenario) -> str:
    st, tier = s.storage, s.storage.checkpoint_tier
    text = (
        f"checkpoints go to a {tier.kind} tier (write {_value(tier.write_GB_s)} GB/s, read "
        f"{_value(tier.read_GB_s)} GB/s, {_value(tier.capacity_TB)} TB, latency "
        f"{_value(tier.latency_ms)} ms); each node's own path {_value(st.client_GB_s_per_node)} "
        f"GB/s, so checkpoints write at {perf.write_GB_s(st, s.cluster.nodes):,.1f} GB/s and "
        f"load at {perf.read_GB_s(st, s.cluster.nodes):,.1f} GB/s"
    )
    if st.background_load:
        text += f"; other tenants use {st.background_load:.0%} of the tier"
    text += f"; training data is read from a {st.data_tier} tier"
    if st.backup is not None:
        b = st.backup
        text += (
            f"; every {b.every}th durable checkpoint is copied to a {b.kind} backup "
            f"(write {_value(b.write_GB_s)} GB/s)"
        )
    return text + "."


def _checkpoint_words(s: Scenario) -> str:
    ck = s.checkpoint
    steps = perf.interval_steps(s)
    minutes = steps * perf.step_time_s(s) / 60
    if ck.interval_steps is not None:
        when = f"every {steps:,} steps ({minutes:,.1f} min)"
    elif ck.interval_minutes is not None:
        when = f"every {_value(ck.interval_minutes)} minutes ({steps:,} steps)"
    else:
        when = f"at {ck.interval.capitalize()}'s interval: {steps:,} steps ({minutes:,.1f} min)"
    if ck.mode == "async":
        blocking = (
            f"async: training blocks for the device-to-host snapshot "
            f"({perf.snapshot_s(s):.2f} s) and the write ({perf.checkpoint_write_s(s):,.1f} s) "
            "drains in the background"
        )
    else:
        blocking = f"sync: training blocks for the write ({perf.checkpoint_write_s(s):,.1f} s)"
    text = (
        f"{when}; {blocking}; {perf.checkpoint_GB(s):,.0f} GB each "
        f"({_value(ck.state_bytes_per_param)} bytes per parameter), the last {ck.keep_last} kept"
    )
    if ck.memory_every_steps:
        text += f"; an in-memory copy in peer hosts every {ck.memory_every_steps:,} steps"
    return text + "."


def _recovery_words(s: Scenario) -> str:
    r = s.recovery
    restart = (
        f"a restart takes {_value(r.restart_minutes)} min plus the checkpoint load "
        f"({perf.checkpoint_load_s(s):,.0f} s)"
    )
    if r.policy == "elastic":
        return (
            f"elastic: without a spare the job carries on with fewer data-parallel replicas "
            f"while at least {r.elastic_min_fraction:.0%} remain (re-forming takes "
            f"{_value(r.rescale_minutes)} min), and grows back at a checkpoint; {restart}."
        )
    return f"restart: failed nodes are swapped for spares (or waited for); {restart}."


def _repair_words(s: Scenario) -> str:
    rp = s.repair
    if rp is None:
        return "flat: a replaced node rejoins the spares after its class's repair_hours."
    text = (
        f"automated repair ({_value(rp.auto_minutes)} min) escalates to a technician "
        f"({_value(rp.manual_hours)} h) with probability {_value(rp.escalate_prob)}; false "
        f"fixes {_value(rp.auto_false_fix_prob)} (automated) and "
        f"{_value(rp.manual_false_fix_prob)} (manual); "
        f"{rp.technicians if rp.technicians is not None else 'unlimited'} technicians; "
        f"repaired nodes return to {rp.return_to}"
    )
    if rp.retire_after_failures:
        text += (
            f"; a node is retired after {rp.retire_after_failures} failures within "
            f"{_value(rp.retire_window_days)} days"
        )
    return text + "."


# the page's width for a table and a character's width in its cells (.88rem), in pixels:
# the calculator's rows that differ by point take as many points a table as fit it (the
# next points in a table below), its numbers do not wrap
PAGE_PX = 1060
CHAR_PX = 7.4
CELL_PAD_PX = 22


def _calculator_section(run: RunContents) -> str:
    points = run.scenario_set.feasible[:MAX_POINT_COLUMNS]  # the model refuses the others
    columns = [
        (_point_name(run, p.index) if p.params else "value",
         calculation_rows(perf.calculate(p.scenario)))
        for p in points
    ]  # fmt: skip
    labels = [label for label, _ in columns[0][1]]
    rows = [[label, *(rows[i][1] for _, rows in columns)] for i, label in enumerate(labels)]
    intro = (
        "<p>The deterministic calculator (<code>trainsim calc</code>): no Monte Carlo, "
        "failures only through their aggregate rate.</p>"
        + _first_points(run, MAX_POINT_COLUMNS)
        + _infeasible_note(run)
    )
    if len(columns) == 1:
        return intro + _table(["quantity", columns[0][0]], rows, numeric={1})
    # a row the same at every point once; the rows that differ by point, a few points a table
    same = [[row[0], row[1]] for row in rows if len(set(row[1:])) == 1]
    differ = [_common_note_to_label(row) for row in rows if len(set(row[1:])) > 1]
    out = intro
    if same:
        out += _table(["quantity", "at every point"], same, numeric={1})
    if not differ:
        return out
    label_px = min(max(len(row[0]) for row in differ), 28) * CHAR_PX + CELL_PAD_PX
    widths = [  # a column's cells do not wrap; its header does, at its spaces
        max(
            max(len(row[1 + i]) for row in differ),
            max(len(word) for word in columns[i][0].split()),
        ) * CHAR_PX + CELL_PAD_PX
        for i in range(len(columns))
    ]  # fmt: skip
    chunks: list[list[int]] = [[]]
    for i, width in enumerate(widths):
        if chunks[-1] and label_px + sum(widths[j] for j in chunks[-1]) + width > PAGE_PX:
            chunks.append([])
        chunks[-1].append(i)
    for chunk in chunks:
        out += _table(
            ["quantity (differs by point)", *(columns[i][0] for i in chunk)],
            [[row[0], *(row[1 + i] for i in chunk)] for row in differ],
            numeric=set(range(1, len(chunk) + 1)),
        )
    return out


def _common_note_to_label(row: list[str]) -> list[str]:
    """A note in parentheses that every point's cell ends with, said once by the label:
    'Daly expected wall time (first-order, no detection/repair)' over cells of days."""
    notes = {cell.partition(" (")[2] for cell in row[1:]}
    if len(notes) != 1 or not next(iter(notes)).endswith(")"):
        return row
    note = next(iter(notes))
    return [f"{row[0]} ({note}", *(cell.partition(" (")[0] for cell in row[1:])]


def _mfu_words(s: Scenario) -> str:
    """The MFU at this configuration, and where the stated one was measured if elsewhere."""
    stated, here = s.performance.mfu, perf.mfu(s)
    if here == stated or not s.performance.mfu_at:
        return f"MFU {here:.3g}."
    where = perf.describe_mfu_at(s.performance.mfu_at)
    return f"MFU {here:.3f} here by the step model (the stated {stated:g} was measured at {where})."


def calculation_rows(c: perf.Calculation) -> list[tuple[str, str]]:
    """The calculator's answer as (quantity, value with unit) rows."""
    return [
        ("GPUs (data-parallel replicas)", f"{c.gpus:,} ({c.data_parallel_size})"),
        ("FLOPs per token", _flops_per_token_text(c)),
        ("tokens trained", f"{c.tokens:.4g}"),
        ("optimizer steps", f"{c.total_steps:,}"),
        ("step time", f"{c.step_time_s:.3f} s"),
        ("tokens/s", f"{c.tokens_per_s:,.0f}"),
        ("MFU", f"{c.mfu:.3f}"),
        *step_model_rows(c),  # how that MFU follows from the configuration
        ("effective TFLOPS per GPU", f"{c.effective_tflops_per_gpu:.1f}"),
        ("effective PFLOP/s (the job)", f"{c.effective_pflops:,.1f}"),
        ("ideal time to train", f"{c.ideal_days:.2f} days"),
        ("checkpoint size", f"{c.checkpoint_GB:,.0f} GB"),
        ("checkpoint write / load", f"{c.checkpoint_write_s:.1f} s / {c.checkpoint_load_s:.1f} s"),
        (f"checkpoint blocks training ({c.checkpoint_mode})", f"{c.checkpoint_blocking_s:.2f} s"),
        ("checkpoint storage (keep_last)", f"{c.checkpoint_storage_TB:.2f} TB"),
        ("checkpoint interval", f"{c.interval_steps:,} steps = {c.interval_minutes:.1f} min"),
        (
            "aggregate MTBF",
            f"{c.aggregate_mtbf_hours:.1f} h ({c.failures_per_day:.2f} failures/day)",
        ),
        ("Young interval", f"{c.young_interval_minutes:.1f} min"),
        ("Daly interval", f"{c.daly_interval_minutes:.1f} min"),
        (
            "Daly expected wall time",
            f"{c.daly_expected_days:.2f} days (first-order, no detection/repair)",
        ),
        ("GPU-hours (job + spares, ideal)", f"{c.ideal_gpu_hours:,.0f}"),
        ("cost per GPU-hour", f"${c.gpu_hour_usd:.2f}"),
        ("cost (ideal)", f"${c.ideal_cost_usd:,.0f} at ${c.gpu_hour_usd:.2f}/GPU-hour"),
        ("cost with failures (Daly, first order)", f"${c.daly_expected_cost_usd:,.0f}"),
        ("cost per 1B tokens", f"${c.cost_per_1B_tokens_usd:,.2f}"),
    ]


def _flops_per_token_text(c: perf.Calculation) -> str:
    """FLOPs per token, with its terms when the model's shape gives them (a 6·N·D check
    by hand otherwise looks off by the attention term)."""
    if c.dense_flops_per_token is None:
        return f"{c.flops_per_token:.4g} (model.flops_per_token)"
    return (
        f"{c.flops_per_token:.4g} = 6N {c.dense_flops_per_token:.4g} + attention 12·L·h·T "
        f"{c.attention_flops_per_token or 0.0:.4g}"
    )


def step_model_rows(c: perf.Calculation) -> list[tuple[str, str]]:
    """The calculator's rows on the step model: how the MFU follows the configuration
    (the calibration), the batch split and the GPU memory."""
    efficiency = []
    if c.mfu_scaling == "model":
        where = perf.describe_mfu_at(c.mfu_at) if c.mfu_at else "this configuration"
        scaling = f"built up, calibrated at {where}"
        efficiency = [
            (
                "compute efficiency",
                f"{c.compute_efficiency:.3f} (calibrated: MFU {c.reference_mfu:g} there)",
            )
        ]
    elif c.mfu_scaling == "fixed":
        scaling = "fixed (performance.mfu_scaling: fixed)"
    elif c.mfu_scaling == "abstract":
        scaling = "fixed: an abstract job (no model.seq_len)"
    else:
        scaling = "built up"
        efficiency = [("compute efficiency", f"{c.compute_efficiency:g} (given)")]
    rows = [("MFU model", scaling), *efficiency]
    if c.microbatches:
        rows.append(
            (
                "microbatches per replica",
                f"{c.microbatches:,.4g} (pipeline bubble {c.bubble_share:.1%})",
            )
        )
    if c.memory_GB:
        rows.append(("GPU memory", f"{c.memory_GB:.1f} of {c.gpu_memory_GB:g} GB"))
    return rows


def _no_table(run: RunContents) -> str:
    status = run.manifest.get("status", "unknown")
    return (
        f'<p class="warning">No replicas.parquet: the run is {_e(status)}. Complete it with '
        f"<code>{_e(resume_command(run.path))}</code> and write the report again.</p>"
    )


def _summary_section(run: RunContents) -> str:
    if run.summary is None or run.table is None:
        return _no_table(run)
    intro = (
        "<p>Per sweep point over its replicas (error rows left out): time to train over "
        "finished replicas only; the last row says how many finished.</p>"
    )
    cards = []
    for index, rows in list(run.summary.groupby("point", sort=True))[:MAX_POINT_SUMMARIES]:
        point = run.scenario_set.points[int(index)]
        group = run.table[run.table["point"] == index]
        stats = rows.set_index("metric")
        body = []
        for metric, label in KEY_METRICS:
            if metric not in stats.index or metric == "wall_hours":  # time to train, in days
                continue
            s = stats.loc[metric]
            body.append(
                [
                    label,
                    *answer.same_decimals(  # as the CLI's table: one style along the row
                        [float(s[k]) for k in ("mean", "sem", "p5", "p50", "p95", "p99")], metric
                    ),
                    f"{int(s['n']):,}",
                ]
            )
        title = ""
        if len(run.scenario_set.points) > 1:
            title = f"<h3>{_e(f'point {int(index)}: {_params(point.params)}')}</h3>"
        cards.append(
            f'<div class="card">{title}<p class="note">{len(group):,} replicas, '
            f"{int(group['finished'].sum()):,} finished</p>"
            + _table(
                ["metric", "mean", "± s.e.", "p5", "p50", "p95", "p99", "n"],
                body,
                numeric=set(range(1, 8)),
            )
            + "</div>"
        )
    more = _first_points(run, MAX_POINT_SUMMARIES) + _infeasible_note(run)
    return intro + more + f'<div class="cards">{"".join(cards)}</div>'


def _sweep_section(run: RunContents) -> str:
    if run.summary is None:
        return _no_table(run)
    keys = run.scenario_set.varied_keys  # the table's axes: keys with several values
    summary = run.summary

    def by_point(metric: str) -> pd.DataFrame:
        return summary[summary["metric"] == metric].set_index("point")

    ttt, lost, goodput, cost, finished = (
        by_point(m)
        for m in (
            "time_to_train_days",
            "lost_work_hours",
            "goodput",
            "cost_usd",
            "finished_fraction",
        )
    )
    marks: dict[int, list[str]] = {}  # best on time and on cost, as the answer says
    if run.table is not None and len(run.scenario_set.feasible) > 1:
        for b in answer.best_points(answer.best_rows(run.table)):
            for p in [b.point, *b.tied]:
                marks.setdefault(p, []).append(b.criterion)
    rows, classes = [], []
    cannot = {p.index: p for p in _infeasible_points(run)}
    # one number of decimals a column (as the CLI's sweep table), apart where points differ
    days = answer.decimals_for(list(ttt["mean"]), distinct=True)
    p95_days = answer.decimals_for(list(ttt["p95"]), distinct=True)
    lost_hours = answer.decimals_for(list(lost["mean"]), distinct=True)
    goodput_decimals = answer.decimals_for(list(goodput["mean"]), "goodput", distinct=True)
    for point in sorted({*ttt.index, *cannot}):
        if point in cannot:  # never simulated: a row with its reason and no numbers
            rows.append(
                [
                    *(_value(cannot[point].params.get(k)) for k in keys),
                    "infeasible (below)",
                    *["—"] * 5,
                    "",
                ]
            )
            classes.append("infeasible")
            continue
        params = run.scenario_set.points[int(point)].params
        mean, sem = ttt.loc[point, "mean"], ttt.loc[point, "sem"]
        rows.append(
            [
                *(_value(params.get(k)) for k in keys),
                f"{answer.with_decimals(mean, days)} ± {answer.with_decimals(sem, days)}"
                if math.isfinite(mean)
                else "— (none finished)",
                answer.with_decimals(ttt.loc[point, "p95"], p95_days),
                answer.with_decimals(lost.loc[point, "mean"], lost_hours),
                answer.with_decimals(goodput.loc[point, "mean"], goodput_decimals, "goodput"),
                fmt_metric("cost_usd", cost.loc[point, "mean"]),
                f"{finished.loc[point, 'mean']:.0%}",
                ", ".join(marks.get(int(point), [])),
            ]
        )
        classes.append("best" if int(point) in marks else "")
    return (
        "<p>Mean time to train ± standard error over finished replicas; the best points on "
        "time (mean wall time) and on cost (mean cost) are marked, and the answer above says "
        "by how much (replicas share random numbers across points: the differences are "
        "paired).</p>"
        + _table(
            [
                *answer.short_keys(keys).values(),
                "time to train (days)",
                "p95 (days)",
                "lost work (h)",
                "goodput",
                "mean cost",
                "finished",
                "best on",
            ],
            rows,
            numeric=set(range(len(keys) + 6)),
            row_classes=classes,
        )
        + "".join(  # the reasons below the table, whole, not wrapped in a numeric column
            f"<p class='note'>Infeasible, not simulated: "
            f"{_e(answer.params_text(p.params, keys))}: {_e(p.infeasible)}</p>"
            for p in cannot.values()
        )
    )


def _plan_section(plan: dict[str, Any]) -> str:
    """plan.json for people: the choice in a sentence, the search in words, every candidate
    and the time–cost front with readable headers and statuses (plan.json keeps the raw
    fields)."""
    if not isinstance(plan, dict):
        return "<p class='warning'>plan.json is not a mapping: not shown.</p>"
    keys = [k for k in plan.get("varied_keys") or [] if isinstance(k, str)]
    names = answer.short_keys(keys)
    objective = str(plan.get("objective", "cost_usd"))
    q = plan.get("quantile")
    deadline = plan.get("deadline_days")
    quantile_name = f"p{q * 100:g}" if isinstance(q, int | float) else "quantile"
    within = f"{deadline:g} days" if isinstance(deadline, int | float) else "the deadline"
    parts = []  # the plan's sentence heads the answer above
    search = []
    spent, full = plan.get("replicas_spent"), plan.get("replicas_full_grid")
    if isinstance(spent, int) and isinstance(full, int) and full:
        search.append(
            f"The search ran {spent:,} replicas; a plain sweep of the grid at the same "
            f"precision would run {full:,} ({spent / full:.0%})."
        )
    rounds = plan.get("rounds") or []
    if rounds:
        search.append(
            f"It raced {len(rounds)} round(s), doubling the replicas of the points still in "
            f"the race, and stopped: {plan.get('stop_reason', 'unknown')}."
        )
    if search:
        parts.append(f"<p>{_e(' '.join(search))}</p>")

    candidates = [c for c in plan.get("candidates") or [] if isinstance(c, dict)]
    if candidates:
        parts.append("<h3>Every point, best first</h3>")
        rows, classes = [], []
        for c in candidates:
            ran = bool(c.get("replicas"))
            rows.append(
                [
                    *(_cell(c.get(k)) for k in keys),
                    f"{c.get('replicas', 0):,}" if ran else "—",
                    _with_ci(
                        objective,
                        c.get("objective_mean"),
                        c.get("objective_ci_low"),
                        c.get("objective_ci_high"),
                    )
                    if ran
                    else "—",  # fmt: skip
                    _share_ci(c.get("p_meet"), c.get("p_meet_low"), c.get("p_meet_high"))
                    if ran
                    else "—",
                    _days(c.get("time_to_train_days_p50")),
                    _days(
                        c.get(
                            f"time_to_train_days_{quantile_name}",
                            c.get("time_to_train_days_at_quantile"),
                        )
                    ),  # fmt: skip
                    answer.plan_status(c, plan),
                ]
            )
            classes.append("best" if c.get("status") == "chosen" else ("" if ran else "infeasible"))
        headers = [
            *(names[k] for k in keys),
            "replicas",
            f"{answer.objective_words(objective)} ± 95% CI",
            f"chance of finishing within {within} (95% CI)",
            "p50 days",
            f"{quantile_name} days",
            "status",
        ]
        parts.append(_table(headers, rows, numeric=set(range(len(keys) + 5)), row_classes=classes))
    front = [r for r in plan.get("pareto") or [] if isinstance(r, dict)]
    if front:
        parts.append("<h3>Time–cost Pareto front</h3>")
        parts.append(
            f"<p>The points no other point beats on both the {_e(quantile_name)} time to train "
            "and the mean cost, fastest first.</p>"
        )
        rows = [
            [
                *(_cell(r.get(k)) for k in keys),
                _days(r.get("time_to_train_days_at_quantile")),
                answer.readable("cost_usd", r["cost_usd_mean"])
                if isinstance(r.get("cost_usd_mean"), int | float)
                else "—",  # fmt: skip
                _share_ci(r.get("p_meet"), None, None),
                answer.front_role(r, plan),
            ]
            for r in front
        ]
        classes = ["best" if r.get("status") == "chosen" else "" for r in front]
        parts.append(
            _table(
                [
                    *(names[k] for k in keys),
                    f"{quantile_name} days",
                    "mean cost",
                    f"chance within {within}",
                    "against the chosen point",
                ],  # fmt: skip
                rows,
                numeric=set(range(len(keys) + 3)),
                row_classes=classes,
            )
        )
    parts.append(
        "<p class='note'>Every figure of the search, with its confidence bounds, is in "
        "<code>plan.json</code> (<code>trainsim plan</code>).</p>"
    )
    return "\n".join(parts)


def _with_ci(objective: str, mean: Any, low: Any, high: Any) -> str:
    if not isinstance(mean, int | float):
        return "—"
    text = answer.readable(objective, mean)
    if isinstance(low, int | float) and isinstance(high, int | float):
        text += f" ± {answer.readable(objective, (high - low) / 2)}"
    return text


def _share_ci(p: Any, low: Any, high: Any) -> str:
    if not isinstance(p, int | float):
        return "—"
    text = f"{p:.0%}"
    if isinstance(low, int | float) and isinstance(high, int | float):
        text += f" ({low:.0%} – {high:.0%})"
    return text


def _days(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and math.isfinite(value) else "—"


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _value(value) if abs(value) < 1e4 or value.is_integer() else f"{value:,.0f}"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


# the largest figure and plan.json a report reads (trainsim's are ~100 kB and a few kB)
MAX_FIGURE_BYTES = 50_000_000
MAX_PLAN_BYTES = 50_000_000


def _figures_section(run: RunContents) -> str:
    if not run.figures:
        return "<p class='note'>No figures in this run directory (it ran with --no-figures).</p>"
    parts = []
    for path in run.figures:
        try:  # a FIFO or /dev/zero named *.png would hang the report or fill its memory
            data = read_bounded(path, MAX_FIGURE_BYTES, "figure (PNG)")
        except ScenarioError as exc:
            parts.append(f"<p class='warning'>{_e(path.name)}: {_e(exc.message)}: left out.</p>")
            continue
        title = FIGURE_TITLES.get(path.name, path.stem.replace("_", " "))
        if path.name.startswith(FIGURE_PREFIX):
            other = path.stem.removeprefix(FIGURE_PREFIX)
            title = f"Comparison with run {other} (trainsim compare; B is this run)"
        if not data.startswith(PNG_SIGNATURE):
            parts.append(f"<p class='warning'>{_e(path.name)} is not a PNG file: left out.</p>")
            continue
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(
            f'<figure><img src="data:image/png;base64,{encoded}" alt="{_e(title)}">'
            f"<figcaption>{_e(title)} — <code>{_e(path.relative_to(run.path).as_posix())}</code>"
            "</figcaption></figure>"
        )
    return "\n".join(parts)


def _means(run: RunContents, columns: list[str]) -> pd.DataFrame:
    """Means per replica of the first MAX_POINT_COLUMNS points."""
    assert run.table is not None
    return run.table.groupby("point", sort=True)[columns].mean().iloc[:MAX_POINT_COLUMNS]


def _infeasible_points(run: RunContents) -> list[Point]:
    """The run's points that cannot run (of its `--points` slice, if it has one)."""
    chosen = run.manifest.get("points_slice")
    within = range(*chosen) if isinstance(chosen, list) and len(chosen) == 2 else None
    return [
        p
        for p in run.scenario_set.points
        if p.infeasible is not None and (within is None or p.index in within)
    ]


def _infeasible_note(run: RunContents) -> str:
    """A note naming the infeasible points and why (empty when every point can run)."""
    cannot = _infeasible_points(run)
    if not cannot:
        return ""
    listed = "; ".join(f"point {p.index} ({_params(p.params)}): {p.infeasible}" for p in cannot)
    return (
        f"<p class='note'>{len(cannot)} infeasible point(s), not simulated (the configuration "
        f"cannot run): {_e(listed)}.</p>"
    )


def _first_points(run: RunContents, shown: int) -> str:
    total = len(run.scenario_set.points)
    if total <= shown:
        return ""
    return (
        f"<p class='note'>The first {shown} of {total} sweep points; the sweep table has "
        "every point.</p>"
    )


def _split_table(
    run: RunContents,
    total: str,
    parts: list[tuple[str, str]],
    metric_unit: str,
    missing_label: str,
) -> str:
    """Mean per replica of each present part of `total`, per point, with its share: one
    point's parts as rows; several points as rows, a column per part that any of them has
    (the share under the value), so that the table stays within the page."""
    assert run.table is not None
    present = [(c, label) for c, label in parts if c in run.table.columns]
    means = _means(run, [total, *(c for c, _ in present)])
    note = _first_points(run, MAX_POINT_COLUMNS)
    rest = means[total] - means[[c for c, _ in present]].sum(axis=1)
    has_rest = bool(present) and bool(
        (rest.abs() > 1e-9 * means[total].abs().clip(lower=1.0)).any()
    )
    if len(means) > 1:
        shown = [(c, label) for c, label in present if (means[c].abs() > 0).any()]
        headers = [_points_header(run), *(label for _, label in shown)]
        headers += [missing_label] if has_rest else []
        headers.append(f"total ({total})")
        rows = []
        decimals = {c: _column_decimals(means[c]) for c, _ in shown}
        rest_decimals, total_decimals = _column_decimals(rest), _column_decimals(means[total])
        for p in means.index:
            total_value = means.loc[p, total]
            cells = [
                _share(metric_unit, means.loc[p, c], total_value, "\n", decimals[c])
                for c, _ in shown
            ]
            if has_rest:
                cells.append(_share(metric_unit, rest.loc[p], total_value, "\n", rest_decimals))
            total_text = _number_in(metric_unit, float(total_value), total_decimals)
            rows.append([_point_name(run, int(p)), *cells, total_text])
        left_out = [label for c, label in present if (means[c].abs() == 0).all()]
        if left_out:
            note += f"<p class='note'>Zero at every point: {_e(', '.join(left_out))}.</p>"
        return note + _table(headers, rows, numeric=set(range(1, len(headers))))
    headers = ["part", *(_point_label(run, int(p)) for p in means.index)]
    rows, classes = [], []
    for column, label in present:
        rows.append(
            [
                f"{label} ({column})",
                *(
                    _share(metric_unit, means.loc[p, column], means.loc[p, total])
                    for p in means.index
                ),
            ]
        )
        classes.append("")
    if has_rest:
        rows.append(
            [
                missing_label,
                *(_share(metric_unit, rest.loc[p], means.loc[p, total]) for p in means.index),
            ]
        )
        classes.append("")
    rows.append(
        [f"total ({total})", *(fmt_metric(metric_unit, means.loc[p, total]) for p in means.index)]
    )
    classes.append("total")
    return note + _table(headers, rows, numeric=set(range(1, len(headers))), row_classes=classes)


def _points_header(run: RunContents) -> str:
    """The header of a column of point names: the swept keys by their short endings."""
    return " / ".join(answer.short_keys(run.scenario_set.varied_keys).values()) or "point"


def _point_name(run: RunContents, point: int) -> str:
    """A point by its swept values (short keys), as a row of a table by point names it."""
    keys = run.scenario_set.varied_keys
    return answer.params_text(run.scenario_set.points[point].params, keys) or str(point)


def _cost_section(run: RunContents) -> str:
    if run.table is None:
        return _no_table(run)
    present = [c for c, _ in COST_PARTS if c in run.table.columns]
    intro = (
        "<p>Mean cost per replica and where it went; the parts add up to <code>cost_usd</code>.</p>"
        if present
        else "<p>Mean cost per replica. This run's table has no cost split "
        "(<code>cost_ideal_usd</code> … <code>cost_idle_spares_usd</code>): only the total.</p>"
    )
    return intro + _split_table(
        run, "cost_usd", COST_PARTS, "cost_usd", "not accounted for by the parts"
    )


def _downtime_section(run: RunContents) -> str:
    if run.table is None:
        return _no_table(run)
    present = [c for c, _ in DOWNTIME_PARTS if c in run.table.columns]
    missing = [c for c, _ in DOWNTIME_PARTS if c not in run.table.columns]
    intro = "<p>Mean downtime per replica (hours), split by cause where the table records it"
    intro += (
        "; this run's table does not have "
        + ", ".join(f"<code>{_e(c)}</code>" for c in missing)
        + ".</p>"
        if missing and present
        else ".</p>"
    )
    label = "other (not split in this run's table)" if missing else "not accounted for by the parts"
    return intro + _split_table(run, "downtime_hours", DOWNTIME_PARTS, "downtime_hours", label)


def _failures_section(run: RunContents) -> str:
    if run.table is None:
        return _no_table(run)
    s = run.scenario_set.base
    columns = [
        f"failures_{f.name}" for f in s.failures if f"failures_{f.name}" in run.table.columns
    ]
    if not columns:
        return "<p class='note'>No failure classes in this scenario.</p>"
    means = _means(run, ["failures", *columns])
    lemon = None
    if "failures_lemon" in run.table.columns:
        lemon = _means(run, ["failures_lemon"])["failures_lemon"]
        lemon = lemon if (lemon > 0).any() else None
    intro = (
        "<p>Mean failures per replica by class, counted while the job runs, and each "
        "class's share.</p>" + _first_points(run, MAX_POINT_COLUMNS)
    )
    if len(means) > 1:  # points as rows, a column per class: within the page
        headers = [_points_header(run), *(c.removeprefix("failures_") for c in columns)]
        headers.append("all classes (failures)")
        headers += ["of which on nodes with a lasting fault"] if lemon is not None else []
        rows = []
        decimals = {c: _column_decimals(means[c]) for c in ["failures", *columns]}
        lemon_decimals = _column_decimals(lemon) if lemon is not None else None
        for p in means.index:
            total = means.loc[p, "failures"]
            rows.append(
                [
                    _point_name(run, int(p)),
                    *(
                        _share("failures", means.loc[p, c], total, "\n", decimals[c])
                        for c in columns
                    ),
                    _number_in("failures", float(total), decimals["failures"]),
                    *(
                        [_number_in("failures", float(lemon.loc[p]), lemon_decimals)]
                        if lemon is not None
                        else []
                    ),
                ]
            )
        return intro + _table(headers, rows, numeric=set(range(1, len(headers))))
    headers = ["class", *(_point_label(run, int(p)) for p in means.index)]
    rows, classes = [], []
    for column in columns:
        rows.append(
            [
                column.removeprefix("failures_"),
                *(
                    _share("failures", means.loc[p, column], means.loc[p, "failures"])
                    for p in means.index
                ),
            ]
        )
        classes.append("")
    rows.append(
        [
            "all classes (failures)",
            *(fmt_metric("failures", means.loc[p, "failures"]) for p in means.index),
        ]
    )
    classes.append("total")
    if lemon is not None:
        rows.append(
            [
                "of which on nodes with a lasting fault",
                *(fmt_metric("failures", lemon.loc[p]) for p in means.index),
            ]
        )
        classes.append("")
    return intro + _table(headers, rows, numeric=set(range(1, len(headers))), row_classes=classes)


def _provenance_section(run: RunContents) -> str:
    manifest = run.manifest
    keys = [k for k in PROVENANCE_ORDER if k in manifest] + [
        k for k in manifest if k not in PROVENANCE_ORDER
    ]
    rows = []
    for key in keys:
        value = manifest[key]
        if key == "command" and isinstance(value, list):
            text = shlex.join(str(v) for v in value)
        elif isinstance(value, dict | list):
            text = json.dumps(value, default=str)
        else:
            text = "—" if value is None else str(value)
        rows.append([key, text])
    rows.append(["run directory", str(run.path.resolve())])
    return "<p>From <code>run.json</code>.</p>" + _table(
        ["field", "value"], rows, numeric=set(), code={1}
    )


# --------------------------------------------------------------------------- helpers


def _table(
    headers: list[str],
    rows: list[list[str]],
    numeric: set[int],
    row_classes: list[str] | None = None,
    code: set[int] | None = None,
) -> str:
    """An HTML table of text cells (escaped here); `numeric` columns align right."""
    code = code or set()

    def cell(tag: str, i: int, text: Any) -> str:
        klass = ' class="num"' if i in numeric else ""
        inner = _e(text).replace("\n", "<br>")  # a cell's second line (a share)
        if i in code and tag == "td":
            inner = f"<code>{inner}</code>"
        return f"<{tag}{klass}>{inner}</{tag}>"

    head = "<tr>" + "".join(cell("th", i, h) for i, h in enumerate(headers)) + "</tr>"
    body = []
    for n, row in enumerate(rows):
        klass = row_classes[n] if row_classes else ""
        attr = f' class="{_e(klass)}"' if klass else ""
        body.append(f"<tr{attr}>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>")
    return (
        f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(body)}</tbody>'
        "</table></div>"
    )


def _share(
    metric: str, value: float, total: float, between: str = " ", decimals: int | None = None
) -> str:
    """A part's value and its share of the total ('$1,234 (5.0%)'; `between` the two;
    `decimals`: those of its column, for numbers that are not dollars)."""
    text = _number_in(metric, float(value), decimals)
    if total and math.isfinite(total) and math.isfinite(value):
        text += f"{between}({value / total:.1%})"
    return text


def _number_in(metric: str, value: float, decimals: int | None) -> str:
    """A value as its column writes it: with the column's decimals (answer.same_decimals),
    or as fmt_metric does (dollars, or one value alone)."""
    if decimals is None or unit_of(metric) == "USD":
        return fmt_metric(metric, value)
    return answer.with_decimals(value, decimals)


def _column_decimals(values: Any) -> int:
    """The decimals a column of a table by point writes its numbers with (3 significant
    digits at its largest value)."""
    return answer.decimals_for([float(v) for v in values], significant=3)


def _point_label(run: RunContents, point: int) -> str:
    params = run.scenario_set.points[point].params
    return _params(params) if params else "mean per replica"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in params.items())


def _value(value: Any) -> str:
    """A number as a user writes it: 4 not 4.0, 0.5 not 0.50000001."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}" if abs(value) >= 1e4 else str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _si(value: float) -> str:
    """7.0e9 → 7B, 1.4e12 → 1.4T."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:g}"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)
