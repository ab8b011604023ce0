"""A stopped merge, the hints that say how to call trainsim again (they run as printed),
options `run --resume` cannot honour, outputs that would overwrite a run's files, the
plan's progress bar once a round is done, and a Ctrl-C at any moment of the executable."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pytest

from sim.model.scenario_set import ScenarioError
from sim.runs import api, export
from sim.runs.files import protect_run_files
from sim.runs.manifest import resume_command
from sim.runs.montecarlo import Interrupted
from sim.show import compare_figure
from tests.conftest import ROOT, cli_in_process, running_as

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
SWEEP = ["--param", "checkpoint.interval_steps=250,500", "--replicas", "4", "--workers", "1"]
QUIET = ["--no-progress", "--no-figures"]


@pytest.fixture
def signals_restored():
    """A stop's exit ignores SIGINT/SIGTERM from then on: in-process, put them back (the
    processes later tests start would inherit the ignoring)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def test_a_merge_stopped_while_it_writes_says_so_and_exits_130(
    tmp_path, monkeypatch, signals_restored
):
    slices = []
    for i, points in enumerate(["0:1", "1:2"]):
        r = cli_in_process(["run", SMALL, *SWEEP, "--points", points, "--out",
                            str(tmp_path / f"s{i}"), *QUIET])  # fmt: skip
        assert r.returncode == 0, r.stderr
        (run_dir,) = (tmp_path / f"s{i}").glob("*/*")
        slices.append(str(run_dir))

    def stopped(*args, **kwargs):  # Ctrl-C while the table, summaries, figures are written
        raise Interrupted("SIGINT", 0, 0)

    monkeypatch.setattr(api, "finalise", stopped)
    out = tmp_path / "merged dir"
    r = cli_in_process(["merge", *slices, "--out", str(out), "--no-figures"])
    assert r.returncode == 130, r.stderr
    assert "internal error" not in r.stderr and "run the merge again" in r.stderr
    assert "--resume" not in r.stderr  # a merged directory cannot be resumed
    (merged,) = out.glob("*/*")
    assert manifest(merged)["status"] == "interrupted"
    again = r.stderr.split("run the merge again: ", 1)[1].strip()
    assert shlex.split(again)[-5:] == ["merge", *slices, "--out", str(out), "--no-figures"][-5:]
    # the printed command does merge, once the stop is gone
    monkeypatch.undo()
    r = cli_in_process(shlex.split(again)[1:])
    assert r.returncode == 0, r.stderr


def test_a_figure_format_matplotlib_does_not_know_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(compare_figure, "figure", lambda comparison: matplotlib.figure.Figure())
    with pytest.raises(ScenarioError) as refused:
        compare_figure.write_figure(None, tmp_path / "figure.xyz")  # a ValueError has no strerror
    assert "cannot write the figure there" in str(refused.value) and "xyz" in str(refused.value)


@pytest.mark.parametrize(
    "option", [["--timeline"], ["--incidents"], ["--target-ci", "0.01"], ["--points", "0:1"],
               ["--out", "elsewhere"]],
)  # fmt: skip
def test_resume_refuses_the_options_it_would_ignore(tmp_path, option):
    r = cli_in_process(["run", "--resume", str(tmp_path), *option])
    assert r.returncode == 2 and f"drop {option[0]}" in r.stderr, r.stderr


def test_the_incident_log_is_a_run_file_and_each_hint_names_its_own_option(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    r = cli_in_process(["report", str(run_dir), "--out", str(run_dir / "incidents.parquet")])
    assert r.returncode == 2 and "destroy the run" in r.stderr, r.stderr
    assert "leave --out out for" in r.stderr and "report.html" in r.stderr
    with pytest.raises(ScenarioError, match="destroy the run"):
        protect_run_files(run_dir, run_dir / ".incidents.parquet.tmp")
    other = tmp_path / "other"
    other.mkdir()
    r = cli_in_process(["compare", str(other), str(run_dir), "--figure",
                        str(run_dir / "figures" / "x.png")])  # fmt: skip
    assert r.returncode == 2 and "destroy the run" in r.stderr, r.stderr
    assert "leave --figure out for" in r.stderr and "report.html" not in r.stderr


def test_export_keeps_to_the_run_files_guard(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    pd.DataFrame({"point": [0], "replica": [0]}).to_parquet(run_dir / "replicas.parquet")
    with pytest.raises(ScenarioError, match="incidents.parquet of the run"):
        export.export_csv(run_dir, run_dir / "incidents.parquet")
    assert export.export_csv(run_dir) == run_dir / "replicas.csv"  # its default, inside
    assert (run_dir / "replicas.csv").read_text().splitlines()[1] == "0,0"


def test_every_resume_hint_runs_as_printed(tmp_path, monkeypatch):
    exe = running_as(monkeypatch, tmp_path / "my bin")
    run_dir = tmp_path / "a run"
    expected = [str(exe), "run", "--resume", str(run_dir)]
    assert shlex.split(resume_command(run_dir)) == expected

    def hint(text: str) -> list[str]:
        return shlex.split(text.split("`")[1])

    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    with pytest.raises(ScenarioError) as refused:
        export.export_csv(run_dir)
    assert hint(refused.value.message) == expected
    from sim.runs.dask_executor import SchedulerLost

    lost = SchedulerLost("tcp://host:8786", "gone").of_run(run_dir)
    assert hint(lost.message) == expected


def test_the_plan_round_bar_ends_on_the_time_it_took(monkeypatch):
    from rich.console import Console

    from sim.decide.planner import _RoundBar
    from sim.runs import progress

    # in a terminal (off one, plain lines: tests/cli/test_output_alike.py)
    monkeypatch.setattr(
        progress, "stderr_console", lambda: Console(stderr=True, force_terminal=True)
    )
    bar = _RoundBar(True).__enter__()
    try:
        bar.start_round(2, 0, 3)
        column = bar._progress.columns[-1]
        bar.advance(2)
        assert column.render(bar._progress.tasks[0]).plain.endswith(" left")
        bar.advance(4)
        text = column.render(bar._progress.tasks[0]).plain
        assert text.startswith("done in ") and "0:00:00" not in text, text
    finally:
        bar.__exit__(None, None, None)


def test_a_lost_scheduler_names_the_command_that_completes_the_run(tmp_path, monkeypatch):
    from sim.runs.dask_executor import SchedulerLost

    def lost(*args, **kwargs):
        raise SchedulerLost("tcp://host:8786", "client closed")

    monkeypatch.setattr(api, "run_montecarlo", lost)
    r = cli_in_process(["run", SMALL, "--replicas", "2", "--out", str(tmp_path / "a b"), *QUIET])
    (run_dir,) = (tmp_path / "a b").glob("*/*")
    assert r.returncode == 2 and manifest(run_dir)["status"] == "failed", r.stderr
    assert shlex.split(r.stderr.split("`")[1]) == shlex.split(resume_command(run_dir))
    assert str(run_dir) in shlex.split(r.stderr.split("`")[1])


def test_export_stopped_midway_leaves_no_partial_file(tmp_path, monkeypatch, signals_restored):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    pd.DataFrame({"point": [0] * 3, "replica": [0, 1, 2]}).to_parquet(run_dir / "replicas.parquet")
    monkeypatch.setattr(export, "BATCH_ROWS", 1)
    written = []

    class Stopping(export.pacsv.CSVWriter):
        def write_batch(self, batch):
            written.append(batch)
            if len(written) == 2:
                raise KeyboardInterrupt  # Ctrl-C between two batches
            return super().write_batch(batch)

    monkeypatch.setattr(export.pacsv, "CSVWriter", Stopping)
    r = cli_in_process(["export", str(run_dir)])
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == ["replicas.parquet", "run.json"]


def test_a_plan_stopped_as_it_completes_exits_130(tmp_path, monkeypatch, signals_restored):
    from sim.runs.results import RunDir

    def stopped(self):  # Ctrl-C while the complete plan lets go of its parts
        raise Interrupted("SIGINT", 0, 0)

    monkeypatch.setattr(RunDir, "remove_parts", stopped)
    r = cli_in_process(["plan", SMALL, "--vary", "cluster.spare_nodes=0,1", "--deadline-days",
                        "30", "--replicas-first", "2", "--replicas-max", "4", "--workers", "1",
                        "--no-progress", "--out", str(tmp_path / "o")])  # fmt: skip
    assert r.returncode == 130, r.stderr
    assert "once the plan was complete" in r.stderr and "Traceback" not in r.stderr


def session_processes(session: int) -> list[int]:
    """The pids of the processes of a session (Linux /proc), its leader included."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # (state, ppid, pgrp, session)
            found.append(int(stat_file.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_forecast_with_workers_stops_at_ctrl_c_leaving_no_process(tmp_path):
    """SIGINT to the command alone (`kill -INT`, a batch system's stop; Ctrl-C at a terminal
    signals its workers too): it stops at once, its workers with it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ["PYTHONPATH"]])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim", "forecast", SMALL, "--elapsed-days", "1", "--done-steps",
         "10", "--replicas", "100000", "--workers", "2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        # as from a shell: an in-process test's stop may have left SIGINT ignored here, and
        # an ignored signal stays ignored in a child
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(session_processes(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # the command and its two workers
        assert len(session_processes(proc.pid)) >= 3
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    time.sleep(0.5)
    assert session_processes(proc.pid) == []


def _started_past(module: str, command: list[str], cwd: Path) -> tuple[subprocess.Popen, list]:
    """`command` started, once its process has imported `module`, as Python's own report of
    each import says (PYTHONPROFILEIMPORTTIME: a line as each import is done). Its stderr
    lines are gathered in the list returned, as they come."""
    done = re.compile(rf"^import time:.*\|\s*{re.escape(module)}\s*$")
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # as from a shell: an in-process stop earlier in the suite leaves SIGINT ignored here
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    past = threading.Event()

    def gather() -> None:
        for line in process.stderr:
            lines.append(line)
            if done.match(line):
                past.set()
        past.set()  # ended before it (the test then fails on the exit code)

    threading.Thread(target=gather, daemon=True).start()
    if not past.wait(60):
        process.kill()
        pytest.fail(f"the command never imported {module}")
    return process, lines


@pytest.mark.parametrize(
    ("past", "delay_s"),
    [("sim.cli.entry", 0.0), ("sim.cli.entry", 0.05), ("sim.cli.entry", 0.25),
     ("sim.cli.commands", 0.3)],
)  # fmt: skip
def test_ctrl_c_at_any_moment_after_the_entry_exits_130_without_a_traceback(
    tmp_path, past, delay_s
):
    """A Ctrl-C at any moment from the one the executable's entry module has run (what
    comes before, the interpreter's start-up and the console script's first line, is not
    ours): while numpy, pandas and the rest load (after sim.cli.entry), or while the command
    runs (after sim.cli.commands), it exits 130 with no traceback. Timed from those moments,
    seen in the process's own import report, not from its start: on a loaded machine the
    start-up alone can outlast any fixed delay."""
    command = [str(ROOT / ".venv/bin/trainsim"), "run", SMALL, "--replicas", "2000",
               "--workers", "1", "--out", str(tmp_path), *QUIET]  # fmt: skip
    process, lines = _started_past(past, command, tmp_path)
    try:
        time.sleep(delay_s)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    time.sleep(0.05)  # the reader's last lines
    err = "".join(line for line in lines if not line.startswith("import time:"))
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
