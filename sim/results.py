"""Run directories: `results/<name>/<run-id>/` with the resolved scenario, the
replica table (parquet), the summary (csv, json), figures and, optionally, a
timeline of one replica that opens in Perfetto or chrome://tracing.

A run is written into a hidden `.partial` directory and renamed into place only
when complete, so an interrupted run never looks like a finished one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from sim.scenario import ScenarioSet, dump_resolved


def run_id(seed: int) -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-seed{seed}"


def write_run(
    out_root: Path,
    scenario_set: ScenarioSet,
    seed: int,
    table: pd.DataFrame,
    summary: pd.DataFrame,
    summary_doc: dict[str, Any],
    figures: Callable[[Path], object] | None = None,
    timeline: list[dict] | None = None,
) -> Path:
    parent = Path(out_root) / scenario_set.name
    parent.mkdir(parents=True, exist_ok=True)
    name = run_id(seed)
    final = parent / name
    suffix = 2
    while final.exists():
        final = parent / f"{name}-{suffix}"
        suffix += 1
    partial = parent / f".{final.name}.partial"
    partial.mkdir()
    try:
        (partial / "scenario.yaml").write_text(dump_resolved(scenario_set))
        table.to_parquet(partial / "replicas.parquet", index=False)
        summary.to_csv(partial / "summary.csv", index=False)
        (partial / "summary.json").write_text(json.dumps(summary_doc, indent=2) + "\n")
        if timeline is not None:
            (partial / "timeline.json").write_text(json.dumps(chrome_trace(timeline)))
        if figures is not None:
            figures(partial / "figures")
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def chrome_trace(timeline: list[dict]) -> dict[str, Any]:
    """Trace Event Format (complete events, microseconds) for Perfetto / chrome://tracing."""
    events = []
    for item in timeline:
        args = {k: v for k, v in item.items() if k not in ("name", "start_s", "duration_s")}
        events.append(
            {
                "name": item["name"],
                "cat": "job",
                "ph": "X",
                "ts": item["start_s"] * 1e6,
                "dur": item["duration_s"] * 1e6,
                "pid": 1,
                "tid": 1,
                "args": {k: (v.item() if hasattr(v, "item") else v) for k, v in args.items()},
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}
