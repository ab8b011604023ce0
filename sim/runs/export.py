"""`trainsim export RUN_DIR [--out FILE]`: the per-replica table of a run as CSV.

One row per (sweep point, replica) with the columns of replicas.parquet (defined in
docs/metrics.md), streamed batch by batch (memory stays bounded for any run). The CSV goes
to RUN_DIR/replicas.csv unless --out says otherwise; the run's own files are never
overwritten, and an existing file only with --force.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from sim.model.scenario_set import ScenarioError
from sim.runs.files import protect_run_files, replacing
from sim.runs.manifest import resume_command

DEFAULT_NAME = "replicas.csv"
BATCH_ROWS = 65_536


def export_csv(run_dir: str | Path, out: str | Path | None = None, force: bool = False) -> Path:
    """Write the run's replica table as CSV; return the path. Bad input (no complete run
    there, an output path that is one of the run's files) raises a ScenarioError."""
    run = Path(run_dir).expanduser()
    table = run / "replicas.parquet"
    if not (run / "run.json").is_file():
        raise ScenarioError(
            str(run),
            "",
            "not a run directory (no run.json): expected results/<name>/<run-id>/ as "
            "`trainsim run` writes it",
        )
    if not table.is_file():
        raise ScenarioError(
            str(run),
            "",
            "the run has no replicas.parquet: it is not complete (finish it with "
            f"`{resume_command(run)}`) or not a run of replicas",
        )
    path = Path(out).expanduser() if out is not None else run / DEFAULT_NAME
    # never over the run's own files (RUN/replicas.csv, the default, is not one of them),
    # nor anything in another run's directory (its replicas.csv is its own)
    protect_run_files(run, path, "--out", f"or leave --out out for {run / DEFAULT_NAME}")
    if path.exists() and (not force or not path.is_file()):
        raise ScenarioError(
            "--out",
            str(path),
            "the file exists; choose another path with --out, or overwrite it with --force",
        )
    try:
        source = pq.ParquetFile(table)
    except (OSError, pa.ArrowException) as exc:
        raise ScenarioError(str(table), "", f"cannot read the replica table ({exc})") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a new regular file renamed over the path: a reader never sees half a table, no
        # link is followed, and a stop (Ctrl-C) or an error leaves no partial file behind
        with replacing(path) as partial, pacsv.CSVWriter(partial, source.schema_arrow) as writer:
            for batch in source.iter_batches(batch_size=BATCH_ROWS):
                writer.write_batch(batch)
    except (OSError, pa.ArrowException) as exc:
        message = getattr(exc, "strerror", None) or str(exc)
        raise ScenarioError("--out", str(path), f"cannot write the CSV there ({message})") from None
    return path
