"""Run directories: `results/<name>/<run-id>/`, written while the run goes on.

Layout:
    run.json          manifest: version, command, seed, replicas, executor, times, status
    scenario.yaml     the resolved scenario with the effective replicas and seed: running
                      it again reproduces replicas.parquet
    parts/            one parquet file per finished chunk of replicas, as they finish
    replicas.parquet  the parts merged, sorted by point and replica (when complete)
    summary.csv, summary.json, figures/, timeline.json (optional)

The directory is created atomically with a unique id before anything is simulated
(so an output path that cannot be written fails at once), chunks stream to `parts/`
(so the main process never holds every row, and an interrupted run keeps what
finished), and `status` in run.json says running | complete | interrupted | failed.
`trainsim run --resume DIR` runs only the replicas no part holds.
"""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.scenario import ScenarioError, ScenarioSet, dump_resolved

PART = re.compile(r"^p(\d{5})-r(\d{9})-n(\d{9})\.parquet$")
STATUSES = ("running", "complete", "interrupted", "failed")


def version() -> str:
    from sim import __version__

    return __version__


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(seed: int) -> str:
    """Timestamp, seed and a random suffix: two runs started in the same second differ."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-seed{seed}-{secrets.token_hex(3)}"


@dataclass
class RunDir:
    """One run's directory and its manifest."""

    path: Path
    manifest: dict[str, Any]

    # ---- creating and opening

    @classmethod
    def create(
        cls,
        out_root: str | Path,
        scenario_set: ScenarioSet,
        seed: int,
        replicas: int,
        executor: str,
        workers: int,
        extra: dict[str, Any] | None = None,
    ) -> RunDir:
        """Create `out_root/<name>/<unique id>/` and write its manifest and scenario, or raise
        a ScenarioError naming the output path if it cannot be written."""
        parent = Path(out_root) / scenario_set.name
        try:
            parent.mkdir(parents=True, exist_ok=True)
            for _ in range(100):
                path = parent / new_run_id(seed)
                try:
                    path.mkdir()  # atomic: exactly one concurrent run gets this name
                    break
                except FileExistsError:
                    continue
            else:  # pragma: no cover - 100 collisions of 24 random bits
                raise FileExistsError(str(parent))
            (path / "parts").mkdir()
            manifest = {
                "trainsim_version": version(),
                "command": sys.argv,
                "scenario": scenario_set.name,
                "source": scenario_set.source,
                "seed": seed,
                "replicas": replicas,
                "points": len(scenario_set.points),
                "executor": executor,
                "workers": workers,
                "host": platform.node(),
                "python": platform.python_version(),
                "started": _now(),
                "ended": None,
                "status": "running",
                **(extra or {}),
            }
            run = cls(path, manifest)
            (path / "scenario.yaml").write_text(
                dump_resolved(with_effective(scenario_set, seed, replicas))
            )
            run.save()
        except OSError as exc:
            raise ScenarioError(
                "--out",
                str(out_root),
                f"cannot write the run directory there ({exc.strerror or exc}); "
                "choose a writable directory with --out",
            ) from None
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        path = Path(path)
        manifest_path = path / "run.json"
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as exc:
            raise ScenarioError(
                "--resume",
                str(path),
                f"not a trainsim run directory (no readable run.json: {exc})",
            ) from None
        return cls(path, manifest)

    def save(self) -> None:
        """Write run.json atomically (a reader never sees half a manifest)."""
        tmp = self.path / "run.json.tmp"
        tmp.write_text(json.dumps(self.manifest, indent=2, default=str) + "\n")
        os.replace(tmp, self.path / "run.json")

    def set_status(self, status: str, **fields: Any) -> None:
        assert status in STATUSES
        self.manifest.update(status=status, **fields)
        if status != "running":
            self.manifest["ended"] = _now()
        self.save()

    # ---- parts

    @property
    def parts_dir(self) -> Path:
        return self.path / "parts"

    def write_part(self, point: int, first: int, table: pd.DataFrame) -> None:
        """One chunk's rows (replicas first..first+len-1 of a point), written atomically."""
        name = f"p{point:05d}-r{first:09d}-n{len(table):09d}.parquet"
        tmp = self.parts_dir / f".{name}.tmp"
        table.to_parquet(tmp, index=False)
        os.replace(tmp, self.parts_dir / name)

    def parts(self) -> list[tuple[int, int, int, Path]]:
        """(point, first replica, count, path) of every complete part, in table order."""
        found = []
        if self.parts_dir.is_dir():
            for path in self.parts_dir.iterdir():
                match = PART.match(path.name)
                if match:
                    point, first, count = (int(g) for g in match.groups())
                    found.append((point, first, count, path))
        return sorted(found)

    def part_paths(self, point: int) -> list[Path]:
        return [path for p, _, _, path in self.parts() if p == point]

    def done(self) -> dict[int, set[int]]:
        """The replicas each point already has."""
        have: dict[int, set[int]] = {}
        for point, first, count, _ in self.parts():
            have.setdefault(point, set()).update(range(first, first + count))
        return have

    def merge(self) -> Path:
        """Concatenate the parts, in (point, replica) order, into replicas.parquet, one part
        in memory at a time; the parts are removed once the table is in place."""
        target = self.path / "replicas.parquet"
        tmp = self.path / ".replicas.parquet.tmp"
        writer: pq.ParquetWriter | None = None
        schema: pa.Schema | None = None
        try:
            for _, _, _, path in self.parts():
                table = pq.read_table(path)
                if writer is None:
                    schema = table.schema.remove_metadata()
                    writer = pq.ParquetWriter(tmp, schema)
                writer.write_table(table.cast(schema))
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise RuntimeError(f"{self.path}: no parts to merge")
        os.replace(tmp, target)
        shutil.rmtree(self.parts_dir, ignore_errors=True)
        return target

    def iter_parts(self, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
        for _, _, _, path in self.parts():
            yield pd.read_parquet(path, columns=columns)


def read_manifest(path: Path, expected: str, prefix: str = "") -> dict[str, Any]:
    """The run.json of a run directory, or a ScenarioError naming the directory, saying what
    is wrong (`prefix` first, e.g. "run A ") and what was `expected`."""
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise ScenarioError(str(path), "", f"{prefix}{what}: {expected}")
    try:
        manifest = json.loads((path / "run.json").read_text())
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise ScenarioError(
            str(path), "", f"{prefix}no readable run.json ({exc}): {expected}"
        ) from None
    return manifest


class TableOfRun:
    """A mixin for results whose replica table is read from the run directory when first
    asked for (the dataclass that uses it has `run_dir` and `_table` fields)."""

    run_dir: Path | None
    _table: pd.DataFrame | None

    @property
    def table(self) -> pd.DataFrame:
        """One row per (point, replica); read from the run directory when there is one."""
        if self._table is None and self.run_dir is not None:
            self._table = pd.read_parquet(self.run_dir / "replicas.parquet")
        assert self._table is not None
        return self._table


def with_effective(scenario_set: ScenarioSet, seed: int, replicas: int) -> ScenarioSet:
    """The scenario set with `simulation.seed` and `simulation.replicas` as actually run."""
    resolved = dict(scenario_set.resolved)
    resolved["simulation"] = {
        **(resolved.get("simulation") or {}),
        "seed": seed,
        "replicas": replicas,
    }
    return ScenarioSet(scenario_set.source, resolved, scenario_set.points)


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
