"""The report's scenario sections: the scenario in words (base values by topic, swept keys,
replicas used) and the deterministic calculator with its step model.
"""

from __future__ import annotations

from sim.decide import answer
from sim.model import batch, calculator, checkpoints, perf, reliability
from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.model.schema import Scenario
from sim.show.report_html import (
    CELL_PAD_PX,
    CHAR_PX,
    escaped,
    html_table,
    si_text,
    value_text,
)
from sim.show.report_run import (
    MAX_POINT_COLUMNS,
    RunContents,
    first_points,
    infeasible_note,
    point_name,
)


def scenario_section(run: RunContents) -> str:
    scenario_set = run.scenario_set
    s, base_note = _base_scenario(scenario_set)
    sweep = scenario_set.resolved.get("sweep") or {}
    parts = []
    swept_by_topic: dict[str, list[str]] = {}
    if sweep:
        for key, values in sweep.items():
            text = f"{key} = {', '.join(value_text(v) for v in values)}"
            swept_by_topic.setdefault(_topic_of(key), []).append(text)
        listed = "; ".join(
            f"<code>{escaped(k)}</code> = {escaped(', '.join(value_text(v) for v in values))}"
            for k, values in sweep.items()
        )
        parts.append(
            f"<p>The run sweeps {len(scenario_set.points)} points: {listed}. Below is the "
            f"base scenario{escaped(base_note)}; each point replaces the swept keys' values "
            "(each named under its topic as <em>Swept</em>).</p>"
        )
        parts.append(infeasible_note(run))
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
        + "".join(f"<dt>{escaped(topic)}</dt><dd>{escaped(text)}</dd>" for topic, text in words)
        + "</dl>"
    )
    if s.failures:
        rows = []
        for f in s.failures:
            per_hour = reliability.failure_rate_per_hour(f, s)
            given = (
                f"MTBF {value_text(f.mtbf_hours)} h per {f.scope}"
                if f.mtbf_hours is not None
                else f"{value_text(f.rate_per_1k_gpu_day)} per 1,000 GPU-days"
            )
            shape = {
                "weibull": f"Weibull (shape {value_text(f.weibull_shape)})",
                "lognormal": f"log-normal (σ {value_text(f.lognormal_sigma)})",
            }.get(f.distribution, f.distribution)
            rows.append(
                [
                    f.name,
                    f.scope,
                    given,
                    shape,
                    f"{per_hour * 24:.3g}",
                    f"{1 / per_hour:,.1f}" if per_hour > 0 else "—",
                    value_text(f.detect_minutes),
                    "yes" if f.replaces_nodes else "no",
                    value_text(f.repair_hours) if f.replaces_nodes else "—",
                    "yes" if f.while_idle else "no",
                ]
            )
        parts.append("<h3>Failure classes</h3>")
        parts.append(
            html_table(
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
    return f"{used}, seed {seed}, horizon {value_text(s.simulation.horizon_days)} days."


def scenario_in_words(s: Scenario) -> list[tuple[str, str]]:
    """The scenario as (topic, sentence) pairs: what a reader needs to know about the run."""
    c, m = s.cluster, s.model
    steps = perf.total_steps(s)
    words = [
        (
            "model",
            f"{si_text(m.params)} parameters trained on {si_text(m.tokens)} tokens, "
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
            f"{batch.data_parallel_size(s):,} data-parallel replicas; "
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
            f"{24 / reliability.aggregate_mtbf_hours(s):.2f} failures per day on this job "
            f"(aggregate MTBF {reliability.aggregate_mtbf_hours(s):,.1f} h)."
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
                f"every {value_text(h.every_hours)} h, costing {value_text(h.cost_minutes)} min of "
                f"downtime; they catch {h.catch_prob:.0%} of node failures due within "
                f"{value_text(h.lead_hours)} h.",
            )
        )
    if s.maintenance is not None:
        words.append(
            (
                "maintenance",
                f"every {value_text(s.maintenance.every_days)} days the job checkpoints and stops "
                f"for {value_text(s.maintenance.duration_hours)} h.",
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
            f"horizon {value_text(s.simulation.horizon_days)} days.",
        ),
    ]
    return words


def _spares_words(s: Scenario) -> str:
    c = s.cluster
    text = f"{c.spare_nodes} warm spare node{'s' if c.spare_nodes != 1 else ''}"
    if c.pool_nodes:
        text += (
            f"; a cold pool of {c.pool_nodes} nodes that join after "
            f"{value_text(c.host_selection_minutes)} min"
        )
    if c.preemptible_nodes:
        text += (
            f"; {c.preemptible_nodes} preemptible nodes that join after "
            f"{value_text(c.preemption_minutes)} min"
        )
    if c.lemon_fraction:
        text += (
            f"; {c.lemon_fraction:.1%} of the nodes are lemons failing "
            f"{value_text(c.lemon_rate_multiplier)}× as often"
        )
    return text + "."


def _storage_words(s: Scenario) -> str:
    st, tier = s.storage, s.storage.checkpoint_tier
    text = (
        f"checkpoints go to a {tier.kind} tier (write {value_text(tier.write_GB_s)} GB/s, read "
        f"{value_text(tier.read_GB_s)} GB/s, {value_text(tier.capacity_TB)} TB, latency "
        f"{value_text(tier.latency_ms)} ms); each node's own path {value_text(st.client_GB_s_per_node)} "
        f"GB/s, so checkpoints write at {checkpoints.write_GB_s(st, s.cluster.nodes):,.1f} GB/s and "
        f"load at {checkpoints.read_GB_s(st, s.cluster.nodes):,.1f} GB/s"
    )
    if st.background_load:
        text += f"; other tenants use {st.background_load:.0%} of the tier"
    text += f"; training data is read from a {st.data_tier} tier"
    if st.backup is not None:
        b = st.backup
        text += (
            f"; every {b.every}th durable checkpoint is copied to a {b.kind} backup "
            f"(write {value_text(b.write_GB_s)} GB/s)"
        )
    return text + "."


def _checkpoint_words(s: Scenario) -> str:
    ck = s.checkpoint
    steps = reliability.interval_steps(s)
    minutes = steps * perf.step_time_s(s) / 60
    if ck.interval_steps is not None:
        when = f"every {steps:,} steps ({minutes:,.1f} min)"
    elif ck.interval_minutes is not None:
        when = f"every {value_text(ck.interval_minutes)} minutes ({steps:,} steps)"
    else:
        when = f"at {ck.interval.capitalize()}'s interval: {steps:,} steps ({minutes:,.1f} min)"
    if ck.mode == "async":
        blocking = (
            f"async: training blocks for the device-to-host snapshot "
            f"({checkpoints.snapshot_s(s):.2f} s) and the write ({checkpoints.checkpoint_write_s(s):,.1f} s) "
            "drains in the background"
        )
    else:
        blocking = (
            f"sync: training blocks for the write ({checkpoints.checkpoint_write_s(s):,.1f} s)"
        )
    text = (
        f"{when}; {blocking}; {checkpoints.checkpoint_GB(s):,.0f} GB each "
        f"({value_text(ck.state_bytes_per_param)} bytes per parameter), the last {ck.keep_last} kept"
    )
    if ck.memory_every_steps:
        text += f"; an in-memory copy in peer hosts every {ck.memory_every_steps:,} steps"
    return text + "."


def _recovery_words(s: Scenario) -> str:
    r = s.recovery
    restart = (
        f"a restart takes {value_text(r.restart_minutes)} min plus the checkpoint load "
        f"({checkpoints.checkpoint_load_s(s):,.0f} s)"
    )
    if r.policy == "elastic":
        return (
            f"elastic: without a spare the job carries on with fewer data-parallel replicas "
            f"while at least {r.elastic_min_fraction:.0%} remain (re-forming takes "
            f"{value_text(r.rescale_minutes)} min), and grows back at a checkpoint; {restart}."
        )
    return f"restart: failed nodes are swapped for spares (or waited for); {restart}."


def _repair_words(s: Scenario) -> str:
    rp = s.repair
    if rp is None:
        return "flat: a replaced node rejoins the spares after its class's repair_hours."
    text = (
        f"automated repair ({value_text(rp.auto_minutes)} min) escalates to a technician "
        f"({value_text(rp.manual_hours)} h) with probability {value_text(rp.escalate_prob)}; false "
        f"fixes {value_text(rp.auto_false_fix_prob)} (automated) and "
        f"{value_text(rp.manual_false_fix_prob)} (manual); "
        f"{rp.technicians if rp.technicians is not None else 'unlimited'} technicians; "
        f"repaired nodes return to {rp.return_to}"
    )
    if rp.retire_after_failures:
        text += (
            f"; a node is retired after {rp.retire_after_failures} failures within "
            f"{value_text(rp.retire_window_days)} days"
        )
    return text + "."


# the page's width for a table, in pixels: the calculator's rows that differ by point take as
# many points a table as fit it (the next points in a table below), its numbers do not wrap
PAGE_PX = 1060


def calculator_section(run: RunContents) -> str:
    points = run.scenario_set.feasible[:MAX_POINT_COLUMNS]  # the model refuses the others
    columns = [
        (point_name(run, p.index) if p.params else "value",
         calculation_rows(calculator.calculate(p.scenario)))
        for p in points
    ]  # fmt: skip
    labels = [label for label, _ in columns[0][1]]
    rows = [[label, *(rows[i][1] for _, rows in columns)] for i, label in enumerate(labels)]
    intro = (
        "<p>The deterministic calculator (<code>trainsim calc</code>): no Monte Carlo, "
        "failures only through their aggregate rate.</p>"
        + first_points(run, MAX_POINT_COLUMNS)
        + infeasible_note(run)
    )
    if len(columns) == 1:
        return intro + html_table(["quantity", columns[0][0]], rows, numeric={1})
    # a row the same at every point once; the rows that differ by point, a few points a table
    same = [[row[0], row[1]] for row in rows if len(set(row[1:])) == 1]
    differ = [_common_note_to_label(row) for row in rows if len(set(row[1:])) > 1]
    out = intro
    if same:
        out += html_table(["quantity", "at every point"], same, numeric={1})
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
        out += html_table(
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


def calculation_rows(c: calculator.Calculation) -> list[tuple[str, str]]:
    """The calculator's answer as (quantity, value with unit) rows."""
    return [
        ("GPUs (data-parallel replicas)", f"{c.gpus:,} ({c.data_parallel_size})"),
        ("FLOPs per token", _flops_per_token_text(c)),
        ("tokens trained", f"{c.tokens:.4g}"),
        ("optimizer steps", f"{c.total_steps:,}"),
        ("step time", f"{c.step_time_s:.3f} s"),
        ("tokens/s", f"{c.tokens_per_s:,.0f}"),
        ("MFU", f"{c.mfu:.1%}"),
        *step_model_rows(c),  # how that MFU follows from the configuration
        ("effective TFLOPS per GPU", f"{c.effective_tflops_per_gpu:.1f}"),
        ("effective PFLOP/s (the job)", f"{c.effective_pflops:,.1f}"),
        ("ideal time to train", answer.duration(c.ideal_days * 24, unit="days")),
        ("checkpoint size", f"{c.checkpoint_GB:,.0f} GB"),
        ("checkpoint write / load", f"{c.checkpoint_write_s:.1f} s / {c.checkpoint_load_s:.1f} s"),
        (f"checkpoint blocks training ({c.checkpoint_mode})", f"{c.checkpoint_blocking_s:.1f} s"),
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
            f"{answer.duration(c.daly_expected_days * 24, unit='days')} (first-order, no "
            "detection/repair)",
        ),
        ("GPU-hours (job + spares, ideal)", f"{c.ideal_gpu_hours:,.0f}"),
        ("cost per GPU-hour", f"${c.gpu_hour_usd:.2f}"),
        ("cost (ideal)", f"{answer.money(c.ideal_cost_usd)} at ${c.gpu_hour_usd:.2f}/GPU-hour"),
        ("cost with failures (Daly, first order)", answer.money(c.daly_expected_cost_usd)),
        ("cost per 1B tokens", answer.money(c.cost_per_1B_tokens_usd)),
    ]


def _flops_per_token_text(c: calculator.Calculation) -> str:
    """FLOPs per token, with its terms when the model's shape gives them (a 6·N·D check
    by hand otherwise looks off by the attention term)."""
    if c.dense_flops_per_token is None:
        return f"{c.flops_per_token:.4g} (model.flops_per_token)"
    return (
        f"{c.flops_per_token:.4g} = 6N {c.dense_flops_per_token:.4g} + attention 12·L·h·T "
        f"{c.attention_flops_per_token or 0.0:.4g}"
    )


def step_model_rows(c: calculator.Calculation) -> list[tuple[str, str]]:
    """The calculator's rows on the step model: how the MFU follows the configuration
    (the calibration), the batch split and the GPU memory."""
    efficiency = []
    if c.mfu_scaling == "model":
        where = perf.describe_mfu_at(c.mfu_at) if c.mfu_at else "this configuration"
        scaling = f"built up, calibrated at {where}"
        efficiency = [
            (
                "compute efficiency",
                f"{c.compute_efficiency:.1%} of peak (calibrated: MFU {c.reference_mfu:.1%} there)",
            )
        ]
    elif c.mfu_scaling == "fixed":
        scaling = "fixed (performance.mfu_scaling: fixed)"
    elif c.mfu_scaling == "abstract":
        scaling = "fixed: an abstract job (no model.seq_len)"
    else:
        scaling = "built up"
        efficiency = [("compute efficiency", f"{c.compute_efficiency:.1%} of peak (given)")]
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
