"""Monte Carlo: replicas × sweep points, on an executor, gathered in chunks.

Replica r uses the same random streams at every sweep point (common random
numbers) and for every executor and worker count, so results are identical
however the work is split. A replica that raises becomes an error row (its
exception text in `error`) and a loud warning, never a dead sweep.
"""

from __future__ import annotations

import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from sim.engine import ReplicaPlan, build_plan, simulate_replica
from sim.scenario import ScenarioSet

# The public columns of replicas.parquet, in order (docs/metrics.md defines each).
COLUMNS = [
    "scenario",
    "point",
    "replica",
    "seed",
    "finished",
    "time_to_train_days",
    "wall_hours",
    "ideal_hours",
    "slowdown_hours",
    "lost_work_hours",
    "checkpoint_stall_hours",
    "downtime_hours",
    "goodput",
    "effective_mfu",
    "failures",
    "checkpoints_written",
    "checkpoints_lost",
    "checkpoint_GB_written",
    "storage_peak_TB",
    "backup_lag_hours",
    "restores_from_backup",
    "restarts",
    "nodes_replaced",
    "nodes_retired",
    "lemons_retired",
    "failures_lemon",
    "nodes_from_pool",
    "preemptions",
    "nodes_drained",
    "node_wait_hours",
    "lost_gpu_hours",
    "gpu_hours",
    "cost_usd",
]

EXECUTORS = ("serial", "processes")


@dataclass(frozen=True)
class Chunk:
    point: int
    params: dict[str, Any]
    plan: ReplicaPlan
    first_replica: int
    replicas: int
    seed: int


def run_chunk(chunk: Chunk) -> list[dict]:
    """Simulate a chunk of replicas of one point (runs in a worker process)."""
    rows = []
    for replica in range(chunk.first_replica, chunk.first_replica + chunk.replicas):
        try:
            row = simulate_replica(chunk.plan, replica, chunk.seed).row()
            row["error"] = ""
        except Exception as exc:  # noqa: BLE001 - a bad replica must not kill the sweep
            last = traceback.extract_tb(exc.__traceback__)[-1]
            row = {
                "scenario": chunk.plan.scenario,
                "replica": replica,
                "seed": chunk.seed,
                "finished": False,
                "error": f"{type(exc).__name__}: {exc} ({last.filename}:{last.lineno})",
            }
        row["point"] = chunk.point
        row.update(chunk.params)
        rows.append(row)
    return rows


def chunks(scenario_set: ScenarioSet, replicas: int, seed: int, chunk_size: int) -> Iterator[Chunk]:
    for point in scenario_set.points:
        plan = build_plan(point.scenario)
        for first in range(0, replicas, chunk_size):
            yield Chunk(
                point.index, point.params, plan, first, min(chunk_size, replicas - first), seed
            )


def default_workers() -> int:
    return os.cpu_count() or 1


def run(
    scenario_set: ScenarioSet,
    replicas: int | None = None,
    seed: int | None = None,
    workers: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    chunk_size: int | None = None,
) -> pd.DataFrame:
    """Simulate every replica of every sweep point; one row per (point, replica).

    `executor` is "serial" or "processes" (default: processes when workers > 1).
    """
    base = scenario_set.base.simulation
    replicas = base.replicas if replicas is None else replicas
    seed = base.seed if seed is None else seed
    workers = default_workers() if workers is None else workers
    if replicas < 1 or workers < 1:
        raise ValueError("replicas and workers must be at least 1")
    executor = executor or ("processes" if workers > 1 else "serial")
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; expected one of {', '.join(EXECUTORS)}")
    total = replicas * len(scenario_set.points)
    if chunk_size is None:
        chunk_size = max(1, min(500, math.ceil(replicas / (4 * workers))))

    rows: list[dict] = []
    with _progress_bar(progress, total, scenario_set.name) as advance:
        work = chunks(scenario_set, replicas, seed, chunk_size)
        if executor == "serial":
            for chunk in work:
                rows.extend(run_chunk(chunk))
                advance(chunk.replicas)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(run_chunk, chunk) for chunk in work]
                for future in as_completed(futures):
                    chunk_rows = future.result()
                    rows.extend(chunk_rows)
                    advance(len(chunk_rows))

    table = _table(rows, scenario_set.swept_keys)
    errors = table[table["error"] != ""]
    if len(errors):
        print(
            f"WARNING: {len(errors)} of {len(table)} replicas raised and are error rows; "
            f"first: point {errors['point'].iloc[0]} replica {errors['replica'].iloc[0]}: "
            f"{errors['error'].iloc[0]}",
            file=sys.stderr,
        )
    return table


def _table(rows: list[dict], swept_keys: list[str]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    class_columns = sorted(
        c for c in table.columns if c.startswith("failures_") and c not in COLUMNS
    )
    order = COLUMNS + class_columns + swept_keys + ["error"]
    for column in order:
        if column not in table:
            table[column] = math.nan
    table = table[order + [c for c in table.columns if c not in order]]
    table = table.sort_values(["point", "replica"], kind="stable").reset_index(drop=True)
    table["finished"] = table["finished"].astype(bool)
    return table


class _progress_bar:
    """A rich progress bar on stderr (silent when disabled)."""

    def __init__(self, enabled: bool, total: int, name: str):
        self.enabled, self.total, self.name = enabled, total, name
        self._progress: Progress | None = None

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("replicas"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._progress.start()
        task = self._progress.add_task(self.name, total=self.total)
        return lambda n: self._progress.advance(task, n)  # type: ignore[union-attr]

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
