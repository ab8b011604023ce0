"""Runs that survive: interrupt and resume, SIGKILL, a dying worker, concurrent runs into one
--out, unwritable outputs refused up front, provenance, slices and merge, adaptive replicas.

Each test runs the real CLI in a subprocess with its outputs in pytest's tmp_path.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT

REFERENCE = str(ROOT / "scenarios/llama70b-1k.yaml")
SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
QUIET = ["--no-progress", "--no-figures"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sim", *args]


def trainsim(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command(*args), capture_output=True, text=True, cwd=cwd, timeout=timeout)


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*/*") if p.is_dir())


def table(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "replicas.parquet")


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def start(tmp_path: Path, out: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        command("run", *args, "--out", str(tmp_path / out), *QUIET),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_parts(out: Path, timeout_s: float = 60.0) -> None:
    """Until the run has written its first chunk (the simulation is under way)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(out.glob("*/*/parts/*.parquet")):
            return
        time.sleep(0.05)
    raise AssertionError("the run wrote no chunk")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> pd.DataFrame:
    """6,000 replicas of the reference, seed 5, never interrupted."""
    tmp = tmp_path_factory.mktemp("full")
    r = trainsim("run", REFERENCE, "--replicas", "6000", "--seed", "5", "--workers", "2",
                 "--out", str(tmp), *QUIET, cwd=tmp)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(tmp)
    return table(run_dir)


def test_sigint_keeps_what_finished_and_resume_completes_it_identically(tmp_path, uninterrupted):
    process = start(tmp_path, "out", REFERENCE, "--replicas", "6000", "--seed", "5",
                    "--workers", "2")  # fmt: skip
    wait_for_parts(tmp_path / "out")
    workers = children(process.pid)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert time.monotonic() - sent < 3.0
    assert "Traceback" not in err
    # the hint is a command that runs as printed (trainsim's full path when not on PATH)
    (hint,) = [line for line in err.splitlines() if line.startswith("resume with: ")]
    printed = shlex.split(hint.removeprefix("resume with: "))
    assert printed[-3:-1] == ["run", "--resume"] and Path(printed[0]).name == "trainsim"
    assert not [pid for pid in workers if alive(pid)]  # no orphaned worker
    (run_dir,) = run_dirs(tmp_path / "out")
    assert manifest(run_dir)["status"] == "interrupted"
    assert not (run_dir / "replicas.parquet").exists()
    r = subprocess.run(printed, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert manifest(run_dir)["status"] == "complete"
    pd.testing.assert_frame_equal(table(run_dir), uninterrupted)


def test_sigkill_leaves_no_orphans_and_the_run_can_be_resumed(tmp_path, uninterrupted):
    process = start(tmp_path, "out", REFERENCE, "--replicas", "6000", "--seed", "5",
                    "--workers", "2")  # fmt: skip
    wait_for_parts(tmp_path / "out")
    workers = children(process.pid)
    assert workers
    process.kill()
    process.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if alive(pid)]  # workers die with their parent
    (run_dir,) = run_dirs(tmp_path / "out")
    assert manifest(run_dir)["status"] == "running"  # killed: it could not say otherwise
    r = trainsim("run", "--resume", str(run_dir), "--workers", "2", *QUIET, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), uninterrupted)


def test_a_killed_worker_costs_nothing(tmp_path, uninterrupted):
    process = start(tmp_path, "out", REFERENCE, "--replicas", "6000", "--seed", "5",
                    "--workers", "2")  # fmt: skip
    wait_for_parts(tmp_path / "out")
    os.kill(children(process.pid)[0], signal.SIGKILL)  # as the OOM killer would
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    (run_dir,) = run_dirs(tmp_path / "out")
    pd.testing.assert_frame_equal(table(run_dir), uninterrupted)


def test_concurrent_runs_into_one_out_all_complete(tmp_path):
    runs = [start(tmp_path, "out", SMALL, "--replicas", "20", "--workers", "1") for _ in range(4)]
    for process in runs:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    dirs = run_dirs(tmp_path / "out")
    assert len(dirs) == 4
    assert all(manifest(d)["status"] == "complete" for d in dirs)
    assert all(len(table(d)) == 20 for d in dirs)


@pytest.mark.parametrize("case", ["read-only", "a read-only file system", "a file", "too long"])
def test_an_unwritable_out_is_refused_before_simulating(tmp_path, case):
    if case == "read-only":
        out = tmp_path / "ro"
        out.mkdir()
        out.chmod(0o555)
        if os.access(out, os.W_OK):  # root writes anywhere
            pytest.skip("running as root: a read-only directory is still writable")
    elif case == "a read-only file system":
        out = Path("/proc/trainsim-out")  # even root cannot create it
    elif case == "a file":
        out = tmp_path / "file"
        out.write_text("not a directory")
    else:
        out = tmp_path / ("x" * 300)
    started = time.monotonic()
    r = trainsim("run", REFERENCE, "--replicas", "100000", "--out", str(out), *QUIET, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "--out" in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - started < 20  # refused before 100,000 replicas


def test_provenance_and_the_saved_scenario_reproduces_the_table(tmp_path):
    r = trainsim("run", SMALL, "--replicas", "7", "--seed", "5", "--workers", "1",
                 "--out", str(tmp_path / "a"), "--json", *QUIET, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    (run_dir,) = run_dirs(tmp_path / "a")
    assert doc["run_dir"] == str(run_dir) and doc["seed"] == 5 and doc["trainsim_version"]
    info = manifest(run_dir)
    assert info["status"] == "complete" and info["seed"] == 5 and info["replicas"] == 7
    assert info["command"][1:3] == ["run", SMALL] and info["trainsim_version"]
    assert info["executor"] == "serial" and info["host"] and info["started"] <= info["ended"]
    again = trainsim("run", str(run_dir / "scenario.yaml"), "--out", str(tmp_path / "b"),
                     "--workers", "1", *QUIET, cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    (second,) = run_dirs(tmp_path / "b")
    pd.testing.assert_frame_equal(table(second), table(run_dir))


def test_slices_merged_equal_the_whole_sweep(tmp_path):
    sweep = ["--param", "checkpoint.interval_steps=250,500,1000", "--replicas", "10",
             "--workers", "1"]  # fmt: skip
    whole = trainsim("run", SMALL, *sweep, "--out", str(tmp_path / "whole"), *QUIET, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    for i, points in enumerate(["0:1", "1:3"]):
        r = trainsim("run", SMALL, *sweep, "--points", points, "--out",
                     str(tmp_path / f"slice{i}"), *QUIET, cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stderr
    slices = [str(d) for i in range(2) for d in run_dirs(tmp_path / f"slice{i}")]
    r = trainsim("merge", *slices, "--out", str(tmp_path / "merged"), "--no-figures",
                 cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (merged,) = run_dirs(tmp_path / "merged")
    (full,) = run_dirs(tmp_path / "whole")
    pd.testing.assert_frame_equal(table(merged), table(full))
    bad = trainsim("merge", slices[0], slices[0], "--out", str(tmp_path / "m2"), cwd=tmp_path)
    assert bad.returncode == 2 and "also in" in bad.stderr


def test_target_ci_stops_early_and_keeps_the_replicas_it_ran(tmp_path):
    r = trainsim("run", REFERENCE, "--replicas", "3000", "--target-ci", "0.002", "--workers",
                 "1", "--json", "--out", str(tmp_path / "a"), *QUIET, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (point,) = json.loads(r.stdout)["points"]
    mean = point["metrics"]["time_to_train_days"]["mean"]
    assert point["ci_half_width_days"] <= 0.002 * mean and point["replicas"] < 3000
    (run_dir,) = run_dirs(tmp_path / "a")
    adaptive = table(run_dir)
    fixed = trainsim("run", REFERENCE, "--replicas", str(point["replicas"]), "--workers", "1",
                     "--out", str(tmp_path / "b"), *QUIET, cwd=tmp_path)  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    (fixed_dir,) = run_dirs(tmp_path / "b")
    pd.testing.assert_frame_equal(adaptive, table(fixed_dir))
