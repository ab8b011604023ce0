"""Shared builders: a tiny scenario with round numbers so engine tests have exact answers.

Step time 1 s (6e12 FLOPs per step on 4 GPUs of 2 TFLOPS at MFU 0.75), 1,000
steps, a 10 GB checkpoint written at 1 GB/s (10 s) and loaded at 2 GB/s (5 s).
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from sim.engine.ledger import DOWNTIME_PARTS
from sim.model import columns
from sim.model.scenario import load_document
from sim.model.schema import Scenario

# the cost breakdown columns, summing to cost_usd (docs/metrics.md)
COST_PARTS = columns.COST_COLUMNS

ROOT = Path(__file__).resolve().parents[1]

TINY: dict[str, Any] = {
    "name": "tiny",
    "model": {
        "params": 1.0e9,
        "tokens": 1.0e6,
        "global_batch_tokens": 1000,
        "flops_per_token": 6.0e9,
    },
    "cluster": {
        "gpu": {"name": "test", "peak_tflops": 2.0},
        "nodes": 2,
        "gpus_per_node": 2,
        "spare_nodes": 0,
    },
    "performance": {"mfu": 0.75},
    "storage": {
        "checkpoint_tier": {
            "kind": "lustre",
            "write_GB_s": 1.0,
            "read_GB_s": 2.0,
            "capacity_TB": 1.0,
            "latency_ms": 0.0,
        },
        "client_GB_s_per_node": 100.0,
    },
    "checkpoint": {"interval_steps": 100, "state_bytes_per_param": 10},
    "failures": [],
    "recovery": {"policy": "restart", "restart_minutes": 10},
    "simulation": {"replicas": 10, "seed": 1, "horizon_days": 30},
}


def merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def identity_error(record) -> float:
    """Relative error of wall = ideal + slowdown + lost_work + checkpoint_stall + downtime,
    and of the identities below it: downtime = the sum of its parts (relative to the wall),
    cost_usd = the sum of the cost breakdown. The largest of the three."""
    r = record
    parts = (
        r.ideal_hours
        + r.slowdown_hours
        + r.lost_work_hours
        + r.checkpoint_stall_hours
        + r.downtime_hours
    )
    wall = max(r.wall_hours, 1e-12)
    downtime = sum(getattr(r, part.removesuffix("_s") + "_hours") for part in DOWNTIME_PARTS)
    costs = sum(getattr(r, column) for column in COST_PARTS)
    return max(
        abs(parts - r.wall_hours) / wall,
        abs(downtime - r.downtime_hours) / wall,
        abs(costs - r.cost_usd) / max(r.cost_usd, 1e-12),
    )


def as_class(i: int, spec: dict) -> dict:
    """A failure class of the schema from drawn keys: those a scope does not allow are
    dropped, and a distribution gets its shape."""
    out = {"name": f"c{i}", **spec}
    if spec["scope"] in ("job", "link", "storage"):
        out["replace"] = False
    if spec["scope"] != "storage":
        out["loses_data"] = False
    if spec["distribution"] == "weibull":
        out["weibull_shape"] = 0.8
    if spec["distribution"] == "lognormal":
        out["lognormal_sigma"] = 1.0
    return out


def tiny(**changes: Any) -> Scenario:
    """The tiny scenario with section-wise changes: tiny(checkpoint={"interval_steps": 50})."""
    return load_document(merge(TINY, changes), "tiny").base


def running_as(monkeypatch, folder: Path) -> Path:
    """This process runs as an executable `trainsim` in `folder` (made here), off PATH:
    for the hints that say how to call trainsim again."""
    exe = folder / "trainsim"
    folder.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(exe), "run"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return exe


def cli_in_process(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A `trainsim` command run in this process (`sim.cli.commands.main`, as the entry point calls
    it), from `cwd`: its exit code and what it printed. Much quicker than a subprocess."""
    from sim.cli.commands import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            main(list(args))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def main_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """`sim.cli.commands.main` in this process, its output read from capsys: (exit code, stdout,
    stderr)."""
    from sim.cli.commands import main

    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def flat(text: str) -> str:
    """Text with every run of whitespace one space (rich wraps lines at the terminal)."""
    return " ".join(text.split())


@pytest.fixture
def root() -> Path:
    return ROOT


# --------------------------------------------------------------------------- independent checks
#
# Helpers that recount what a RunRecord reports from something the engine did not add up
# itself: the failures its sources actually emitted, and the timeline it traced.

# event kinds booked to downtime; the node waits among them are the record's node wait
TIMELINE_NODE_WAITS = ("wait for nodes", "wait for pool nodes")
TIMELINE_DOWNTIME = (
    "detect",
    "restart",
    "rescale",
    "wait for storage",
    "maintenance",
    "health check",
    "wait for on-call",
    "load corrupt checkpoint",
    *TIMELINE_NODE_WAITS,
)


@contextlib.contextmanager
def recorded_strikes() -> Iterator[list]:
    """Record every Failure the engine's failure sources emit (their time and class), before
    the engine decides whether to count it. Injected failures do not pass through here."""
    from sim.engine import simulate
    from sim.engine.failures import FailureSource, SuperposedSource

    log: list = []

    def recording(base: type) -> type:
        class Recording(base):
            def __init__(self, env, failure_class, nodes, gpus_per_node, rng, strike):
                def recorded(failure):
                    log.append(failure)
                    strike(failure)

                super().__init__(env, failure_class, nodes, gpus_per_node, rng, recorded)

        return Recording

    with (
        mock.patch.object(simulate, "FailureSource", recording(FailureSource)),
        mock.patch.object(simulate, "SuperposedSource", recording(SuperposedSource)),
    ):
        yield log


def timeline_problems(record, tol_s: float = 1e-6) -> list[str]:
    """How the record's timeline disagrees with its own figures (empty when it agrees).

    The events of the one job track must tile [0, wall] without gaps or overlaps; the
    durations of each kind must add up to the record's buckets (train = ideal + slowdown +
    checkpoint stall, lost work, the downtime kinds = downtime, node waits = node wait);
    there is one restart event per restart; a finished run ends training (its final stretch
    is kept whole: time traced after it is time traced in the wrong place)."""
    events = record.timeline
    wall_s = record.wall_hours * 3600
    problems = []
    unknown = {e["name"] for e in events} - {"train", "lost work", *TIMELINE_DOWNTIME}
    if unknown:
        problems.append(f"unknown event kinds {sorted(unknown)}")

    def total(*names: str) -> float:
        return sum(e["duration_s"] for e in events if e["name"] in names)

    buckets = {
        "train": (
            total("train"),
            record.ideal_hours + record.slowdown_hours + record.checkpoint_stall_hours,
        ),
        "lost work": (total("lost work"), record.lost_work_hours),
        "downtime": (total(*TIMELINE_DOWNTIME), record.downtime_hours),
        "node waits": (total(*TIMELINE_NODE_WAITS), record.node_wait_hours),
    }
    for name, (traced_s, hours) in buckets.items():
        if abs(traced_s - hours * 3600) > tol_s:
            problems.append(f"{name}: traced {traced_s:.6f} s, recorded {hours * 3600:.6f} s")
    end_s = 0.0
    for e in sorted(events, key=lambda e: (e["start_s"], e["duration_s"])):
        if e["start_s"] > end_s + tol_s:
            problems.append(f"gap {end_s:.6f}-{e['start_s']:.6f} s before {e['name']!r}")
        elif e["start_s"] < end_s - tol_s:
            problems.append(
                f"{e['name']!r} at {e['start_s']:.6f} s overlaps what ends at {end_s:.6f} s"
            )
        end_s = e["start_s"] + e["duration_s"]
    if abs(end_s - wall_s) > tol_s:
        problems.append(f"the last event ends at {end_s:.6f} s, the wall clock at {wall_s:.6f} s")
    restarts = sum(e["name"] == "restart" for e in events)
    if restarts != record.restarts:
        problems.append(f"{restarts} restart events, {record.restarts} restarts recorded")
    if record.finished:
        last = max(
            (e for e in events if e["duration_s"] > tol_s),
            key=lambda e: e["start_s"],
            default=None,
        )
        if last is not None and last["name"] != "train":
            problems.append(f"a finished run that ends with {last['name']!r}, not training")
    return problems


# --------------------------------------------------------------------------- the repository stays clean
#
# Tests write only to their own temporary directories. What a test itself creates is
# checked, never the checkout as a whole, so that a user's run writing results/ in another
# shell (or a new file saved in an editor) while the suite runs fails no test:
#
# - The CLI's default output root (`--out`, else $TRAINSIM_RESULTS, else results/) is a
#   session temporary directory: a command a test runs without --out, in this process or
#   a subprocess, writes there.
# - An audit hook (sys.addaudithook) records every file this process opens for writing,
#   and every directory it creates, renames or removes, inside the checkout during a test.
# - The test's Python subprocesses (the `trainsim` command, notebook kernels) record the
#   same with the same hook: PYTHONPATH leads them to a `sitecustomize` that installs it
#   and appends what it saw to the log the running test names ($TRAINSIM_GUARD_LOG).
#
# Either fails that test at its teardown, naming it and the paths. Caches (bytecode,
# pytest, hypothesis, ruff) and pytest's temporary directories are never counted.

RESULTS_ENV = "TRAINSIM_RESULTS"  # sim.cli.arguments's default output root
GUARD_ENV = ("TRAINSIM_GUARD_ROOT", "TRAINSIM_GUARD_LOG", "TRAINSIM_GUARD_BASETEMP")

# The hook, shared by this process and (as the text of a sitecustomize module) its Python
# subprocesses: `record(relative_path)` is what each does with a write it sees.
HOOK = r"""
import os as _os

_HARMLESS = ("__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".git")
_WRITE_FLAGS = _os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_TRUNC | _os.O_APPEND
_WATCHED = frozenset({"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir",
                      "os.symlink", "os.link", "os.truncate", "shutil.rmtree"})


def _inside(path, root, basetemp):
    # the path relative to the checkout `root` when inside it, not a cache nor pytest's
    if isinstance(path, int) or path is None or not root:
        return None
    try:
        full = _os.path.normpath(_os.path.join(_os.getcwd(), _os.fsdecode(path)))
    except (TypeError, ValueError, OSError):
        return None
    if full != root and not full.startswith(root + _os.sep):
        return None
    if basetemp and (full == basetemp or full.startswith(basetemp + _os.sep)):
        return None
    relative = _os.path.relpath(full, root)
    if any(part in _HARMLESS for part in relative.split(_os.sep)):
        return None
    return relative


_DIR_FD = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "os.rename": 2, "os.symlink": 2,
           "os.link": 2}  # where the event's dir_fd argument(s) start


def _targets(event, args):
    # a path relative to a directory descriptor (shutil.rmtree, TemporaryDirectory's
    # cleanup) cannot be placed: it is not relative to the working directory (-1: none)
    start = _DIR_FD.get(event)
    if start is not None and any(fd not in (None, -1) for fd in args[start:start + 2]):
        return []
    if event == "open":
        path, mode, flags = args
        if isinstance(mode, str):
            writes = any(c in mode for c in "wax+")
        else:
            writes = isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        return [path] if writes else []
    if event == "os.rename":
        return [args[0], args[1]]
    if event in ("os.symlink", "os.link"):
        return [args[1]]
    if event == "os.mkdir":
        try:
            return [] if _os.path.exists(_os.fsdecode(args[0])) else [args[0]]
        except (TypeError, ValueError):
            return []
    return [args[0]]


def make_hook(where, record):
    # an audit hook calling record(relative path) for each write into the checkout;
    # where() gives (root, basetemp), or None while nothing is watched
    def hook(event, args):
        if event not in _WATCHED:
            return
        try:
            place = where()
            if place is None:
                return
            for target in _targets(event, args):
                relative = _inside(target, *place)
                if relative is not None:
                    record(relative)
        except Exception:  # an audit hook must never break what it watches
            return
    return hook
"""

# What a subprocess runs at startup (its `sitecustomize`): the hook, logging to the file
# the environment names while a test runs.
CHILD = (
    HOOK
    + r"""

def _where():
    log = _os.environ.get("TRAINSIM_GUARD_LOG")
    return (_os.environ.get("TRAINSIM_GUARD_ROOT"), _os.environ.get("TRAINSIM_GUARD_BASETEMP")) if log else None


def _record(relative):
    fd = _os.open(_os.environ["TRAINSIM_GUARD_LOG"], _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND, 0o600)
    try:
        _os.write(fd, (relative + "\n").encode("utf-8", "surrogateescape"))
    finally:
        _os.close(fd)


import sys as _sys

_sys.addaudithook(make_hook(_where, _record))
"""
)

_guard: dict[str, Any] = {}
exec(compile(HOOK, "<repository guard>", "exec"), _guard)  # noqa: S102 - our own text


class _Writes:
    """What the running test wrote into the checkout (the audit hook fills it)."""

    root = os.path.normpath(str(ROOT))
    logs = ""  # the directory of the subprocesses' logs (and of their sitecustomize)
    basetemp = ""  # pytest's temporary directories (--basetemp may put them in the checkout)
    test: str | None = None
    paths: list[str] = []


sys.addaudithook(
    _guard["make_hook"](
        lambda: (_Writes.root, _Writes.basetemp) if _Writes.test is not None else None,
        lambda relative: _Writes.paths.append(relative),
    )
)


@pytest.fixture(scope="session", autouse=True)
def guarded_session(tmp_path_factory):
    """For the whole session: the CLI's default output root is a temporary directory, and
    Python subprocesses load the hook (a sitecustomize found through PYTHONPATH)."""
    saved = {name: os.environ.get(name) for name in (RESULTS_ENV, "PYTHONPATH", *GUARD_ENV)}
    _Writes.basetemp = os.path.normpath(str(tmp_path_factory.getbasetemp()))
    site = tmp_path_factory.mktemp("guard")
    (site / "sitecustomize.py").write_text(CHILD)
    os.environ[RESULTS_ENV] = str(tmp_path_factory.mktemp("default-results"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), saved["PYTHONPATH"]]))
    os.environ["TRAINSIM_GUARD_ROOT"] = _Writes.root
    os.environ["TRAINSIM_GUARD_BASETEMP"] = _Writes.basetemp
    _Writes.logs = str(site)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session", autouse=True)
def pipe_width():
    """Commands print at a pipe's width (sim/show/console.py: COLUMNS, else 120), whatever the
    terminal that runs pytest exports: without this, its subprocesses were seen to inherit
    COLUMNS=80 from the process's C environment, which os.environ does not show."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "120"
    yield
    if saved is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = saved


def repository_problems(test: str, written: list[str]) -> str | None:
    """The failure message for what a test wrote into the checkout (None: nothing)."""
    paths = sorted(set(written))
    if not paths:
        return None
    return (
        f"{test} wrote into the repository ({', '.join(paths[:10])}"
        f"{', ...' if len(paths) > 10 else ''}): tests write only to tmp_path"
    )


def subprocess_writes(log: Path) -> list[str]:
    """What the test's Python subprocesses logged (nothing when none wrote)."""
    try:
        return log.read_text(errors="replace").splitlines()
    except OSError:
        return []


@pytest.fixture(autouse=True)
def repository_stays_clean(request):
    """Fail the test that writes into the checkout, at its own teardown, naming it."""
    log = Path(_Writes.logs) / f"{os.getpid()}-{id(request)}.log"
    log.unlink(missing_ok=True)
    os.environ["TRAINSIM_GUARD_LOG"] = str(log)
    _Writes.test, _Writes.paths = request.node.nodeid, []
    try:
        yield
    finally:
        written = _Writes.paths
        _Writes.test, _Writes.paths = None, []
        os.environ.pop("TRAINSIM_GUARD_LOG", None)
    problem = repository_problems(request.node.nodeid, written + subprocess_writes(log))
    log.unlink(missing_ok=True)
    if problem:
        pytest.fail(problem)
