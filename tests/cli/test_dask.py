"""The dask executor through the CLI: a local cluster and a running scheduler give the table
of a one-worker run, and a scheduler that is not there is a clear error, quickly.

Each run is the real CLI in a subprocess, in pytest's tmp_path. Every process a test
starts carries a tag in its environment (inherited by the cluster's workers), so the
test can check that none is left behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="the dask executor needs Dask's distributed (pip install -e '.[dev]' or '.[dask]')",
)

REFERENCE = str(ROOT / "scenarios/llama70b-1k.yaml")
SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
SWEEP = ["--param", "checkpoint.interval_steps=250,1000", "--replicas", "30"]
QUIET = ["--no-progress", "--no-figures"]
TAG = "TRAINSIM_TEST_DASK"


def tagged() -> dict[str, str]:
    """The environment for a process this module starts: ours, with a fresh tag."""
    return {**os.environ, TAG: uuid.uuid4().hex}


def trainsim(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=180,
    )


def table(out: Path) -> pd.DataFrame:
    (path,) = list(out.rglob("replicas.parquet"))
    return pd.read_parquet(path)


def tagged_processes(tag: str) -> list[int]:
    """Live processes whose environment holds the tag (ps cannot tell ours from others')."""
    found = []
    needle = f"{TAG}={tag}".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found.append(int(proc.name))
    return found


def assert_none_left(env: dict[str, str], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while (left := tagged_processes(env[TAG])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes left behind: {ps(left)}"


def ps(pids: list[int]) -> str:
    return subprocess.run(
        ["ps", "-o", "pid,ppid,args", "-p", ",".join(map(str, pids))],
        capture_output=True,
        text=True,
    ).stdout


def dask_command(role: str) -> list[str]:
    """`dask scheduler` / `dask worker`, or the modules behind them without the dask CLI."""
    cli = Path(sys.executable).with_name("dask")
    if cli.exists() or (cli := shutil.which("dask")):
        return [str(cli), role]
    return [sys.executable, "-m", f"distributed.cli.dask_{role}"]


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory) -> pd.DataFrame:
    """The sweep with --workers 1: the table every executor must reproduce."""
    where = tmp_path_factory.mktemp("one-worker")
    r = trainsim(
        "run", SMALL, *SWEEP, "--workers", "1", "--out", "out", *QUIET, cwd=where, env=tagged()
    )
    assert r.returncode == 0, r.stderr
    return table(where / "out")


def test_a_local_cluster_gives_the_table_of_one_worker(tmp_path, one_worker):
    env = tagged()
    r = trainsim(
        "run", SMALL, *SWEEP, "--executor", "dask", "--workers", "2",
        "--out", str(tmp_path / "out"), *QUIET, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", "Dask's logs must not reach the terminal"
    got = table(tmp_path / "out")
    assert len(got) == 60 and (got["error"] == "").all()
    assert got.equals(one_worker)
    assert_none_left(env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """A scheduler and two single-threaded workers on localhost, as subprocesses; torn
    down (and checked to be gone) after the module's tests. Yields (address, env)."""
    from distributed import Client

    where = tmp_path_factory.mktemp("cluster")
    env = tagged()
    scheduler_file = where / "scheduler.json"
    started: list[subprocess.Popen] = []

    def start(role: str, *args: str) -> None:
        log = (where / f"{role}{len(started)}.log").open("w")
        started.append(
            subprocess.Popen(
                [*dask_command(role), *args, "--no-dashboard", "--host", "127.0.0.1"],
                cwd=where,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: torn down as one
            )
        )

    try:
        start(
            "scheduler", "--port", "0", "--dashboard-address", "127.0.0.1:0",
            "--scheduler-file", str(scheduler_file),
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            assert started[0].poll() is None, (where / "scheduler0.log").read_text()
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for _ in range(2):
            start(
                "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "1",
                "--nthreads", "1", "--local-directory", str(where / "scratch"),
            )  # fmt: skip
        with Client(address, timeout=30, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
        yield address, env
    finally:
        for process in reversed(started):  # workers first, then the scheduler
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
    assert_none_left(env)


def scheduler_idle(address: str, within_s: float = 10.0) -> bool:
    """The scheduler holds no task and no worker is busy (within a few seconds)."""
    from distributed import Client

    with Client(address, timeout=30, set_as_default=False) as client:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            tasks = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
            if not tasks and not any(client.processing().values()):
                return True
            time.sleep(0.1)
    return False


def test_a_running_scheduler_gives_the_table_of_one_worker(tmp_path, cluster, one_worker):
    address, env = cluster
    r = trainsim(
        "run", SMALL, *SWEEP, "--executor", "dask", "--scheduler", address,
        "--out", str(tmp_path / "out"), *QUIET, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert table(tmp_path / "out").equals(one_worker)
    assert scheduler_idle(address), "the run's tasks must be released, not kept"


def test_ctrl_c_cancels_the_tasks_and_returns_quickly(tmp_path, cluster):
    address, env = cluster
    out = tmp_path / "out"
    run = subprocess.Popen(
        [
            sys.executable, "-m", "sim", "run", REFERENCE, "--replicas", "2000",
            "--executor", "dask", "--scheduler", address, "--out", str(out), *QUIET,
        ],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any(out.glob("*/*/parts/*.parquet")) and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()[1]
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        began = time.monotonic()
        _, err = run.communicate(timeout=30)
        took = time.monotonic() - began
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert "trainsim run --resume" in err.split("resume with: ", 1)[1]  # trainsim's full path
    assert took < 6, f"took {took:.1f} s to stop"
    assert scheduler_idle(address, within_s=5), "pending tasks must be cancelled"


def test_an_unreachable_scheduler_is_a_clear_error_quickly(tmp_path):
    address = "tcp://127.0.0.1:1"
    began = time.monotonic()
    r = trainsim(
        "run", SMALL, "--replicas", "4", "--executor", "dask", "--scheduler", address,
        "--out", str(tmp_path / "out"), *QUIET, cwd=tmp_path, env=tagged(),
    )  # fmt: skip
    took = time.monotonic() - began
    assert r.returncode == 2, r.stderr
    message = r.stderr.strip()
    assert message.startswith(f"error: --scheduler: {address}: cannot reach a Dask scheduler")
    assert "connection refused" in message
    assert "\n" not in message and "Traceback" not in message  # one paragraph
    assert took < 20, f"took {took:.1f} s"
