"""Shared builders: a tiny scenario with round numbers so engine tests have exact answers.

Step time 1 s (6e12 FLOPs per step on 4 GPUs of 2 TFLOPS at MFU 0.75), 1,000
steps, a 10 GB checkpoint written at 1 GB/s (10 s) and loaded at 2 GB/s (5 s).
"""

from __future__ import annotations

import contextlib
import copy
import io
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from sim import columns
from sim.engine.ledger import DOWNTIME_PARTS
from sim.scenario import load_document
from sim.schema import Scenario

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


def cli_in_process(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A `trainsim` command run in this process (`sim.cli.main`, as the entry point calls
    it), from `cwd`: its exit code and what it printed. Much quicker than a subprocess."""
    from sim.cli import main

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
    """`sim.cli.main` in this process, its output read from capsys: (exit code, stdout,
    stderr)."""
    from sim.cli import main

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
    from sim.engine.failures import FailureSource

    log: list = []

    class Recording(FailureSource):
        def __init__(self, env, failure_class, nodes, gpus_per_node, rng, strike):
            def recorded(failure):
                log.append(failure)
                strike(failure)

            super().__init__(env, failure_class, nodes, gpus_per_node, rng, recorded)

    with mock.patch.object(simulate, "FailureSource", Recording):
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

# What running tests may leave behind anyway: bytecode and tool caches (all git-ignored).
_HARMLESS = ("__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache")


def _untracked() -> set[str] | None:
    """Paths git reports as untracked or ignored (None outside a git checkout)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    paths = {line[3:] for line in out.stdout.splitlines() if line[:2] in ("??", "!!")}
    return {p for p in paths if not any(part in _HARMLESS for part in Path(p).parts)}


@pytest.fixture(scope="session", autouse=True)
def repository_stays_clean():
    """Tests write only to temporary directories: a test run must leave no new file in the
    checkout (results/ above all)."""
    before = _untracked()
    yield
    after = _untracked()
    if before is not None and after is not None:
        new = sorted(after - before)
        assert not new, f"the tests left files in the repository: {new[:10]}"
