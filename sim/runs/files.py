"""How a run's files are written and read: each a new regular file renamed into place
(`replacing`, `write_regular`), never through a link; reads within a bound; a run's own
files and folders kept from being overwritten; a full disk told from a bug; documents
made fit for JSON.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sim.model.scenario_set import ScenarioError

REJECTED = "rejected-parts"
# opening a file never follows a link in its last component (not on Windows)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# errors of a full or unwritable disk: said as such, with what was kept (not "a bug")
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


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


# the files and folders a run directory holds (report.html aside: the report's default)
LOCK = "run.lock"  # held by the one process that writes the directory (sim.runs.lock)

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
    run_dir: str | Path | Iterable[str | Path] | None,
    out: str | Path,
    option: str = "--out",
    instead: str = "",
) -> None:
    """Refuse an output path that is a link (a command creates regular files only and never
    follows one), a file of a run (its table, manifest, scenario, parts, figures...) whether
    it exists yet or not, of `run_dir` (the command's own run directory, or several: compare's
    two) or of any other run directory the path lies in, a run directory itself, or any path
    inside another run's directory than the command's own: writing there would destroy the run
    (another run's report.html or replicas.csv is that run's, not this command's). Files the
    command's own run does not hold (its report.html, a CSV export) may be written over.
    `instead`: the command's other way out, said after "give a path outside it" (e.g. "or
    leave --out out for RUN/report.html")."""
    out = Path(out).expanduser()

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
    if run_dir is None:
        given: list[Path] = []
    elif isinstance(run_dir, str | os.PathLike):
        given = [Path(run_dir).expanduser()]
    else:
        given = [Path(run).expanduser() for run in run_dir]
    own = set()
    for run in given:
        with contextlib.suppress(OSError):
            own.add(run.resolve())
    roots = list(given)
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
        if root not in own and root in target.parents:
            # another run's directory: its report.html, replicas.csv... are its own
            raise ScenarioError(
                option,
                str(out),
                f"inside another run, {run}: writing there would destroy the run's own "
                f"files (its report, its exports); give a path outside it"
                f"{', ' + instead if instead else ''}",
            )


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
