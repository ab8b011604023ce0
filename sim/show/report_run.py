"""A run directory as the report reads it (`RunContents`, every file read within bounds: the
manifest, the scenario, the table's few columns, plan.json, the figures), and its sweep
points named, counted and split into tables no wider than the page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.decide import answer
from sim.decide.compare import FIGURE_PREFIX, fmt_metric
from sim.model.columns import COST_COLUMNS, DOWNTIME_COLUMNS
from sim.model.scenario import load_scenario
from sim.model.scenario_set import Point, ScenarioError, ScenarioSet
from sim.runs import summaries
from sim.runs.files import read_bounded
from sim.runs.manifest import read_manifest, resume_command
from sim.show.report_html import (
    column_decimals,
    escaped,
    html_table,
    number_in,
    params_text,
    share_text,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The parts of cost_usd and of downtime_hours (sim.model.columns), shown when the table has them.
COST_PARTS = [
    (c, c.removeprefix("cost_").removesuffix("_usd").replace("_", " ")) for c in COST_COLUMNS
]
DOWNTIME_PARTS = [(c, c.removesuffix("_hours").replace("_", " ")) for c in DOWNTIME_COLUMNS]

# A run's figures (plots.write_figures, plan_plots) in the order the report shows them, with
# their captions; a sweep's figures of a metric follow these, the others by name.
FIGURE_TITLES = {
    "time_to_train_cdf.png": "Time-to-train distribution (unfinished replicas keep a curve below 1)",
    "wall_time_breakdown.png": "Where the wall time went (mean per replica)",
    "cost_breakdown.png": "Where the money went (mean per replica)",
    "downtime_split.png": "Downtime by cause (mean per replica)",
    "lost_work.png": "Lost work per run",
    "pareto.png": "Plan: time to train against cost, and the Pareto front",
}
# A sweep's figures of a metric, `<prefix><metric>.png`: captioned by the metric's name in
# words (docs/metrics.md), the time to train first.
METRIC_FIGURES = {
    "sweep_": "Mean {} across the sweep, with 95% CI",
    "heatmap_": "Mean {} over the two swept keys, the best point outlined",
}
METRIC_ORDER = ("time_to_train_days", "cost_usd", "goodput", "lost_work_hours")


def figure_title(name: str) -> str:
    """A figure's caption from its file's name: a known figure's, a sweep's figure of a metric
    in the metric's words (sweep_cost_usd.png: 'Mean cost across the sweep, with 95% CI'),
    any other by the words of its name."""
    if name in FIGURE_TITLES:
        return FIGURE_TITLES[name]
    stem = name.removesuffix(".png")
    for prefix, words in METRIC_FIGURES.items():
        if stem.startswith(prefix) and stem != prefix:
            return words.format(answer.metric_words(stem.removeprefix(prefix)))
    return stem.replace("_", " ").strip().capitalize()


def figure_rank(name: str) -> tuple[int, int, str]:
    """Where a figure comes in the report: the known ones in FIGURE_TITLES' order, then a
    sweep's curves and heatmaps in METRIC_ORDER, then the others by name."""
    known = list(FIGURE_TITLES)
    if name in known:
        return known.index(name), 0, name
    stem = name.removesuffix(".png")
    for group, prefix in enumerate(METRIC_FIGURES, start=len(known)):
        metric = stem.removeprefix(prefix)
        if metric != stem:
            rank = METRIC_ORDER.index(metric) if metric in METRIC_ORDER else len(METRIC_ORDER)
            return group, rank, name
    return len(known) + len(METRIC_FIGURES), 0, name


# A sweep of many points: the tables with a column (or a summary) per point show the first
# ones; the sweep table has a row for every point.
MAX_POINT_COLUMNS = 12
MAX_POINT_SUMMARIES = 24


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
            table, replicas, errors, summary, per_point = read_table(
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
    # a figures/ that is a link is not the run's: never followed (it could lead anywhere)
    folder = path / "figures"
    figures = sorted(
        [] if folder.is_symlink() else folder.glob("*.png"), key=lambda f: figure_rank(f.name)
    ) + sorted(path.glob(f"{FIGURE_PREFIX}*.png"))
    return RunContents(
        path, manifest, scenario_set, table, replicas, errors, summary, plan, figures, per_point
    )


def read_table(
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


def no_table(run: RunContents) -> str:
    status = run.manifest.get("status", "unknown")
    return (
        f'<p class="warning">No replicas.parquet: the run is {escaped(status)}. Complete it with '
        f"<code>{escaped(resume_command(run.path))}</code> and write the report again.</p>"
    )


# the largest figure and plan.json a report reads (trainsim's are ~100 kB and a few kB)
MAX_FIGURE_BYTES = 50_000_000
MAX_PLAN_BYTES = 50_000_000


def point_means(run: RunContents, columns: list[str]) -> pd.DataFrame:
    """Means per replica of the first MAX_POINT_COLUMNS points."""
    assert run.table is not None
    return run.table.groupby("point", sort=True)[columns].mean().iloc[:MAX_POINT_COLUMNS]


def infeasible_points(run: RunContents) -> list[Point]:
    """The run's points that cannot run (of its `--points` slice, if it has one)."""
    chosen = run.manifest.get("points_slice")
    within = range(*chosen) if isinstance(chosen, list) and len(chosen) == 2 else None
    return [
        p
        for p in run.scenario_set.points
        if p.infeasible is not None and (within is None or p.index in within)
    ]


def infeasible_note(run: RunContents) -> str:
    """A note naming the infeasible points and why (empty when every point can run)."""
    cannot = infeasible_points(run)
    if not cannot:
        return ""
    listed = "; ".join(f"point {p.index} ({params_text(p.params)}): {p.infeasible}" for p in cannot)
    return (
        f"<p class='note'>{len(cannot)} infeasible point(s), not simulated (the configuration "
        f"cannot run): {escaped(listed)}.</p>"
    )


def first_points(run: RunContents, shown: int) -> str:
    total = len(run.scenario_set.points)
    if total <= shown:
        return ""
    return (
        f"<p class='note'>The first {shown} of {total} sweep points; the sweep table has "
        "every point.</p>"
    )


def split_table(
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
    means = point_means(run, [total, *(c for c, _ in present)])
    note = first_points(run, MAX_POINT_COLUMNS)
    rest = means[total] - means[[c for c, _ in present]].sum(axis=1)
    has_rest = bool(present) and bool(
        (rest.abs() > 1e-9 * means[total].abs().clip(lower=1.0)).any()
    )
    if len(means) > 1:
        shown = [(c, label) for c, label in present if (means[c].abs() > 0).any()]
        headers = [points_header(run), *(label for _, label in shown)]
        headers += [missing_label] if has_rest else []
        headers.append(f"total ({total})")
        rows = []
        decimals = {c: column_decimals(means[c]) for c, _ in shown}
        rest_decimals, total_decimals = column_decimals(rest), column_decimals(means[total])
        for p in means.index:
            total_value = means.loc[p, total]
            cells = [
                share_text(metric_unit, means.loc[p, c], total_value, "\n", decimals[c])
                for c, _ in shown
            ]
            if has_rest:
                cells.append(share_text(metric_unit, rest.loc[p], total_value, "\n", rest_decimals))
            total_text = number_in(metric_unit, float(total_value), total_decimals)
            rows.append([point_name(run, int(p)), *cells, total_text])
        left_out = [label for c, label in present if (means[c].abs() == 0).all()]
        if left_out:
            note += f"<p class='note'>Zero at every point: {escaped(', '.join(left_out))}.</p>"
        return note + html_table(headers, rows, numeric=set(range(1, len(headers))))
    headers = ["part", *(point_label(run, int(p)) for p in means.index)]
    rows, classes = [], []
    for column, label in present:
        rows.append(
            [
                f"{label} ({column})",
                *(
                    share_text(metric_unit, means.loc[p, column], means.loc[p, total])
                    for p in means.index
                ),
            ]
        )
        classes.append("")
    if has_rest:
        rows.append(
            [
                missing_label,
                *(share_text(metric_unit, rest.loc[p], means.loc[p, total]) for p in means.index),
            ]
        )
        classes.append("")
    rows.append(
        [f"total ({total})", *(fmt_metric(metric_unit, means.loc[p, total]) for p in means.index)]
    )
    classes.append("total")
    return note + html_table(
        headers, rows, numeric=set(range(1, len(headers))), row_classes=classes
    )


def points_header(run: RunContents) -> str:
    """The header of a column of point names: the swept keys by their short endings."""
    return " / ".join(answer.short_keys(run.scenario_set.varied_keys).values()) or "point"


def point_name(run: RunContents, point: int) -> str:
    """A point by its swept values (short keys), as a row of a table by point names it."""
    keys = run.scenario_set.varied_keys
    return answer.params_text(run.scenario_set.points[point].params, keys) or str(point)


def point_label(run: RunContents, point: int) -> str:
    params = run.scenario_set.points[point].params
    return params_text(params) if params else "mean per replica"
