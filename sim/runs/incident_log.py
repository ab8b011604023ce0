"""`trainsim run --incidents`: every replica's failures as an incident log, `incidents.parquet`
in the run directory, in the format `trainsim fit` reads (docs/metrics.md).

A chunk's replicas hand their failures in with the chunk's table (`table.attrs`, which
survives the trip back from a worker process or a Dask worker); the run directory's sink
writes them as a part file named like the chunk's replica part, and `merge` joins the parts
that belong to a replica part into incidents.parquet before the replica parts are merged.
`trainsim merge` hands each slice's failures to the same sink, a chunk of replicas at a
time (`read_replicas`), so the merged run has the slices' logs joined.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sim.runs.files import replacing

KEY = "incidents"  # the table attribute and the row key that carry a chunk's failures
PART = re.compile(r"^incidents-(p\d{5}-r\d{9}-n\d{9}\.parquet)$")
FILE = "incidents.parquet"

# point, replica, then the columns of a log `trainsim fit` reads, then trainsim's own
SCHEMA = pa.schema(
    [
        ("point", pa.int64()),
        ("replica", pa.int64()),
        ("time", pa.float64()),  # hours since the replica's start (wall clock)
        ("node", pa.int64()),  # physical node id; -1: no one node (job, storage, fabric)
        ("class", pa.string()),
        ("scope", pa.string()),
        ("repair_hours", pa.float64()),  # NaN: the failure sent no node to repair
        ("lasting_fault", pa.bool_()),
        ("repair_path", pa.string()),
    ]
)
COLUMNS = SCHEMA.names


def rows_of(incidents: list[dict] | None, point: int, replica: int) -> list[dict]:
    """One replica's failures (the engine's `RunRecord.incidents`) as rows of the log."""
    return [
        {
            "point": point,
            "replica": replica,
            "time": float(item["time_h"]),
            "node": int(item["node"]),
            "class": str(item["class"]),
            "scope": str(item["scope"]),
            "repair_hours": float(item["repair_hours"]),
            "lasting_fault": bool(item["lasting_fault"]),
            "repair_path": str(item["repair_path"]),
        }
        for item in incidents or ()
    ]


def table_of(rows: list[dict]) -> pd.DataFrame:
    """Rows as a table of the log's schema (an empty table keeps the columns)."""
    return pa.Table.from_pylist(rows, schema=SCHEMA).to_pandas()


def take(rows: list[dict]) -> pd.DataFrame:
    """Pop the failures the replicas' rows carry (under KEY) into one table."""
    found: list[dict] = []
    for row in rows:
        found.extend(row.pop(KEY, None) or ())
    return table_of(found)


def attach(table: pd.DataFrame, incidents: pd.DataFrame) -> pd.DataFrame:
    table.attrs[KEY] = incidents
    return table


Sink = Callable[[int, int, pd.DataFrame], None]


def sink(write_part: Sink, parts_dir: Path) -> Sink:
    """A run directory's sink that first writes the chunk's failures as
    `incidents-<part name>`, then the chunk's replica part (so a replica part on disk always
    has its failures beside it)."""

    def write(point: int, first: int, table: pd.DataFrame) -> None:
        incidents = table.attrs.pop(KEY, None)  # not into the replica part's metadata
        if incidents is None:
            incidents = table_of([])
        name = f"incidents-p{point:05d}-r{first:09d}-n{len(table):09d}.parquet"
        with replacing(parts_dir / name) as tmp:
            pq.write_table(
                pa.Table.from_pandas(incidents, schema=SCHEMA, preserve_index=False), tmp
            )
        write_part(point, first, table)

    return write


def part_problem(replica_part: Path, point: int, first: int, count: int) -> str | None:
    """Why the failure part beside `replica_part` (of point, replicas first..first+count-1)
    cannot be merged, or None. A run with --incidents writes one beside every replica part:
    a missing one would lose its replicas' failures. Reads its footer and two columns."""
    path = replica_part.with_name(f"incidents-{replica_part.name}")
    if not path.exists() and not path.is_symlink():
        return f"its failures ({path.name}) are missing"
    if path.is_symlink() or not path.is_file():  # a FIFO would block the read
        return f"its failures ({path.name}) are not a regular file"
    try:
        file = pq.ParquetFile(path)
        schema = file.schema_arrow.remove_metadata()
        if not schema.equals(SCHEMA):
            return (
                f"its failures ({path.name}) are not of the incident log's columns "
                f"({', '.join(f'{f.name}: {f.type}' for f in schema)[:200]})"
            )
        rows = file.read(columns=["point", "replica"])
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"its failures ({path.name}) are unreadable ({type(exc).__name__}: {str(exc)[:200]})"
    points, replicas = rows.column("point").to_numpy(), rows.column("replica").to_numpy()
    if len(rows) and (
        (points != point).any() or (replicas < first).any() or (replicas >= first + count).any()
    ):
        return f"its failures ({path.name}) are not of point {point}, replicas {first}-{first + count - 1}"
    return None


def merge(run_path: Path) -> Path:
    """Join the failure parts of the replica parts present (a part left by an interrupted
    chunk that a resume ran again in other chunks is skipped) into incidents.parquet, in
    (point, replica, time) order, one part in memory at a time (the parts' names sort in
    point and replica order, and their replicas do not overlap: `RunDir.check_parts` set
    aside any that did, and any failure part that is unreadable, with its replica part).
    The failure parts stay with the replica parts until the run is complete, so that a run
    killed meanwhile resumes with every failure."""
    parts_dir = run_path / "parts"
    replica_parts = {p.name for p in parts_dir.iterdir()} if parts_dir.is_dir() else set()
    paths = [
        path
        for path in (sorted(parts_dir.iterdir()) if parts_dir.is_dir() else ())
        if (match := PART.match(path.name)) and match.group(1) in replica_parts
    ]
    order = [("point", "ascending"), ("replica", "ascending"), ("time", "ascending")]
    with replacing(run_path / FILE) as tmp, pq.ParquetWriter(tmp, SCHEMA) as writer:
        for path in paths:
            table = pq.read_table(path, schema=SCHEMA).replace_schema_metadata(None)
            writer.write_table(table.sort_by(order))
        if not paths:
            writer.write_table(SCHEMA.empty_table())
    return run_path / FILE  # the parts stay until the run is complete (remove_parts)


def file_problem(path: Path) -> str | None:
    """Why `path` is not an incident log of a run (a regular, readable parquet file of the
    log's columns), or None."""
    if path.is_symlink() or not path.is_file():
        return "missing or not a regular file"
    try:
        schema = pq.read_schema(path).remove_metadata()
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
    if not schema.equals(SCHEMA):
        return "not of the incident log's columns"
    return None


def read_replicas(path: Path, point: int, first: int, count: int) -> pd.DataFrame:
    """The failures of point `point`, replicas first..first+count-1, from a run's
    incidents.parquet (`merge` joins the slices' logs this way, a chunk of replicas at a
    time)."""
    table = pq.read_table(
        path,
        schema=SCHEMA,
        filters=[("point", "=", point), ("replica", ">=", first), ("replica", "<", first + count)],
    )
    return table.replace_schema_metadata(None).to_pandas()
