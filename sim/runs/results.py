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
is complete, so at every instant the directory is complete or resumable.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import platform
import re
import secrets
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from sim.model.scenario import ScenarioError, ScenarioSet, dump_resolved
from sim.model.schema import EXECUTORS

try:  # not on Windows: one writer is then not enforced
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

PART = re.compile(r"^p(\d{5})-r(\d{9})-n(\d{9})\.parquet$")
STATUSES = ("running", "complete", "interrupted", "failed")
LOCK = "run.lock"
REJECTED = "rejected-parts"
MAX_MANIFEST_BYTES = 1_000_000  # a run.json is a few kB (a plan's settings, its command)
MAX_LOCK_BYTES = 64_000
# the manifest keys the fingerprint covers (with the resolved scenario): what the parts
# were simulated from
FINGERPRINTED = ("seed", "replicas", "points_slice", "target_ci", "plan")
# opening a file never follows a link in its last component (not on Windows)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# errors of a full or unwritable disk: said as such, with what was kept (not "a bug")
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


def version() -> str:
    from sim import __version__

    return __version__


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(seed: int) -> str:
    """Timestamp, seed and a random suffix: two runs started in the same second differ."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-seed{seed}-{secrets.token_hex(3)}"


def trainsim_command() -> str:
    """How to call trainsim again from this shell, as a command that runs as printed (quoted
    for a POSIX shell): `trainsim` when that name on PATH is the program running, else its
    full path; in-process (`python -m sim`, a notebook, a test): `trainsim` when on PATH, else
    the venv's script beside the interpreter, else `python -m sim`."""
    on_path = shutil.which("trainsim")
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.stem == "trainsim":
        if on_path and _same_file(Path(on_path), argv0):
            return "trainsim"
        return shlex.quote(str(argv0.absolute()))
    if on_path:
        return "trainsim"
    sibling = Path(sys.executable).parent / "trainsim"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return shlex.quote(str(sibling))
    return f"{shlex.quote(sys.executable)} -m sim"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def resume_command(run_dir: str | Path) -> str:
    """`trainsim run --resume RUN_DIR`, as a command that runs as printed."""
    return f"{trainsim_command()} run --resume {shlex.quote(str(run_dir))}"


def is_disk_error(exc: BaseException) -> bool:
    """A full disk, a quota, a read-only file system (pyarrow says it in words only)."""
    if not isinstance(exc, OSError):
        return False
    if exc.errno in DISK_ERRNOS:
        return True
    text = str(exc)
    return any(
        words in text
        for words in ("No space left on device", "Disk quota exceeded", "Read-only file system")
    )


# --------------------------------------------------------------------------- bounded reads


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or a ScenarioError naming it.
    Anything else (a FIFO nobody writes, /dev/zero, a directory, a socket) is refused
    without blocking: the file is opened non-blocking and checked before it is read."""
    source = str(path)
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the {what} ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ScenarioError(source, "", f"not a regular file: expected the {what}")
        if info.st_size > limit:
            raise ScenarioError(
                source, "", f"{info.st_size:,} bytes, larger than the {limit:,} of a {what}"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as file:
            fd = -1
            data = file.read(limit + 1)
        if len(data) > limit:
            raise ScenarioError(source, "", f"larger than the {limit:,} bytes of a {what}")
        return data
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the {what} ({exc.strerror})") from None
    finally:
        if fd >= 0:
            os.close(fd)


def _manifest_problem(manifest: Any, strict: bool) -> tuple[str, str] | None:
    """(key, what is wrong) of a run.json document, or None. `strict`: the keys a resume
    needs must be there; otherwise only those present are checked."""
    if not isinstance(manifest, dict):
        kind = type(manifest).__name__ if manifest is not None else "null"
        return "", f"a JSON {kind}, expected an object (the run's manifest)"

    def integer(value: Any, low: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    checks: list[tuple[str, Callable[[Any], bool], str, bool]] = [
        ("seed", lambda v: integer(v, 0) and v < 2**63, "the run's seed, an integer >= 0", True),
        ("replicas", lambda v: integer(v, 1), "the replicas per point, an integer >= 1", True),
        ("status", lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}", True),
        ("workers", lambda v: integer(v, 1), "the worker count, an integer >= 1", False),
        ("executor", lambda v: v in EXECUTORS, f"one of {', '.join(EXECUTORS)}", False),
        ("resumed", lambda v: isinstance(v, list), "a list (the times the run ended)", False),
        (
            "adaptive",
            lambda v: (
                isinstance(v, dict)
                and all(
                    isinstance(x, dict) and {"replicas", "mean_days", "half_width_days"} <= set(x)
                    for x in v.values()
                )
            ),
            "an object of points, each with replicas, mean_days and half_width_days",
            False,
        ),
        (
            "overrides",
            lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
            "a list of the --set overrides (strings)",
            False,
        ),
        (
            "merged_from",
            lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
            "a list of run directories",
            False,
        ),
        ("incidents", lambda v: isinstance(v, bool), "true or false", False),
        (
            "points_slice",
            lambda v: (
                v is None or (isinstance(v, list) and len(v) == 2 and all(integer(x, 0) for x in v))
            ),
            "[I, J], the slice of sweep points",
            False,
        ),
        (
            "target_ci",
            lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool)),
            "a number",
            False,
        ),
        ("plan", lambda v: isinstance(v, dict), "an object (the plan's settings)", False),
        ("fingerprint", lambda v: isinstance(v, str), "a hex digest", False),
    ]
    for key, good, expected, required in checks:
        if key not in manifest:
            if strict and required:
                return key, f"missing: expected {expected}"
            continue
        if not good(manifest[key]):
            shown = json.dumps(manifest[key], default=str)[:60]
            return key, f"is {shown}: expected {expected}"
    return None


def load_manifest(run_json: Path, strict: bool = True) -> dict[str, Any]:
    """A run.json, read within bounds and checked (see `_manifest_problem`), or a
    ScenarioError naming the file and the key."""
    data = read_bounded(run_json, MAX_MANIFEST_BYTES, "run manifest (run.json)")
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise ScenarioError(
            str(run_json), "", f"not readable JSON ({exc}): expected the run's manifest"
        ) from None
    problem = _manifest_problem(manifest, strict)
    if problem is not None:
        raise ScenarioError(str(run_json), *problem)
    return manifest


def fingerprint(scenario_text: str | bytes, manifest: dict[str, Any]) -> str:
    """A digest of the resolved scenario (its content: comments and layout aside) and of the
    manifest's keys the parts depend on (seed, replicas, slice, adaptive or plan settings)."""
    try:
        document = yaml.safe_load(scenario_text)
    except yaml.YAMLError:
        document = scenario_text if isinstance(scenario_text, str) else scenario_text.hex()
    doc = {"scenario": document, **{k: manifest.get(k) for k in FINGERPRINTED}}
    text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# --------------------------------------------------------------------------- one writer


class RunLocked(ScenarioError):
    """Another live process writes this run directory."""


_HELD: dict[int, int] = {}  # fd -> pid that took the lock: forked children close their copy


def _close_inherited() -> None:
    """In a forked child (a pool worker): close the lock's file descriptors, so that only
    the process that took the lock holds it (the workers write nothing)."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited)


class RunLock:
    """An exclusive lock on `RUN_DIR/run.lock` held by this process, with its pid, host,
    start time and command written in the file for whoever is refused."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / LOCK
        self.fd = -1

    def acquire(self, where: str) -> None:
        if fcntl is None:  # pragma: no cover
            return
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP or self.path.is_symlink():
                    raise ScenarioError(
                        str(self.path), "", "a symbolic link, not the run's lock file: trainsim "
                        "never writes through a link (it could point at another run's files); "
                        "delete it, then run the command again",
                    ) from None  # fmt: skip
                if is_disk_error(exc) and exc.errno == errno.EROFS:
                    raise ScenarioError(
                        where, str(self.path.parent), f"cannot write there ({exc.strerror})"
                    ) from None
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                raise RunLocked(
                    where,
                    str(self.path.parent),
                    f"another trainsim process is writing this run directory ({holder}); "
                    "one process at a time: wait for it to end, or stop it and resume then",
                ) from None
            except OSError as exc:  # a file system without locks: the pid in the file says
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    os.close(fd)
                    raise
                self._check_pid(fd, where)
            try:  # the file we locked must still be the lock (not one a leaver unlinked)
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            holder = {
                "pid": os.getpid(),
                "host": platform.node(),
                "since": _now(),
                "command": " ".join(sys.argv)[:500],
            }
            with contextlib.suppress(OSError):  # the lock holds without its words
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
            self.fd = fd
            _HELD[fd] = os.getpid()
            return
        raise RunLocked(where, str(self.path.parent), "the run's lock file keeps changing")

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            info = json.loads(os.pread(fd, MAX_LOCK_BYTES, 0) or b"{}")
            return (
                f"pid {info.get('pid')} on {info.get('host')}, since {info.get('since')}: "
                f"{str(info.get('command', ''))[:200]}"
            )
        except (OSError, ValueError, AttributeError):
            return "it is just starting"

    def _check_pid(self, fd: int, where: str) -> None:
        """Without flock: refuse when the file names a live process of this host."""
        try:
            info = json.loads(os.pread(fd, MAX_LOCK_BYTES, 0) or b"{}")
            pid, host = int(info["pid"]), info["host"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if pid == os.getpid():
            return
        alive = host != platform.node()
        if host == platform.node():
            try:
                os.kill(pid, 0)
                alive = True
            except ProcessLookupError:
                alive = False
            except PermissionError:
                alive = True
        if alive:
            os.close(fd)
            raise RunLocked(
                where,
                str(self.path.parent),
                f"another trainsim process is writing this run directory ({self._holder(fd)}); "
                f"if it is gone, delete {self.path} and resume",
            )

    def release(self) -> None:
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):  # unlink while held: nobody locks a stale inode
            if os.path.samestat(os.fstat(self.fd), os.stat(self.path)):
                os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        _HELD.pop(self.fd, None)
        self.fd = -1

    @property
    def held(self) -> bool:
        return self.fd >= 0


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


# rows per row group of replicas.parquet: ~2 MB in memory while merging, and few row
# groups (a writer holds the metadata of every row group until it closes: a row group
# per part of 200 rows made the merge of 200,000 replicas take ~100 MB)
ROW_GROUP = 4096


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
                "started": _now(),
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
        process first (another live writer: RunLocked, exit 2 naming it)."""
        path = Path(path)
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
        except BaseException:
            if held is not None:
                held.release()
            raise
        return cls(path, manifest, held)

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
            self.manifest["ended"] = _now()
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
        with replacing(self.parts_dir / name) as tmp:  # a full disk: the part's bytes freed
            pq.write_table(arrow, tmp)
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
            info = path.stat()
        except OSError as exc:
            return f"cannot read it ({exc.strerror})"
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

        with replacing(self.path / "replicas.parquet") as tmp:
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
        """Remove parts/ (once the run is complete), file by file by their full paths."""
        if not self.parts_dir.is_dir():
            return
        for path in self.parts_dir.iterdir():
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink()
        with contextlib.suppress(OSError):
            self.parts_dir.rmdir()


def read_manifest(path: Path, expected: str, prefix: str = "") -> dict[str, Any]:
    """The run.json of a run directory (read within bounds), or a ScenarioError naming the
    directory, saying what is wrong (`prefix` first, e.g. "run A ") and what was
    `expected`."""
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise ScenarioError(str(path), "", f"{prefix}{what}: {expected}")
    run_json = path / "run.json"
    if not run_json.exists() and not run_json.is_symlink():
        raise ScenarioError(str(path), "", f"{prefix}no run.json: {expected}")
    try:
        return load_manifest(run_json, strict=False)
    except ScenarioError as exc:
        raise ScenarioError(str(run_json), exc.path, f"{prefix}{exc.message}; {expected}") from None


# the files and folders a run directory holds (report.html aside: the report's default)
RUN_FILES = (
    "run.json", "run.json.tmp", "scenario.yaml", LOCK, "replicas.parquet",
    ".replicas.parquet.tmp", "summary.csv", "summary.json", "plan.json", "timeline.json",
    "incidents.parquet", ".incidents.parquet.tmp",
)  # fmt: skip
RUN_FOLDERS = ("parts", "figures", REJECTED)


def run_directory_of(target: Path) -> Path | None:
    """The run directory that holds `target` (resolved), or None: the nearest of the target
    and its parents that has a run.json."""
    for folder in (target, *target.parents):
        with contextlib.suppress(OSError):
            if (folder / "run.json").exists() or (folder / "run.json").is_symlink():
                return folder
    return None


def protect_run_files(
    run_dir: str | Path | None, out: str | Path, option: str = "--out", instead: str = ""
) -> None:
    """Refuse an output path that is a link (a command creates regular files only and never
    follows one), a file of a run (its table, manifest, scenario, parts, figures...) whether
    it exists yet or not, of `run_dir` or of any other run directory the path lies in, or a
    run directory itself: writing there would destroy the run. Files a run does not hold
    (its report.html, a CSV export) may be written over. `instead`: the command's other way
    out, said after "give a path outside it" (e.g. "or leave --out out for
    RUN/report.html")."""
    out = Path(out)

    def refuse(what: str, run: Path) -> ScenarioError:
        return ScenarioError(
            option,
            str(out),
            f"{what} of the run {run}: writing there would destroy the run; give a path "
            f"outside it{', ' + instead if instead else ''}",
        )

    if out.is_symlink():
        raise ScenarioError(
            option,
            str(out),
            "a symbolic link: trainsim writes regular files only and never through a link "
            f"(it could point at another run's files); give another path"
            f"{', ' + instead if instead else ''}",
        )
    try:
        target = out.resolve()
    except OSError:
        return
    roots = [Path(run_dir)] if run_dir is not None else []
    owner = run_directory_of(target)
    if owner is not None:
        roots.append(owner)
    for run in roots:
        try:
            root = run.resolve()
        except OSError:
            continue
        if target == root:
            raise refuse("the directory", run)
        if target.parent == root and (
            target.name in RUN_FILES
            or (target.name.startswith(".") and target.name.endswith(".tmp"))
        ):  # its files, and the temporaries `replacing` renames into them
            raise refuse(f"the file {target.name}", run)
        if any(root / folder in (target, *target.parents) for folder in RUN_FOLDERS):
            raise refuse(f"inside {target.relative_to(root).parts[0]}/", run)
        if target.exists():  # a hard link to a run's file
            with contextlib.suppress(OSError):
                for name in RUN_FILES:
                    if (root / name).exists() and os.path.samefile(root / name, target):
                        raise refuse(f"a link to {name}", run)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary sibling of `path`, created exclusively (mkstemp: a new regular file, no
    link followed), to write `path`'s new content into; renamed over `path` when the block
    ends (a rename replaces a link or a file, it never writes into what a link points at),
    removed when it raises or is interrupted. A reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp's 0600: the run's files are readable as before
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_regular(path: Path, data: str | bytes) -> None:
    """Write `path` as a new regular file through `replacing`."""
    with replacing(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def finite(doc: Any) -> Any:
    """A document for JSON: NaN and infinities as None (null), recursively through dicts,
    lists and tuples; numpy scalars as Python numbers."""
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [finite(v) for v in doc]
    if getattr(doc, "shape", None) == () and hasattr(doc, "item"):  # a numpy scalar
        doc = doc.item()
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    return doc


def json_default(value: Any) -> Any:
    """`json.dumps(default=...)`: a numpy scalar as its Python value (a non-finite one as
    null), anything else as its text."""
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        return finite(value.item())
    return str(value)


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
