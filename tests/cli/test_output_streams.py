"""The executable's stdout and stderr as Unix tools treat them: a reader that goes away
(`| head -1`) ends the command quietly with exit 0; a closed stdout and one that cannot be
written (/dev/full) are exit 2 naming it; an ASCII-only encoding gets ASCII; TRAINSIM_DEBUG=0
means no traceback; a Ctrl-C while the command loads is one line and exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sim.model import calculator
from tests.conftest import ROOT, TINY, cli_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")


def trainsim(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    """`python -m sim` as the executable runs it (sim.cli.entry)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **kwargs}
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=cwd, env=env, timeout=120,
                          **options)  # fmt: skip


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def commands(tiny: Path, tmp_path: Path) -> dict[str, list[str]]:
    out = str(tmp_path / "out")
    run = ["run", str(tiny), "--replicas", "2", "--executor", "serial", "--out", out]
    return {"calc": ["calc", SMALL], "run": [*run, "--no-figures", "--no-progress"]}


@pytest.mark.parametrize("command", ["calc", "run"])
def test_a_reader_that_went_away_ends_the_command_quietly(tiny, tmp_path, command):
    """As `trainsim ... | head -1` once head has its line: the pipe's reader is gone before
    the command writes (deterministically: its read end is closed before it starts)."""
    read, write = os.pipe()
    os.close(read)
    try:
        r = trainsim(*commands(tiny, tmp_path)[command], cwd=tmp_path, stdout=write)
    finally:
        os.close(write)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "" if command == "calc" else "error" not in r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr


def test_a_closed_stdout_is_refused_naming_it(tmp_path):
    r = trainsim("calc", SMALL, cwd=tmp_path, stdout=None, preexec_fn=lambda: os.close(1))
    assert r.returncode == 2
    assert r.stderr.startswith("error: stdout is closed") and "Traceback" not in r.stderr


def test_a_closed_stderr_loses_the_warnings_not_the_answer(tmp_path):
    r = trainsim("validate", SMALL, cwd=tmp_path, stderr=None, preexec_fn=lambda: os.close(2))
    assert r.returncode == 0 and r.stdout.startswith("ok: ")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_stdout_is_exit_2_naming_the_file(tmp_path):
    with open("/dev/full", "w") as full:
        r = trainsim("calc", SMALL, cwd=tmp_path, stdout=full)
    assert r.returncode == 2, r.stderr
    assert "error: cannot write to stdout (/dev/full): No space left on device" in r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_an_ascii_only_encoding_gets_ascii(tiny, tmp_path):
    """The run's tables (±, —, boxes) and its answer, in ASCII look-alikes."""
    r = trainsim(*commands(tiny, tmp_path)["run"], cwd=tmp_path,
                 env={"PYTHONIOENCODING": "ascii"}, text=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode("ascii")  # every byte ASCII
    assert "?" not in out  # trainsim's own characters have look-alikes
    assert "answer:" in out and " - " in out
    assert b"internal error" not in r.stderr


@pytest.mark.parametrize("debug", ["0", "false", ""])
def test_trainsim_debug_off_prints_no_traceback(monkeypatch, debug):
    def broken(scenario):
        raise RuntimeError("a bug")

    monkeypatch.setattr(calculator, "calculate", broken)
    monkeypatch.setenv("TRAINSIM_DEBUG", debug)
    r = cli_in_process(["calc", SMALL])
    assert r.returncode == 1
    assert "internal error: RuntimeError: a bug" in r.stderr and "Traceback" not in r.stderr
    monkeypatch.setenv("TRAINSIM_DEBUG", "1")
    assert "Traceback" in cli_in_process(["calc", SMALL]).stderr


def test_ctrl_c_while_the_command_loads_is_one_line_and_130(tmp_path):
    """From the moment the entry point is imported (the console script's first import of
    trainsim), a Ctrl-C ends the loading command at once: no timing involved."""
    code = (
        "import os, signal, time\n"
        "import sim.cli.entry\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert (r.returncode, r.stderr) == (130, "aborted\n")
