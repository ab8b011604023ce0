"""The report's results sections: the summary per point, the sweep and plan tables, every
figure as a `data:` PNG, the cost, downtime and failure splits, and the provenance.
"""

from __future__ import annotations

import base64
import json
import math
import shlex
from typing import Any

import pandas as pd

from sim.decide import answer
from sim.decide.compare import FIGURE_PREFIX, fmt_metric
from sim.model.columns import SUMMARY_METRICS
from sim.model.scenario_set import ScenarioError
from sim.runs.files import read_bounded
from sim.show.report_html import (
    column_decimals,
    escaped,
    html_table,
    number_in,
    params_text,
    share_text,
    value_text,
)
from sim.show.report_run import (
    COST_PARTS,
    DOWNTIME_PARTS,
    MAX_FIGURE_BYTES,
    MAX_POINT_COLUMNS,
    MAX_POINT_SUMMARIES,
    PNG_SIGNATURE,
    RunContents,
    figure_title,
    first_points,
    infeasible_note,
    infeasible_points,
    no_table,
    point_label,
    point_means,
    point_name,
    points_header,
    split_table,
)

# The metrics of the summary tables (those `trainsim run` prints), and the finished share.
KEY_METRICS = [*SUMMARY_METRICS, ("finished_fraction", "finished (share of replicas)")]

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


def summary_section(run: RunContents) -> str:
    if run.summary is None or run.table is None:
        return no_table(run)
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
            title = f"<h3>{escaped(f'point {int(index)}: {params_text(point.params)}')}</h3>"
        cards.append(
            f'<div class="card">{title}<p class="note">{len(group):,} replicas, '
            f"{int(group['finished'].sum()):,} finished</p>"
            + html_table(
                ["metric", "mean", "± s.e.", "p5", "p50", "p95", "p99", "n"],
                body,
                numeric=set(range(1, 8)),
            )
            + "</div>"
        )
    more = first_points(run, MAX_POINT_SUMMARIES) + infeasible_note(run)
    return intro + more + f'<div class="cards">{"".join(cards)}</div>'


def sweep_section(run: RunContents) -> str:
    if run.summary is None:
        return no_table(run)
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
    cannot = {p.index: p for p in infeasible_points(run)}
    # one number of decimals a column (as the CLI's sweep table), apart where points differ
    days = answer.decimals_for(list(ttt["mean"]), distinct=True)
    p95_days = answer.decimals_for(list(ttt["p95"]), distinct=True)
    lost_hours = answer.decimals_for(list(lost["mean"]), distinct=True)
    goodput_decimals = answer.decimals_for(list(goodput["mean"]), "goodput", distinct=True)
    for point in sorted({*ttt.index, *cannot}):
        if point in cannot:  # never simulated: a row with its reason and no numbers
            rows.append(
                [
                    *(value_text(cannot[point].params.get(k)) for k in keys),
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
                *(value_text(params.get(k)) for k in keys),
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
        + html_table(
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
            key_columns=len(keys),
        )
        + "".join(  # the reasons below the table, whole, not wrapped in a numeric column
            f"<p class='note'>Infeasible, not simulated: "
            f"{escaped(answer.params_text(p.params, keys))}: {escaped(p.infeasible)}</p>"
            for p in cannot.values()
        )
    )


def plan_section(plan: dict[str, Any]) -> str:
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
        parts.append(f"<p>{escaped(' '.join(search))}</p>")

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
        parts.append(
            html_table(
                headers,
                rows,
                numeric=set(range(len(keys) + 5)),
                row_classes=classes,
                key_columns=len(keys),
            )
        )
    front = [r for r in plan.get("pareto") or [] if isinstance(r, dict)]
    if front:
        parts.append("<h3>Time–cost Pareto front</h3>")
        parts.append(
            f"<p>The points no other point beats on both the {escaped(quantile_name)} time to train "
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
            html_table(
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
                key_columns=len(keys),
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
    if not (isinstance(low, int | float) and isinstance(high, int | float)):
        return answer.readable(objective, mean)
    # the mean with the digits that tell its interval's ends apart, as `trainsim plan` writes it
    digits = answer.interval_decimals(objective, low, high, answer.common_unit(objective, [mean]))
    text = answer.readable(objective, mean, decimals=digits)
    return f"{text} ± {answer.readable(objective, (high - low) / 2)}"


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
        return value_text(value) if abs(value) < 1e4 or value.is_integer() else f"{value:,.0f}"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def figures_section(run: RunContents) -> str:
    if not run.figures:
        return "<p class='note'>No figures in this run directory (it ran with --no-figures).</p>"
    parts = []
    for path in run.figures:
        try:  # a FIFO or /dev/zero named *.png would hang the report or fill its memory
            data = read_bounded(path, MAX_FIGURE_BYTES, "figure (PNG)")
        except ScenarioError as exc:
            parts.append(
                f"<p class='warning'>{escaped(path.name)}: {escaped(exc.message)}: left out.</p>"
            )
            continue
        title = figure_title(path.name)
        if path.name.startswith(FIGURE_PREFIX):
            other = path.stem.removeprefix(FIGURE_PREFIX)
            title = f"Comparison with run {other} (trainsim compare; B is this run)"
        if not data.startswith(PNG_SIGNATURE):
            parts.append(
                f"<p class='warning'>{escaped(path.name)} is not a PNG file: left out.</p>"
            )
            continue
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(
            f'<figure><img src="data:image/png;base64,{encoded}" alt="{escaped(title)}">'
            f"<figcaption>{escaped(title)} — <code>{escaped(path.relative_to(run.path).as_posix())}</code>"
            "</figcaption></figure>"
        )
    return "\n".join(parts)


def cost_section(run: RunContents) -> str:
    if run.table is None:
        return no_table(run)
    present = [c for c, _ in COST_PARTS if c in run.table.columns]
    intro = (
        "<p>Mean cost per replica and where it went; the parts add up to <code>cost_usd</code>.</p>"
        if present
        else "<p>Mean cost per replica. This run's table has no cost split "
        "(<code>cost_ideal_usd</code> … <code>cost_idle_spares_usd</code>): only the total.</p>"
    )
    return intro + split_table(
        run, "cost_usd", COST_PARTS, "cost_usd", "not accounted for by the parts"
    )


def downtime_section(run: RunContents) -> str:
    if run.table is None:
        return no_table(run)
    present = [c for c, _ in DOWNTIME_PARTS if c in run.table.columns]
    missing = [c for c, _ in DOWNTIME_PARTS if c not in run.table.columns]
    intro = "<p>Mean downtime per replica (hours), split by cause where the table records it"
    intro += (
        "; this run's table does not have "
        + ", ".join(f"<code>{escaped(c)}</code>" for c in missing)
        + ".</p>"
        if missing and present
        else ".</p>"
    )
    label = "other (not split in this run's table)" if missing else "not accounted for by the parts"
    return intro + split_table(run, "downtime_hours", DOWNTIME_PARTS, "downtime_hours", label)


def failures_section(run: RunContents) -> str:
    if run.table is None:
        return no_table(run)
    s = run.scenario_set.base
    columns = [
        f"failures_{f.name}" for f in s.failures if f"failures_{f.name}" in run.table.columns
    ]
    if not columns:
        return "<p class='note'>No failure classes in this scenario.</p>"
    means = point_means(run, ["failures", *columns])
    lemon = None
    if "failures_lemon" in run.table.columns:
        lemon = point_means(run, ["failures_lemon"])["failures_lemon"]
        lemon = lemon if (lemon > 0).any() else None
    intro = (
        "<p>Mean failures per replica by class, counted while the job runs, and each "
        "class's share.</p>" + first_points(run, MAX_POINT_COLUMNS)
    )
    if len(means) > 1:  # points as rows, a column per class: within the page
        headers = [points_header(run), *(c.removeprefix("failures_") for c in columns)]
        headers.append("all classes (failures)")
        headers += ["of which on nodes with a lasting fault"] if lemon is not None else []
        rows = []
        decimals = {c: column_decimals(means[c]) for c in ["failures", *columns]}
        lemon_decimals = column_decimals(lemon) if lemon is not None else None
        for p in means.index:
            total = means.loc[p, "failures"]
            rows.append(
                [
                    point_name(run, int(p)),
                    *(
                        share_text("failures", means.loc[p, c], total, "\n", decimals[c])
                        for c in columns
                    ),
                    number_in("failures", float(total), decimals["failures"]),
                    *(
                        [number_in("failures", float(lemon.loc[p]), lemon_decimals)]
                        if lemon is not None
                        else []
                    ),
                ]
            )
        return intro + html_table(headers, rows, numeric=set(range(1, len(headers))))
    headers = ["class", *(point_label(run, int(p)) for p in means.index)]
    rows, classes = [], []
    for column in columns:
        rows.append(
            [
                column.removeprefix("failures_"),
                *(
                    share_text("failures", means.loc[p, column], means.loc[p, "failures"])
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
    return intro + html_table(
        headers, rows, numeric=set(range(1, len(headers))), row_classes=classes
    )


def provenance_section(run: RunContents) -> str:
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
    return "<p>From <code>run.json</code>.</p>" + html_table(
        ["field", "value"], rows, numeric=set(), code={1}
    )
