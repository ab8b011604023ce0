"""Run directories: `results/<name>/<run-id>/`, written while the run goes on.

Layout:
    run.json          manifest: version, command, seed, replicas, executor, times, status,
                      and the fingerprint of the resolved scenario the parts are run from
    scenario.yaml     the resolved scenario with the effective replicas and seed: running
                      it again reproduces replicas.parquet
    run.lock          while a process writes the directory: its pid, host and command
    parts/            one parquet file per finished chunk of replicas, as they finish, with
                      the run's fingerprint and its row count in its metadata
    replicas.parquet  the parts merged, sorted by point and replica (when complete), in
                      row groups of a fixed size, with the fingerprint and row count too
    summary.csv, summary.json, figures/, timeline.json (optional)
    rejected-parts/   parts found bad (unreadable, another schema, rows out of place or
                      overlapping another part's): set aside, never merged; their replicas
                      run again

The directory is created atomically with a unique id before anything is simulated
(so an output path that cannot be written fails at once), chunks stream to `parts/`
(so the main process never holds every row, and an interrupted run keeps what
finished), and `status` in run.json says running | complete | interrupted | failed.
`trainsim run --resume DIR` runs only the replicas no part holds. Every file is written
as a new regular file renamed into place (`replacing`): never through a link.

One process writes a run directory at a time: it holds an exclusive lock on `run.lock`
(flock: the kernel lets go when the process dies, so a dead writer's lock is taken over
at once); a second writer is refused, naming the holder. The parts stay until the status
is complete, so at every instant the directory is complete or resumable."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import re
import secrets
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from sim.model.scenario import dump_resolved
from sim.model.scenario_set import ScenarioError, ScenarioSet
from sim.runs.files import (
    REJECTED,
    RUN_FILES,
    RUN_FOLDERS,
    is_disk_error,
    read_bounded,
    replacing,
    write_regular,
)
from sim.runs.lock import RunLock
from sim.runs.manifest import (
    STATUSES,
    fingerprint,
    load_manifest,
    new_run_id,
    resume_command,
    utc_now,
    version,
)
from sim.runs.parts import (
    PART,
    RANGES,
    PartCheck,
    PartsRejected,
    provenance,
    provenance_problem,
    schema_difference,
    with_provenance,
)

# rows per row group of replicas.parquet: ~2 MB in memory while merging, and few row
# groups (a writer holds the metadata of every row group until it closes: a row group
# per part of 200 rows made the merge of 200,000 replicas take ~100 MB)
ROW_GROUP = 4096

# what a run writes in parts/ (and so may remove): its parts, their failures (`--incidents`)
# and the temporaries `replacing` renames into them, left by a process killed mid-write
_NAME = r"(?:incidents-)?p\d{5}-r\d{9}-n\d{9}\.parquet"
OWN_PART = re.compile(rf"^(?:{_NAME}|\.{_NAME}\.[A-Za-z0-9_]+\.tmp)$")


class RunDirChanged(ScenarioError):
    """The run directory was deleted, or one of its folders or files replaced by something
    else (a file for parts/, a directory for replicas.parquet, a link), while a command
    wrote it: bad input naming the path; what is there is kept."""


@dataclass
class RunDir:
    """One run's directory and its manifest."""

    path: Path
    manifest: dict[str, Any]
    _lock: RunLock | None = field(default=None, repr=False)
    # parts found good, by name: (size, mtime) when checked
    _good: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)

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
        """Create `out_root/<name>/<unique id>/`, lock it for this process and write its
        manifest and scenario, or raise a ScenarioError naming the output path if it cannot
        be written."""
        out_root = Path(out_root).expanduser()  # `--out=~/r`, TRAINSIM_RESULTS=~/r
        parent = out_root / scenario_set.name
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
            lock = RunLock(path)
            lock.acquire("--out")
            (path / "parts").mkdir()
            manifest = {
                "trainsim_version": version(),
                "command": sys.argv,
                "scenario": scenario_set.name,
                "source": scenario_set.source,
                "overrides": list(scenario_set.overrides),  # --set as given: figure labels
                "seed": seed,
                "replicas": replicas,
                "points": len(scenario_set.points),
                "executor": executor,
                "workers": workers,
                "host": platform.node(),
                "python": platform.python_version(),
                "started": utc_now(),
                "ended": None,
                "status": "running",
                **(extra or {}),
            }
            text = dump_resolved(with_effective(scenario_set, seed, replicas))
            manifest["fingerprint"] = fingerprint(text, manifest)
            run = cls(path, manifest, lock)
            write_regular(path / "scenario.yaml", text)
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
    def open(cls, path: str | Path, where: str = "--resume", lock: bool = False) -> RunDir:
        """An existing run directory and its checked manifest; with `lock`, locked for this
        process first (another live writer: RunLocked, exit 2 naming it), and its folders
        checked to be folders, not links (`check_layout`): a writer never follows a link
        inside a run directory."""
        path = Path(path).expanduser()
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a directory"
            raise ScenarioError(where, str(path), f"{what}: expected a run directory")
        if not (path / "run.json").exists() and not (path / "run.json").is_symlink():
            raise ScenarioError(
                where, str(path), "not a trainsim run directory (it has no run.json)"
            )
        held = None
        if lock:
            held = RunLock(path)
            try:
                held.acquire(where)
            except OSError as exc:
                raise ScenarioError(
                    where, str(path), f"cannot lock the run directory ({exc.strerror or exc})"
                ) from None
        try:
            manifest = load_manifest(path / "run.json")
            run = cls(path, manifest, held)
            if lock:
                run.check_layout()
        except BaseException:
            if held is not None:
                held.release()
            raise
        return run

    # ---- the directory's layout

    def check_layout(self) -> None:
        """Before a command writes the directory: its folders (parts/, figures/,
        rejected-parts/) are folders, not links or files, no figure is a link (figures are
        drawn over by name), and none of its files is a directory (a new file is renamed
        over each); else a RunDirChanged naming the path, and nothing is touched."""
        for name in RUN_FOLDERS:
            folder = self.path / name
            if folder.is_symlink():
                raise RunDirChanged(
                    str(folder), "", "a symbolic link, not the run's folder: trainsim never "
                    "follows a link inside a run directory (it could lead to another run's "
                    f"files, which it would write over or remove). Left as it is; {_fix(self)}",
                )  # fmt: skip
            if folder.exists() and not folder.is_dir():
                raise RunDirChanged(
                    str(folder), "", f"not a folder: expected the run's {name}/. Left as it "
                    f"is; {_fix(self)}",
                )  # fmt: skip
        figures = self.path / "figures"
        if figures.is_dir():
            for path in figures.iterdir():
                if path.is_symlink():
                    raise RunDirChanged(
                        str(path), "", "a symbolic link among the run's figures: trainsim "
                        "draws a figure over its name and never through a link (it could lead "
                        f"to another file). Left as it is; {_fix(self)}",
                    )  # fmt: skip
        for name in RUN_FILES:
            path = self.path / name
            if path.is_dir() and not path.is_symlink():
                raise RunDirChanged(
                    str(path), "", f"a directory, not the run's file {name}: trainsim never "
                    f"removes what it did not write. Left as it is; {_fix(self)}",
                )  # fmt: skip

    def changed(self) -> RunDirChanged | None:
        """Why a write to the run directory failed when the directory changed under the
        command (deleted, or a folder or file of it replaced), or None (another cause)."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return RunDirChanged(
                str(self.path), "", "the run directory was deleted while the command wrote it: "
                "expected it to stay until the command ends; what it had written is gone. "
                "Start the run again",
            )  # fmt: skip
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return RunDirChanged(
                str(self.path), "", "no longer a directory (replaced while the command wrote "
                "it): expected the run directory. Left as it is; start the run again",
            )  # fmt: skip
        gone = not self.parts_dir.exists() and not self.parts_dir.is_symlink()
        if gone and self.manifest.get("status") == "running":
            return RunDirChanged(
                str(self.parts_dir), "", "deleted while the command wrote it: expected the "
                "run's parts (its finished replicas) to stay until it ends. Resume with "
                f"`{resume_command(self.path)}` to run them again",
            )  # fmt: skip
        try:
            self.check_layout()
        except RunDirChanged as problem:
            return problem
        return None

    def changed_or(self, exc: OSError) -> OSError | RunDirChanged:
        """What a failed write to the run directory means: RunDirChanged when the directory
        changed under the command, else `exc` itself (a full disk, another cause)."""
        if is_disk_error(exc):
            return exc
        return self.changed() or exc

    def check_fingerprint(self) -> None:
        """The scenario.yaml and manifest a resume would run from are those the parts were
        run from; else a ScenarioError (a resume would mix two scenarios in one table)."""
        source = self.path / "scenario.yaml"
        text = read_bounded(source, 1_000_000, "resolved scenario (scenario.yaml)")
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            doc = None
        simulation = doc.get("simulation") if isinstance(doc, dict) else None
        if isinstance(simulation, dict):
            for key in ("seed", "replicas"):
                if key in simulation and simulation[key] != self.manifest[key]:
                    raise ScenarioError(
                        str(source),
                        f"simulation.{key}",
                        f"is {simulation[key]!r} but run.json says {self.manifest[key]!r}: "
                        "the run's files were edited; a resume would mix two runs in one "
                        "table. Restore them, or start a new run",
                    )
        stored = self.manifest.get("fingerprint")
        if stored is None:  # nothing would tell an edited scenario from the one run
            raise ScenarioError(
                str(self.path / "run.json"),
                "fingerprint",
                "missing: expected the digest of what the run's parts were run from; without "
                "it a resume could mix two scenarios in one table. Restore run.json, or start "
                "a new run",
            )
        if fingerprint(text, self.manifest) != stored:
            raise ScenarioError(
                str(self.path),
                "fingerprint",
                "scenario.yaml or run.json changed since the run started (their fingerprint "
                "is not the one in run.json): a resume would mix two scenarios in one table. "
                "Restore them, or start a new run from the scenario as it is now",
            )

    def has_table(self) -> bool:
        """replicas.parquet is there, reads as a parquet table, and is this run's whole
        table (its fingerprint and row count)."""
        return self.table_problem() is None

    # ---- resuming

    def refuse_complete(self, finished: bool, what: str, note: str) -> None:
        """A complete run whose outputs are all there (`finished`): nothing to resume, a
        ScenarioError. Complete with an output missing or unreadable: `note` (what is missing
        and what the resume does) on stderr, and the resume goes on."""
        if self.manifest["status"] != "complete":
            return
        if finished:
            raise ScenarioError(
                "--resume", str(self.path), f"this {what} is complete: nothing to resume"
            )
        print(f"note: {self.path} is complete but {note}", file=sys.stderr)

    def begin_resume(
        self, scenario_set: ScenarioSet, workers: int | None, executor: str | None
    ) -> None:
        """The start of every resume, once the run's files are checked: the scenario has the
        points the run started with, the new --workers/--executor are kept, the resume is
        recorded, and the status says running again."""
        points = self.manifest.get("points", len(scenario_set.points))
        if len(scenario_set.points) != points:
            raise ScenarioError(
                str(self.path / "scenario.yaml"), "sweep", f"has {len(scenario_set.points)} "
                f"points, run.json says {points}: the run's files were edited",
            )  # fmt: skip
        if workers is not None:
            self.manifest["workers"] = workers
        if executor is not None:
            self.manifest["executor"] = executor
        self.manifest.setdefault("resumed", []).append(self.manifest.get("ended"))
        self.parts_dir.mkdir(exist_ok=True)  # gone with a complete run's table
        self.set_status("running")

    def save(self) -> None:
        """Write run.json atomically (a reader never sees half a manifest)."""
        write_regular(
            self.path / "run.json", json.dumps(self.manifest, indent=2, default=str) + "\n"
        )

    def set_status(self, status: str, release: bool = True, **fields: Any) -> None:
        """Say the run's status in run.json; any but running ends this process's writing
        (the lock is let go unless `release` is False)."""
        assert status in STATUSES
        self.manifest.update(status=status, **fields)
        if status != "running":
            self.manifest["ended"] = utc_now()
        try:
            self.save()
        finally:
            if status != "running" and release:
                self.release()

    def try_status(self, status: str, **fields: Any) -> None:
        """`set_status`, when the disk may be full: a failure to say it is not a new error."""
        try:
            self.set_status(status, **fields)
        except OSError:
            self.release()

    def lock(self, where: str = "--resume") -> None:
        if self._lock is None or not self._lock.held:
            self._lock = RunLock(self.path)
            self._lock.acquire(where)

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()

    # ---- parts

    @property
    def parts_dir(self) -> Path:
        return self.path / "parts"

    def write_part(self, point: int, first: int, table: pd.DataFrame) -> None:
        """One chunk's rows (replicas first..first+len-1 of a point), written atomically,
        carrying what they were run from (the run's fingerprint) and their row count."""
        name = f"p{point:05d}-r{first:09d}-n{len(table):09d}.parquet"
        arrow = pa.Table.from_pandas(table, preserve_index=False)
        arrow = with_provenance(arrow, self.manifest.get("fingerprint"))
        try:
            if self.parts_dir.is_symlink():  # put there meanwhile: never written through
                raise NotADirectoryError(errno.ENOTDIR, "a link", str(self.parts_dir))
            with replacing(self.parts_dir / name) as tmp:  # a full disk: the part's bytes freed
                pq.write_table(arrow, tmp)
        except OSError as exc:
            raise self.changed_or(exc) from None
        with contextlib.suppress(OSError):
            info = (self.parts_dir / name).stat()
            self._good[name] = (info.st_size, info.st_mtime_ns)  # written here: good

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

    def check_parts(self, check: PartCheck) -> list[tuple[Path, str]]:
        """Set aside (in rejected-parts/) every part that cannot be merged: unreadable, of
        another schema, of a point the run does not have, rows that are not the replicas
        its name says (point, replica, seed), figures out of range, or replicas another part
        already holds; or whose failures (`--incidents`: incidents-<part>) cannot be merged
        (set aside with it). Their replicas then count as not done and run again. Returns the
        parts set aside and why. Reads each part's footer and a few columns, once."""
        rejected: list[tuple[Path, str]] = []
        ends: dict[int, tuple[int, str]] = {}
        for point, first, count, path in self.parts():
            why = self._part_problem(point, first, count, path, check)
            if why is None:
                end, holder = ends.get(point, (0, ""))
                if first < end:
                    why = f"replicas {first}-{first + count - 1} overlap those of {holder}"
            if why is None and check.companion is not None:
                why = check.companion(path, point, first, count)
            if why is not None:
                self._reject(path, why)
                rejected.append((path, why))
                continue
            ends[point] = (first + count, path.name)
        return rejected

    def _part_problem(
        self, point: int, first: int, count: int, path: Path, check: PartCheck
    ) -> str | None:
        try:
            info = path.lstat()  # a link is not followed: it could lead to another run's part
        except OSError as exc:
            return f"cannot read it ({exc.strerror})"
        if stat.S_ISLNK(info.st_mode):
            return "a symbolic link, not a part this run wrote"
        if self._good.get(path.name) == (info.st_size, info.st_mtime_ns):
            return None
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if not check.points(point):
            return f"point {point} is not one of this run's"
        if count < 1 or first + count > check.replicas:
            return f"replicas {first}-{first + count - 1} beyond the run's {check.replicas}"
        try:
            file = pq.ParquetFile(path)
            if file.metadata.num_rows != count:
                return f"{file.metadata.num_rows} rows, its name says {count}"
            difference = schema_difference(
                file.schema_arrow.remove_metadata(), check.schema_of(point)
            )
            if difference is not None:
                return difference
            rows = file.read(columns=["point", "replica", "seed", *RANGES]).to_pandas()
        except (OSError, ValueError, pa.ArrowException) as exc:
            return f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
        if not (rows["point"] == point).all():
            return f"rows of another point than {point}"
        if rows["replica"].tolist() != list(range(first, first + count)):
            return f"its rows are not replicas {first}-{first + count - 1} in order"
        if not (rows["seed"] == check.seed).all():
            return f"rows of another seed than the run's {check.seed}"
        for column, (low, high) in RANGES.items():
            values = rows[column].dropna()
            if ((values < low) | (values > high)).any():
                return f"{column} outside [{low:g}, {high:g}]"
        why = provenance_problem(
            file.schema_arrow.metadata, self.manifest.get("fingerprint"), count
        )
        if why is not None:
            return why
        self._good[path.name] = (info.st_size, info.st_mtime_ns)
        return None

    def _reject(self, path: Path, why: str) -> None:
        aside = self.path / REJECTED
        aside.mkdir(exist_ok=True)
        target = aside / path.name
        if target.exists():
            target = aside / f"{path.name}.{secrets.token_hex(3)}"
        try:
            os.replace(path, target)
            incidents = path.with_name(f"incidents-{path.name}")  # `--incidents`: its failures
            if incidents.exists():
                os.replace(incidents, aside / incidents.name)
        except OSError as exc:
            raise ScenarioError(
                str(path),
                "",
                f"a bad part ({why}) that cannot be set aside ({exc.strerror}); move or delete "
                "it, then resume",
            ) from None
        self._good.pop(path.name, None)
        print(
            f"warning: {path}: {why}; set aside in {aside} (not merged), its replicas run again",
            file=sys.stderr,
        )

    def merge(self) -> Path:
        """Concatenate the parts, in (point, replica) order, into replicas.parquet, one part
        in memory at a time, in row groups of ROW_GROUP rows whatever the parts' sizes (so the
        table's bytes do not depend on how the run was chunked, interrupted or resumed), with
        the run's fingerprint and row count in its metadata. The parts stay until the run is
        complete (`remove_parts`); a part that cannot be read now is set aside and
        PartsRejected raised."""
        parts = self.parts()
        if not parts:
            raise RuntimeError(f"{self.path}: no parts to merge")
        rows = sum(count for _, _, count, _ in parts)
        writer: pq.ParquetWriter | None = None
        schema: pa.Schema | None = None
        pending: list[pa.Table] = []  # rows read, not yet written: less than a row group

        def flush(everything: bool) -> None:
            table = pa.concat_tables(pending).combine_chunks()
            pending.clear()
            start = 0
            while len(table) - start >= ROW_GROUP or (everything and start < len(table)):
                writer.write_table(table.slice(start, ROW_GROUP))  # type: ignore[union-attr]
                start += ROW_GROUP
            if start < len(table):
                pending.append(table.slice(start))

        table_path = self.path / "replicas.parquet"
        if table_path.is_dir() and not table_path.is_symlink():  # never renamed over
            raise self.changed_or(IsADirectoryError(errno.EISDIR, "a directory", str(table_path)))
        with replacing(table_path) as tmp:
            try:
                for _, _, _, path in parts:
                    try:
                        table = pq.read_table(path)
                    except (OSError, ValueError, pa.ArrowException) as exc:
                        if is_disk_error(exc):
                            raise
                        self._reject(path, f"unreadable ({type(exc).__name__}: {str(exc)[:200]})")
                        raise PartsRejected(str(path)) from None
                    if writer is None:
                        schema = table.schema.remove_metadata()
                        written = provenance(self.manifest.get("fingerprint"), rows)
                        writer = pq.ParquetWriter(tmp, schema.with_metadata(written))
                    pending.append(table.cast(schema))
                    if sum(len(t) for t in pending) >= ROW_GROUP:
                        flush(everything=False)
                flush(everything=True)
            finally:
                if writer is not None:
                    writer.close()
        return self.path / "replicas.parquet"

    def table_problem(self) -> str | None:
        """Why replicas.parquet is not this run's whole table (missing, unreadable, of another
        run, rows lost), or None. A special file (a FIFO, a device) is not opened."""
        path = self.path / "replicas.parquet"
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                return "not a regular file"
            file = pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 - missing, truncated, not parquet
            return f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
        return provenance_problem(
            file.schema_arrow.metadata, self.manifest.get("fingerprint"), file.metadata.num_rows
        )

    def remove_parts(self) -> None:
        """Remove parts/ (once the run is complete): only what the run wrote there, its parts
        and their temporaries, regular files by their full paths; never through a link, and
        never what someone else put there (a folder, a link, another file: parts/ then stays,
        and a note says so)."""
        if self.parts_dir.is_symlink() or not self.parts_dir.is_dir():
            return
        kept = []
        for path in sorted(self.parts_dir.iterdir()):
            try:
                mine = OWN_PART.match(path.name) and stat.S_ISREG(path.lstat().st_mode)
            except OSError:
                continue
            if not mine:
                kept.append(path.name)
                continue
            with contextlib.suppress(OSError):
                path.unlink()
        if kept:
            shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3:,} more" if len(kept) > 3 else "")
            print(
                f"note: {self.parts_dir} kept: it holds what this run did not write ({shown}); "
                "its own parts are removed",
                file=sys.stderr,
            )
            return
        with contextlib.suppress(OSError):
            self.parts_dir.rmdir()


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


def _fix(run: RunDir) -> str:
    """What to do about a path of the run that is not what the run wrote there."""
    return f"move it away (or put back what was there), then `{resume_command(run.path)}`"


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
