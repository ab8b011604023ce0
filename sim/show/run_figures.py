"""The standard figures of a run directory (figures/): what they read from its table, within
bounds, and the checkpoint theory's marks on a swept interval; `write_run_figures` is what
`sim.runs.api` is handed to draw them when a run is finalised (`figures=`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from sim.model import perf, reliability
from sim.model.scenario_set import ScenarioSet
from sim.model.schema import Scenario
from sim.runs.results import RunDir
from sim.show import plots

# the columns the standard figures read (not the whole table)
FIGURE_COLUMNS = plots.TABLE_COLUMNS


def write_run_figures(
    run: RunDir,
    scenario_set: ScenarioSet,
    table_path: Path,
    light: pd.DataFrame,
    summary: pd.DataFrame,
) -> None:
    """Draw the standard figures of a finalised run's table into its figures/: `light` is
    the table's point, finished and error columns, `summary` its summary table."""
    manifest = run.manifest
    keys = scenario_set.varied_keys  # the figures' axes: keys with several values
    # a table of an older version lacks some columns: their figures are skipped
    names = set(pq.read_schema(table_path).names)
    marks = {key: interval_marks(scenario_set.runnable_base, key) for key in keys}
    rows, means = figure_inputs(table_path, names, keys, light, scenario_set.name)
    plots.write_figures(
        rows,
        summary,
        run.path / "figures",
        keys,
        marks,
        label=plots.run_label(
            scenario_set.name,
            manifest.get("overrides") or [],
            scenario_set.resolved.get("sweep"),
        ),
        means=means,
    )


# the columns the distribution figures draw for every replica; the bar figures read only
# each point's mean of the other FIGURE_COLUMNS
DISTRIBUTION_COLUMNS = ["point", "finished", "time_to_train_days", "ideal_hours", "lost_work_hours"]


def figure_inputs(
    table_path: Path, names: set[str], keys: list[str], light: pd.DataFrame, scenario: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What `plots.write_figures` draws, read within bounds: the replicas' rows of the few
    columns the distributions need (error rows dropped), and one row per point with the
    mean of every breakdown column, each read from the table one column at a time. Memory
    grows with the replicas by a few columns, not by the table's sixty."""
    ok = (light["error"] == "").to_numpy()
    wanted = [c for c in dict.fromkeys([*DISTRIBUTION_COLUMNS, *keys]) if c in names]
    rows = pd.read_parquet(table_path, columns=wanted)[ok].reset_index(drop=True)
    rows["scenario"] = pd.Categorical.from_codes([0] * len(rows), categories=[scenario])
    points, codes = np.unique(rows["point"].to_numpy(), return_inverse=True)
    means = rows.groupby("point", sort=True, observed=True)[["scenario", *keys]].first()
    means = means.reset_index()
    for column in (c for c in FIGURE_COLUMNS if c in names and c not in ("point", "finished")):
        values = pq.read_table(table_path, columns=[column]).column(0)
        values = values.to_numpy(zero_copy_only=False).astype(float, copy=False)[ok]
        valid = ~np.isnan(values)
        sums = np.bincount(codes[valid], weights=values[valid], minlength=len(points))
        counts = np.bincount(codes[valid], minlength=len(points))
        means[column] = np.divide(sums, counts, out=np.full(len(points), np.nan), where=counts > 0)
    return rows, means


def interval_marks(scenario: Scenario, swept_key: str) -> dict[str, float]:
    """Young's and Daly's intervals in the unit of the swept checkpoint key (empty if none)."""
    seconds = {
        name: reliability.theory_interval_s(scenario, name.lower()) for name in ("Young", "Daly")
    }
    if not all(math.isfinite(v) for v in seconds.values()):
        return {}
    if swept_key == "checkpoint.interval_steps":
        step_s = perf.step_time_s(scenario)
        return {k: v / step_s for k, v in seconds.items()}
    if swept_key == "checkpoint.interval_minutes":
        return {k: v / 60.0 for k, v in seconds.items()}
    return {}
