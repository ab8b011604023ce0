"""The suite's own guard (tests/conftest.py): tests write only to their temporary
directories, a test that writes into the checkout is named when the check fires, and a
user's run writing results/ in another shell meanwhile does not fail the suite.

The guard's hook runs here on a stand-in checkout in tmp_path, so that nothing is ever
written into the real one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tests.conftest as guard
from tests.conftest import ROOT, cli_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
# a Python subprocess writing into the stand-in checkout (argv[1]): a stray figure, a run
WRITER = """
import pathlib, sys
root = pathlib.Path(sys.argv[1])
(root / "stray.png").write_bytes(b"")
(root / "results" / "run-1").mkdir()
(root / "results" / "run-1" / "run.json").write_text("{}")
"""


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A stand-in checkout: sources, docs and a results/ directory."""
    root = tmp_path / "checkout"
    for part in ("sim", "docs", "results/old-run", "sim/__pycache__"):
        (root / part).mkdir(parents=True)
    (root / "sim/cli.py").write_text("")
    return root


@pytest.fixture
def recording(checkout):
    """This process's hook watching the stand-in checkout for a pretend test; whatever it
    watched before is put back."""
    w = guard._Writes
    saved = w.root, w.basetemp, w.test, w.paths
    # the stand-in lives in pytest's temporary directories, which the guard skips
    w.root, w.basetemp = os.path.normpath(str(checkout)), ""
    w.test, w.paths = "tests/x.py::test_w", []
    try:
        yield w
    finally:
        w.root, w.basetemp, w.test, w.paths = saved


def child_env(checkout: Path, log: Path | None) -> dict[str, str]:
    """The environment of a test's subprocess, its guard watching the stand-in checkout
    (log None: a process the suite did not start, such as a user's run)."""
    env = {**os.environ, "TRAINSIM_GUARD_ROOT": str(checkout), "TRAINSIM_GUARD_BASETEMP": ""}
    env.pop("TRAINSIM_GUARD_LOG", None)
    if log is not None:
        env["TRAINSIM_GUARD_LOG"] = str(log)
    return env


def test_the_default_output_root_is_a_temporary_directory(tmp_path):
    root = Path(os.environ[guard.RESULTS_ENV])
    assert not root.is_relative_to(ROOT)
    before = set(root.rglob("run.json"))
    r = cli_in_process(["run", SMALL, "--replicas", "2", "--workers", "1", "--no-progress",
                        "--no-figures"], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (new,) = set(root.rglob("run.json")) - before  # the run went there ...
    assert new.parent.parent.name == "llama7b-128"
    assert not (tmp_path / "results").exists()  # ... not to results/ of the working directory
    assert guard.RESULTS_ENV in cli_in_process(["run", "--help"], tmp_path).stdout


def test_writes_of_this_process_into_the_checkout_are_recorded(checkout, recording):
    (checkout / "notes.txt").write_text("x")
    (checkout / "results" / "new-run").mkdir()  # results/ too: the test's own doing
    (checkout / "docs").mkdir(exist_ok=True)  # exists: nothing created
    with open(checkout / "sim/cli.py", "a") as file:  # an existing file changed
        file.write("#")
    os.rename(checkout / "notes.txt", checkout / "docs/notes.txt")
    (checkout / "sim/__pycache__/cli.pyc").write_bytes(b"")  # a cache: not counted
    (checkout / "sim/cli.py").read_text()  # reading is fine
    (checkout.parent / "outside.txt").write_text("x")  # outside the checkout
    assert sorted(set(recording.paths)) == [
        "docs/notes.txt",
        "notes.txt",
        "results/new-run",
        "sim/cli.py",
    ]
    message = guard.repository_problems(recording.test, recording.paths)
    assert message.startswith("tests/x.py::test_w wrote into the repository (")
    assert "results/new-run" in message and "tmp_path" in message


def test_a_subprocess_of_the_test_logs_its_writes(checkout, tmp_path):
    log = tmp_path / "guard.log"
    subprocess.run([sys.executable, "-c", WRITER, str(checkout)], env=child_env(checkout, log),
                   check=True)  # fmt: skip
    written = guard.subprocess_writes(log)
    assert sorted(set(written)) == ["results/run-1", "results/run-1/run.json", "stray.png"]
    message = guard.repository_problems("tests/y.py::test_plot", written)
    assert "tests/y.py::test_plot" in message and "stray.png" in message


def test_a_users_run_meanwhile_does_not_count(checkout, tmp_path, recording):
    """A README command run in another shell writes results/ (and more): it is neither
    this process nor a subprocess the running test started."""
    log = tmp_path / "guard.log"
    subprocess.run([sys.executable, "-c", WRITER, str(checkout)], env=child_env(checkout, None),
                   check=True)  # fmt: skip
    assert (checkout / "results/run-1/run.json").is_file()
    assert guard.subprocess_writes(log) == [] and recording.paths == []
    assert guard.repository_problems(recording.test, recording.paths) is None


def test_every_python_subprocess_loads_the_guard(tmp_path):
    code = "import sys; print('sitecustomize' in sys.modules, len(sys._getframe().f_globals))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split()[0] == "True"
    assert os.environ["TRAINSIM_GUARD_LOG"]  # the running test's log
    assert os.environ["TRAINSIM_GUARD_ROOT"] == os.path.normpath(str(ROOT))


def test_removing_a_directory_elsewhere_by_descriptor_is_not_counted(
    checkout, recording, tmp_path, monkeypatch
):
    # shutil.rmtree removes by names relative to a directory descriptor; from a working
    # directory inside the checkout those names must not be read as the checkout's paths
    elsewhere = tmp_path / "elsewhere" / "run"
    (elsewhere / "parts").mkdir(parents=True)
    (elsewhere / "parts" / "p0.parquet").write_bytes(b"")
    monkeypatch.chdir(checkout)
    shutil.rmtree(tmp_path / "elsewhere")
    assert recording.paths == []
