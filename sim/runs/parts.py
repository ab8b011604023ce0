"""A run's chunk parts: their names, the ranges a replica's figures must lie in, the checks a
part passes before it counts or merges (schema, rows in place), and the provenance (the
run's fingerprint and row count) in a table's metadata.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

PART = re.compile(r"^p(\d{5})-r(\d{9})-n(\d{9})\.parquet$")


# --------------------------------------------------------------------------- parts


class PartsRejected(Exception):
    """Parts were found bad while merging: set aside; their replicas must run again."""


@dataclass
class PartCheck:
    """What a run's parts must be: the schema of each point's parts, the run's seed, the
    replicas per point and the points the run may have."""

    schema_of: Callable[[int], pa.Schema]
    seed: int
    replicas: int
    points: Callable[[int], bool]
    # why the files a part carries beside it (`--incidents`: incidents-<part>) cannot be
    # merged with it, given (part path, point, first replica, count); None: no such files
    companion: Callable[[Path, int, int, int], str | None] | None = None


# ranges a replica's figures must lie in (NaN aside: unfinished or error rows)
RANGES = {
    "goodput": (0.0, 1.0 + 1e-9),
    "wall_hours": (0.0, float("inf")),
    "time_to_train_days": (0.0, float("inf")),
}


def schema_difference(found: pa.Schema, expected: pa.Schema) -> str | None:
    if found.equals(expected):
        return None
    missing = [n for n in expected.names if n not in found.names]
    if missing:
        return f"columns missing: {', '.join(missing[:5])}"
    extra = [n for n in found.names if n not in expected.names]
    if extra:
        return f"columns no part has: {', '.join(extra[:5])}"
    for want in expected:
        have = found.field(want.name)
        if not have.type.equals(want.type):
            return f"column {want.name} is {have.type}, expected {want.type}"
    return "its columns are in another order"


# what a part or a run's table was run from (the run's fingerprint) and its row count, in
# its parquet metadata: a part of another run, or a table that lost rows, is found
PROVENANCE = b"trainsim.fingerprint"
ROWS = b"trainsim.rows"


def provenance(fingerprint_: str | None, rows: int) -> dict[bytes, bytes]:
    """The parquet metadata that says what a file was run from and how many rows it has."""
    return {PROVENANCE: str(fingerprint_).encode(), ROWS: str(rows).encode()}


def with_provenance(table: pa.Table, fingerprint_: str | None) -> pa.Table:
    """`table` with the fingerprint it was run from and its row count in its metadata."""
    metadata = {**(table.schema.metadata or {}), **provenance(fingerprint_, len(table))}
    return table.replace_schema_metadata(metadata)


def provenance_problem(
    metadata: dict[bytes, bytes] | None, fingerprint_: str | None, rows: int
) -> str | None:
    """Why a file whose parquet metadata is `metadata` and which has `rows` rows is not one
    of the run of fingerprint `fingerprint_`, or None."""
    metadata = metadata or {}
    if PROVENANCE not in metadata or ROWS not in metadata:
        return "it does not say what it was run from (no trainsim fingerprint in it)"
    if metadata[PROVENANCE].decode(errors="replace") != str(fingerprint_):
        return (
            "run from another scenario, seed or replicas (its fingerprint "
            f"{metadata[PROVENANCE].decode(errors='replace')[:32]} is not the run's {fingerprint_})"
        )
    written = metadata[ROWS].decode(errors="replace")
    if written != str(rows):
        return f"{rows:,} rows, written with {written}: rows were lost or added"
    return None
