"""Two runs side by side (`trainsim compare RUN_A RUN_B`): per metric of replicas.parquet,
the mean of A and of B, the difference B − A with a 95% confidence interval, the relative
difference and which run is better. Replicas pair up when both runs share the seed and
replica ids (the engine draws the same random streams for them: common random numbers);
otherwise the runs are independent samples and Welch's t interval applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.table import Table

from sim.decide import analysis, answer
from sim.model.columns import better_direction, unit_of
from sim.model.safe_yaml import read_yaml
from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError
from sim.runs import summaries
from sim.runs.manifest import read_manifest, resume_command

# Columns a replica table must have to be compared; those that identify a row, not measure it.
REQUIRED = ("point", "replica", "seed", "finished", "time_to_train_days")
IDENTITY = frozenset({"scenario", "point", "replica", "seed", "finished", "error"})
FINISHED = "finished_fraction"  # the share of replicas that finished: compared first
# written into RUN_B unless --figure says otherwise, named after run A (the report of B
# shows it with the other run's id)
FIGURE_PREFIX = "compare-with-"


def default_figure_name(run_a: Path) -> str:
    return f"{FIGURE_PREFIX}{run_a.name}.png"


MAX_PANELS = 12  # a figure with more matched points shows the first twelve


@dataclass(frozen=True)
class Run:
    """One side of a comparison: a run directory, its manifest and its replica table."""

    label: str  # "A" or "B"
    path: Path
    manifest: dict[str, Any]
    table: pd.DataFrame  # every row, error rows included
    swept_keys: list[str]

    @property
    def name(self) -> str:
        return str(self.manifest.get("scenario") or self.table["scenario"].iloc[0])

    @property
    def run_id(self) -> str:
        return self.path.resolve().name

    @property
    def ok(self) -> pd.DataFrame:
        """The rows without an error."""
        if "error" not in self.table:
            return self.table
        return self.table[self.table["error"].fillna("") == ""]

    def points(self) -> dict[int, dict[str, Any]]:
        """Each sweep point's swept values, as the table records them."""
        out = {}
        for point, rows in self.table.groupby("point", sort=True):
            first = rows.iloc[0]
            out[int(point)] = {k: _plain(first[k]) for k in self.swept_keys}
        return out

    def metrics(self) -> list[str]:
        """The numeric columns that measure a replica, public ones first."""
        names = [
            c
            for c in self.table.columns
            if c not in IDENTITY
            and c not in self.swept_keys
            and (
                pd.api.types.is_numeric_dtype(self.table[c])
                or pd.api.types.is_bool_dtype(self.table[c])
            )
        ]
        known = [m for m in summaries.metrics_of_names(names) if m in names]
        return known + [c for c in names if c not in known]


@dataclass(frozen=True)
class MetricComparison:
    """One metric of one matched pair of points: means, B − A with its 95% CI, the verdict."""

    metric: str
    direction: str  # max | min: which way is better (better_direction)
    mean_a: float
    mean_b: float
    difference: analysis.Difference
    relative: float  # (B − A) / |A|
    better: str | None  # "A", "B", "same", "unclear" (the CI includes 0), None (no values)


@dataclass(frozen=True)
class PointComparison:
    """A matched pair of sweep points (one point each when the runs do not sweep)."""

    point_a: int
    point_b: int
    params_a: dict[str, Any]
    params_b: dict[str, Any]
    method: str  # paired | welch
    pairing: str  # why, in words
    replicas_a: int
    replicas_b: int
    finished_a: int
    finished_b: int
    errors_a: int
    errors_b: int
    pairs: int | None  # replicas with a partner (paired), None for welch
    metrics: list[MetricComparison]
    notes: list[str]
    # each run's own finished times to train (the figure's distributions)
    days_a: np.ndarray = field(repr=False)
    days_b: np.ndarray = field(repr=False)

    def metric(self, name: str) -> MetricComparison:
        return next(m for m in self.metrics if m.metric == name)


@dataclass(frozen=True)
class Comparison:
    """What `trainsim compare` found: the runs, how points were matched, each pair."""

    a: Run
    b: Run
    matching: str
    pairs: list[PointComparison]
    unmatched_a: list[int]
    unmatched_b: list[int]
    only_in_a: list[str]  # metrics only one run has (different failure classes, versions)
    only_in_b: list[str]
    # keys of the resolved scenarios (beyond the sweep, the name, seed and replicas) whose
    # values differ: key → (A's value, B's value)
    differences: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    # each run's resolved scenario as dotted keys (a swept key: the file's value)
    values_a: dict[str, Any] = field(default_factory=dict)
    values_b: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- loading


def open_run(path: str | Path, label: str) -> Run:
    """A complete run directory (run.json and replicas.parquet), or a ScenarioError saying
    what was expected there."""
    path = Path(path)
    expected = (
        "expected a run directory written by `trainsim run` "
        "(results/<name>/<run-id>/ with run.json and replicas.parquet)"
    )
    manifest = read_manifest(path, expected, prefix=f"run {label} ")
    table_path = path / "replicas.parquet"
    if not table_path.is_file():
        status = manifest.get("status")
        if status in ("running", "interrupted", "failed"):
            hint = (
                f"the run is {status} and has no replicas.parquet yet; complete it with "
                f"`{resume_command(path)}`"
            )
        else:
            hint = "it has no replicas.parquet (the replica table of a complete run)"
        raise ScenarioError(str(path), "", f"run {label}: {hint}")
    try:
        table = pd.read_parquet(table_path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad file
        raise ScenarioError(
            str(table_path), "", f"run {label}: cannot read the replica table ({exc})"
        ) from None
    missing = [c for c in REQUIRED if c not in table.columns]
    if missing:
        raise ScenarioError(
            str(table_path),
            "",
            f"run {label}: the table lacks the columns {', '.join(missing)}: expected the "
            "replica table of `trainsim run` (one row per replica with its metrics)",
        )
    if table.empty:
        raise ScenarioError(str(table_path), "", f"run {label}: the replica table has no rows")
    wrong = [
        c
        for c in REQUIRED
        if not (pd.api.types.is_numeric_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c]))
    ]
    if wrong:
        raise ScenarioError(
            str(table_path),
            "",
            f"run {label}: the columns {', '.join(wrong)} are not numbers: expected the replica "
            "table of `trainsim run`",
        )
    return Run(label, path, manifest, table, _swept_keys(path, table))


def _swept_keys(path: Path, table: pd.DataFrame) -> list[str]:
    """The swept keys from the resolved scenario; dotted column names if it is unreadable."""
    try:
        sweep = read_yaml(path / "scenario.yaml").get("sweep") or {}
        keys = [k for k in sweep if k in table.columns]
    except ScenarioError:
        keys = []
    return keys or [c for c in table.columns if "." in c]


# --------------------------------------------------------------------------- comparing


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    point_a: int | None = None,
    point_b: int | None = None,
) -> Comparison:
    """Compare two run directories, B against A (differences are B − A).

    Points are matched as follows: one point each (or `point_a` and `point_b` chosen) →
    that pair; one run with one point → that point against each point of the other; both
    sweeping the same keys → the points with equal swept values. Runs sweeping different
    keys need `point_a` and `point_b`.
    """
    a, b = open_run(run_a, "A"), open_run(run_b, "B")
    pairs, matching, unmatched_a, unmatched_b = _match(a, b, point_a, point_b)
    metrics_a, metrics_b = a.metrics(), b.metrics()
    common = [m for m in metrics_a if m in metrics_b]
    return Comparison(
        a,
        b,
        matching,
        [_compare_points(a, b, pa, pb, common) for pa, pb in pairs],
        unmatched_a,
        unmatched_b,
        [m for m in metrics_a if m not in metrics_b],
        [m for m in metrics_b if m not in metrics_a],
        *scenario_differences(a, b),
    )


# keys of a resolved scenario that do not describe the simulated job
NOT_COMPARED = frozenset({"name", "description", "sweep", "simulation.seed", "simulation.replicas"})


def scenario_differences(
    a: Run, b: Run
) -> tuple[dict[str, tuple[Any, Any]], dict[str, Any], dict[str, Any]]:
    """The keys whose values differ between the two runs' resolved scenarios (dotted; a
    failure class by its name), leaving out the swept keys (each point says those), the
    name, description, seed and replicas; and each scenario as dotted keys. Values are
    compared as the simulation used them: after the storage presets and the defaults
    (`replace` unset is true on both sides, not true against nothing). All empty when a
    scenario.yaml is unreadable."""
    try:
        docs = [_flatten(_resolved(r.path / "scenario.yaml")) for r in (a, b)]
    except ScenarioError:
        return {}, {}, {}
    swept = set(a.swept_keys) | set(b.swept_keys)
    out = {}
    for key in sorted(set(docs[0]) | set(docs[1])):
        if key in NOT_COMPARED or key in swept or any(key.startswith(f"{k}.") for k in swept):
            continue
        x, y = docs[0].get(key), docs[1].get(key)
        if not _same(x, y):
            out[key] = (x, y)
    return out, docs[0], docs[1]


def _resolved(path: Path) -> dict[str, Any]:
    """A run's scenario as it was simulated: its base (the sweep left out) with every
    default and preset filled in, by the keys a scenario file uses; as written when it no
    longer loads (a scenario of an older version)."""
    document = {k: v for k, v in read_yaml(path).items() if k != "sweep"}
    try:
        base = load_document(document, str(path)).base
    except ScenarioError:
        return document
    return base.model_dump(mode="json", by_alias=True)


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """A YAML mapping as dotted keys; a list of mappings with names (failure classes) by name."""
    out: dict[str, Any] = {}
    if isinstance(doc, dict):
        for key, value in doc.items():
            out.update(_flatten(value, f"{prefix}{key}."))
    elif isinstance(doc, list) and doc and all(isinstance(v, dict) and "name" in v for v in doc):
        for item in doc:
            out.update(
                _flatten({k: v for k, v in item.items() if k != "name"}, f"{prefix}{item['name']}.")
            )
    else:
        out[prefix.rstrip(".")] = doc
    return out


def _match(
    a: Run, b: Run, point_a: int | None, point_b: int | None
) -> tuple[list[tuple[int, int]], str, list[int], list[int]]:
    points_a, points_b = a.points(), b.points()
    for run, points, chosen, flag in ((a, points_a, point_a, "--point-a"), (b, points_b, point_b, "--point-b")):  # fmt: skip
        if chosen is not None and chosen not in points:
            raise ScenarioError(
                str(run.path),
                flag,
                f"run {run.label} has no sweep point {chosen}; its points are "
                f"{', '.join(str(p) for p in points)}",
            )
    if point_a is not None:
        points_a = {point_a: points_a[point_a]}
    if point_b is not None:
        points_b = {point_b: points_b[point_b]}
    if len(points_a) == 1 or len(points_b) == 1:
        pairs = [(pa, pb) for pa in points_a for pb in points_b]
        if len(pairs) == 1:
            how = "one point of each run"
        elif len(points_a) == 1:
            how = f"A's point {pairs[0][0]} against each of B's {len(points_b)} points"
        else:
            how = f"each of A's {len(points_a)} points against B's point {pairs[0][1]}"
        return pairs, how, [], []
    if a.name != b.name:
        raise ScenarioError(
            f"{a.path} and {b.path}",
            "",
            f"the runs are of different scenarios ({a.name}, {b.name}): their sweep points are "
            "not matched by swept values; choose one point of each with --point-a I --point-b J",
        )
    if set(a.swept_keys) != set(b.swept_keys):
        raise ScenarioError(
            f"{a.path} and {b.path}",
            "",
            f"the runs sweep different keys (A: {', '.join(a.swept_keys) or 'none'}; B: "
            f"{', '.join(b.swept_keys) or 'none'}), so their points cannot be matched by "
            "swept values: choose one point of each with --point-a I --point-b J",
        )
    pairs = [
        (pa, pb)
        for pa, params_a in points_a.items()
        for pb, params_b in points_b.items()
        if all(_same(params_a[k], params_b[k]) for k in a.swept_keys)
    ]
    if not pairs:
        raise ScenarioError(
            f"{a.path} and {b.path}",
            "",
            f"no sweep point of A has the swept values of a point of B ({', '.join(a.swept_keys)}): "
            "choose one point of each with --point-a I --point-b J",
        )
    matched_a, matched_b = {pa for pa, _ in pairs}, {pb for _, pb in pairs}
    how = f"points matched by their values of {', '.join(a.swept_keys)}"
    return (
        pairs,
        how,
        [p for p in points_a if p not in matched_a],
        [p for p in points_b if p not in matched_b],
    )


def _compare_points(a: Run, b: Run, pa: int, pb: int, metrics: list[str]) -> PointComparison:
    rows_a, rows_b = a.table[a.table["point"] == pa], b.table[b.table["point"] == pb]
    good_a, good_b = a.ok[a.ok["point"] == pa], b.ok[b.ok["point"] == pb]
    ok_a, ok_b = good_a.set_index("replica"), good_b.set_index("replica")
    seeds_a, seeds_b = set(rows_a["seed"].unique()), set(rows_b["seed"].unique())
    common = ok_a.index.intersection(ok_b.index)
    notes = []
    same_scenario = a.name == b.name  # replicas of two scenarios draw unrelated streams
    if same_scenario and len(seeds_a) == 1 and seeds_a == seeds_b and len(common) >= 2:
        method = "paired"
        pairing = (
            f"paired by replica: both runs use seed {_seeds(seeds_a)} and the same replica "
            "ids, so replica r of A and of B drew the same failure streams (common random "
            "numbers)"
        )
        for label, count in (("A", len(ok_a) - len(common)), ("B", len(ok_b) - len(common))):
            if count:
                notes.append(
                    f"{_plural(count, 'replica')} of {label} "
                    f"{'has' if count == 1 else 'have'} no partner in the other run: left out"
                )
        ok_a, ok_b = ok_a.loc[common], ok_b.loc[common]
    else:
        method = "welch"
        why = (
            f"the runs are of different scenarios ({a.name}, {b.name})"
            if not same_scenario
            else f"the seeds differ (A {_seeds(seeds_a)}, B {_seeds(seeds_b)})"
            if seeds_a != seeds_b
            else "the runs have fewer than two replica ids in common"
        )
        pairing = f"independent samples, Welch's t interval: {why}"
    results = [_compare_metric(FINISHED, ok_a["finished"], ok_b["finished"], method)]
    results += [_compare_metric(m, ok_a[m], ok_b[m], method) for m in metrics]
    ttt = next(m.difference for m in results if m.metric == "time_to_train_days")
    dropped_a, dropped_b = len(ok_a) - ttt.n_a, len(ok_b) - ttt.n_b
    if method == "paired" and dropped_a:
        notes.append(
            f"time to train compares the {ttt.n_a:,} replicas that finished in both runs "
            f"({dropped_a:,} of {len(ok_a):,} pairs dropped: a replica that does not finish has "
            "no time to train); compare the finished share too"
        )
    elif method == "welch" and (dropped_a or dropped_b):
        notes.append(
            f"time to train is over finished replicas only ({dropped_a:,} of A and "
            f"{dropped_b:,} of B dropped: a replica that does not finish has no time to "
            "train); compare the finished share too"
        )
    errors_a, errors_b = len(rows_a) - len(good_a), len(rows_b) - len(good_b)
    for label, count in (("A", errors_a), ("B", errors_b)):
        if count:
            notes.append(
                f"{_plural(count, 'error row')} of {label} left out (see its `error` column)"
            )
    return PointComparison(
        point_a=pa,
        point_b=pb,
        params_a=a.points()[pa],
        params_b=b.points()[pb],
        method=method,
        pairing=pairing,
        replicas_a=len(rows_a),
        replicas_b=len(rows_b),
        finished_a=int(rows_a["finished"].sum()),
        finished_b=int(rows_b["finished"].sum()),
        errors_a=errors_a,
        errors_b=errors_b,
        pairs=len(ok_a) if method == "paired" else None,
        metrics=results,
        notes=notes,
        days_a=_finished_days(good_a),
        days_b=_finished_days(good_b),
    )


def _compare_metric(metric: str, a: pd.Series, b: pd.Series, method: str) -> MetricComparison:
    a = a.astype(float)
    b = b.astype(float)
    if method == "paired":
        both = pd.concat([a.rename("a"), b.rename("b")], axis=1).dropna()
        x, y = both["a"].to_numpy(), both["b"].to_numpy()
        diff = analysis.paired_difference(x, y)
    else:
        x, y = a.dropna().to_numpy(), b.dropna().to_numpy()
        diff = analysis.welch_difference(x, y)
    mean_a = float(x.mean()) if x.size else math.nan
    mean_b = float(y.mean()) if y.size else math.nan
    direction = better_direction(metric)
    better = _verdict(diff, direction, max(abs(mean_a), abs(mean_b)))
    if better == "same":
        relative = 0.0
    else:
        relative = diff.estimate / abs(mean_a) if x.size and mean_a != 0 else math.nan
    return MetricComparison(metric, direction, mean_a, mean_b, diff, relative, better)


# Differences within this share of the values are the float noise of sums, not a finding.
NOISE = 1e-9


def _verdict(diff: analysis.Difference, direction: str, scale: float) -> str | None:
    """Which run is better: only when the 95% CI of B − A excludes 0."""
    if not math.isfinite(diff.estimate):
        return None
    tolerance = NOISE * max(scale, 1e-300)
    if abs(diff.estimate) <= tolerance and (
        diff.low == diff.high or abs(diff.high - diff.low) <= tolerance
    ):
        return "same"
    if not (math.isfinite(diff.low) and math.isfinite(diff.high)):
        return "unclear"
    lower_is_b = diff.high < 0  # B's values are lower than A's
    higher_is_b = diff.low > 0
    if not (lower_is_b or higher_is_b):
        return "unclear"
    b_better = lower_is_b if direction == "min" else higher_is_b
    return "B" if b_better else "A"


def _finished_days(rows: pd.DataFrame) -> np.ndarray:
    return rows["time_to_train_days"].dropna().to_numpy(dtype=float)


def _same(x: Any, y: Any) -> bool:
    if _missing(x) or _missing(y):
        return _missing(x) and _missing(y)
    if isinstance(x, int | float | np.number) and isinstance(y, int | float | np.number):
        return math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=0.0)
    return x == y


def _text(value: Any) -> str:
    """A scenario value as a title shows it: 'unset' for a key the scenario leaves empty
    (an alternative it does not use, such as interval_steps beside interval_minutes)."""
    return "unset" if _missing(value) else answer.value_text(value)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and math.isnan(value))


def _plain(value: Any) -> Any:
    """A swept value as plain Python (None for a missing value)."""
    if value is pd.NA or _missing(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _seeds(seeds: set) -> str:
    return ", ".join(str(s) for s in sorted(seeds))


# --------------------------------------------------------------------------- output


def to_json(comparison: Comparison, figure: Path | None = None) -> dict[str, Any]:
    """The `--json` document: the runs, the matching and per pair every metric."""

    def run(r: Run) -> dict[str, Any]:
        return {
            "run_dir": str(r.path),
            "run_id": r.run_id,
            "scenario": r.name,
            "seed": r.manifest.get("seed"),
            "replicas": r.manifest.get("replicas"),
            "points": len(r.points()),
            "swept_keys": r.swept_keys,
        }

    def metric(m: MetricComparison) -> dict[str, Any]:
        return {
            "direction": m.direction,
            "unit": unit_of(m.metric),
            "mean_a": _number(m.mean_a),
            "mean_b": _number(m.mean_b),
            "difference": _number(m.difference.estimate),
            "ci_low": _number(m.difference.low),
            "ci_high": _number(m.difference.high),
            "df": _number(m.difference.df),
            "relative": _number(m.relative),
            "better": m.better,
            "n_a": m.difference.n_a,
            "n_b": m.difference.n_b,
        }

    return {
        "a": run(comparison.a),
        "b": run(comparison.b),
        "matching": comparison.matching,
        "pairs": [
            {
                "point_a": p.point_a,
                "point_b": p.point_b,
                "params_a": p.params_a,
                "params_b": p.params_b,
                "method": p.method,
                "pairing": p.pairing,
                "replicas_a": p.replicas_a,
                "replicas_b": p.replicas_b,
                "finished_a": p.finished_a,
                "finished_b": p.finished_b,
                "errors_a": p.errors_a,
                "errors_b": p.errors_b,
                "pairs": p.pairs,
                "notes": p.notes,
                "metrics": {m.metric: metric(m) for m in p.metrics},
            }
            for p in comparison.pairs
        ],
        "unmatched_a": [
            {"point": p, "params": comparison.a.points()[p]} for p in comparison.unmatched_a
        ],
        "unmatched_b": [
            {"point": p, "params": comparison.b.points()[p]} for p in comparison.unmatched_b
        ],
        "only_in_a": comparison.only_in_a,
        "only_in_b": comparison.only_in_b,
        "figure": str(figure) if figure is not None else None,
    }


# What `compare` shows by default (with every metric whose CI excludes zero): the answer's
# figures. `--all` shows every metric.
HEADLINE = (
    FINISHED,
    "time_to_train_days",
    "cost_usd",
    "goodput",
    "lost_work_hours",
    "checkpoint_stall_hours",
    "downtime_hours",
)


def shown(pair: PointComparison, every: bool = False) -> list[MetricComparison]:
    """The metrics a pair's table shows: the headline ones and those with a clear winner
    (their 95% CI excludes zero), or every one."""
    if every:
        return pair.metrics
    out = [m for m in pair.metrics if m.metric in HEADLINE or m.better in ("A", "B")]
    if pair.finished_a == pair.replicas_a and pair.finished_b == pair.replicas_b:
        # every replica finished: wall time is the time to train, in hours (shown once)
        out = [m for m in out if m.metric != "wall_hours"]
    return out


def _sides(comparison: Comparison, pair: PointComparison, key: str) -> tuple[Any, Any]:
    """A key's value on each side: the point's swept value, else the run's scenario value."""
    x = pair.params_a[key] if key in pair.params_a else comparison.values_a.get(key)
    y = pair.params_b[key] if key in pair.params_b else comparison.values_b.get(key)
    return x, y


def pair_title(comparison: Comparison, pair: PointComparison) -> str:
    """What differs between the two sides, by value: 'interval_steps=500 vs 1000'; what
    they share as context ('at interval_minutes=60'); 'same scenario' when nothing differs."""
    keys = list(dict.fromkeys([*pair.params_a, *pair.params_b, *comparison.differences]))
    names = answer.short_keys(keys)
    differ, shared = [], []
    for key in keys:
        x, y = _sides(comparison, pair, key)
        if _same(x, y):
            shared.append(f"{names[key]}={_text(x)}")
        else:
            differ.append(f"{names[key]}={_text(x)} vs {_text(y)}")
    title = "; ".join(differ) if differ else "the same scenario values"
    if shared:
        title += f" (at {', '.join(shared)})"
    return title


def side_labels(comparison: Comparison, pair: PointComparison) -> tuple[str, str]:
    """Column headers naming each side by its differing values ('A: 500', 'B: 1000'), or
    'A mean' / 'B mean' when that would be long."""
    keys = list(dict.fromkeys([*pair.params_a, *pair.params_b, *comparison.differences]))
    sides = [_sides(comparison, pair, k) for k in keys]
    differ = [(x, y) for x, y in sides if not _same(x, y)]
    values_a = [_text(x) for x, _ in differ]
    a, b = ", ".join(values_a), ", ".join(_text(y) for _, y in differ)
    if not values_a or max(len(a), len(b)) > 18:
        return "A mean", "B mean"
    return f"A: {a}", f"B: {b}"


def tables(comparison: Comparison, every: bool = False) -> list[Table | str]:
    """What the command prints: a heading, then per matched pair a table with its notes:
    the headline metrics and those that clearly differ, or `every` one."""
    a, b = comparison.a, comparison.b
    out: list[Table | str] = [
        f"A: {a.path}  ({a.name}, seed {a.manifest.get('seed')}, {len(a.points())} point(s))",
        f"B: {b.path}  ({b.name}, seed {b.manifest.get('seed')}, {len(b.points())} point(s))",
        f"{comparison.matching}; differences are B − A, with 95% confidence intervals",
    ]
    for run, unmatched in ((a, comparison.unmatched_a), (b, comparison.unmatched_b)):
        if unmatched:
            listed = "; ".join(f"{p} ({_params(run.points()[p])})" for p in unmatched)
            out.append(f"points of {run.label} with no match in the other run: {listed}")
    hidden_total = 0
    for pair in comparison.pairs:
        title = (
            f"{pair_title(comparison, pair)}  —  A {pair.replicas_a:,} replicas, "
            f"{pair.finished_a:,} finished; B {pair.replicas_b:,} replicas, "
            f"{pair.finished_b:,} finished"
        )
        table = Table(title=title, title_justify="left", caption_justify="left")
        label_a, label_b = side_labels(comparison, pair)
        metrics = shown(pair, every)
        counts = {
            str(m.difference.n_a)
            if pair.method == "paired"
            else f"{m.difference.n_a} / {m.difference.n_b}"  # fmt: skip
            for m in metrics
        }
        with_n = len(counts) > 1  # else the caption says n once
        # each metric by its name in words (docs/metrics.md); --json keeps the column names
        widest = max((len(answer.metric_name(m.metric)) for m in metrics), default=6)
        table.add_column("metric", min_width=widest, no_wrap=True)
        for column in [label_a, label_b, "B − A", "95% CI", "relative", "better", *(["n"] if with_n else [])]:  # fmt: skip
            # a value and its unit, an interval, or words may wrap at their spaces
            # (sim/show/console.py); the metric, the relative difference and n stay whole
            wraps = column not in ("relative", "n")
            table.add_column(
                column,
                justify="left" if column == "better" else "right",
                overflow="fold" if wraps else "ellipsis",
            )
        hidden_total += len(pair.metrics) - len(metrics)
        for m in metrics:
            d = m.difference
            n = str(d.n_a) if pair.method == "paired" else f"{d.n_a} / {d.n_b}"
            quiet = m.mean_a == 0 and m.mean_b == 0
            table.add_row(
                answer.metric_name(m.metric),
                answer.readable(m.metric, m.mean_a),
                answer.readable(m.metric, m.mean_b),
                answer.readable(m.metric, d.estimate, signed=True),
                answer.readable_interval(
                    m.metric, d.low, d.high, unit=answer.common_unit(m.metric, [d.estimate])
                ),
                (f"{m.relative:+.2%}" if m.relative else "0%")
                if math.isfinite(m.relative)
                else "—",
                _better_words(m),
                *([n] if with_n else []),
                style="dim" if quiet or m.better is None else None,
            )
        size = [] if with_n or not counts else [f"n = {counts.pop()} ({'pairs of replicas' if pair.method == 'paired' else 'replicas of A / of B'})"]  # fmt: skip
        table.caption = "\n".join([pair.pairing, *size, *pair.notes])
        out.append(table)
    if hidden_total:
        out.append(
            f"{hidden_total} more metric row(s) with no clear difference (the 95% CI includes "
            "zero, or the values are the same): --all shows every metric"
        )
    if comparison.only_in_a or comparison.only_in_b:
        out.append(
            "not compared (in one run only): "
            + "; ".join(
                f"{label}: {', '.join(names)}"
                for label, names in (("A", comparison.only_in_a), ("B", comparison.only_in_b))
                if names
            )
        )
    return out


def _better_words(m: MetricComparison) -> str:
    if m.better in ("A", "B"):
        return f"{m.better} ({'higher' if m.direction == 'max' else 'lower'})"
    return {"same": "same", "unclear": "unclear", None: "—"}[m.better]


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={answer.value_text(v)}" for k, v in params.items()) or "no swept keys"


def fmt_metric(metric: str, value: float, signed: bool = False) -> str:
    """A metric's value: dollars for costs, a percentage for the finished share."""
    if value is None or not math.isfinite(value):
        return "—"
    sign = "+" if signed and value > 0 else ("-" if value < 0 else "")
    magnitude = abs(value)
    if metric == FINISHED:
        return f"{sign}{magnitude:.1%}"
    if unit_of(metric) == "USD":
        return answer.dollars(sign, magnitude)
    text = answer.figure(magnitude)
    return text if text == "0" else sign + text


def _number(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
