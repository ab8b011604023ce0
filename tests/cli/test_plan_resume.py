"""An interrupted `trainsim plan` resumes (issue 18, section 5: "`plan` interrupted then
resumed: refused after writing parts"): the interruption prints the command that resumes
it, `trainsim run --resume RUN_DIR` races the plan's points again reading every replica a
part already holds (simulating only the others), and its plan.json and replicas.parquet
are those of an uninterrupted plan with the same seed. A stop while plan.json and the
figure are written leaves it resumable too; the run directory's guarantees (the lock,
the fingerprint) hold for a plan's run as for any run. Runs write only under tmp_path."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest

from sim.runs import montecarlo
from sim.show import plan_plots
from tests.cli.test_rundir_holes import interrupt_after, slow_replica
from tests.conftest import ROOT, cli_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
# a grid that races 4 rounds (8, 16, 32, 64 replicas): 4 points out after round 1, 3 after 4
PLAN = [
    "plan", SMALL, "--vary", "cluster.nodes=8,16,32", "--vary", "cluster.spare_nodes=0,1,2",
    "--deadline-days", "18.5", "--quantile", "0.9", "--replicas-first", "8",
    "--replicas-max", "64", "--seed", "5", "--workers", "1", "--executor", "serial",
    "--no-progress",
]  # fmt: skip


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*/*") if p.is_dir())


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def plan_json(run_dir: Path) -> dict:
    doc = json.loads((run_dir / "plan.json").read_text())
    doc.pop("run_dir")  # the only field two runs differ in
    return doc


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    r = cli_in_process([*PLAN, "--out", str(out)])
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(out)
    assert [r["replicas"] for r in plan_json(run_dir)["rounds"]] == [8, 16, 32, 64]
    return run_dir


def counting_replicas():
    """simulate_replica, counting its calls (the replicas a serial run simulates)."""
    real, calls = montecarlo.simulate_replica, []

    def simulate(plan, replica, seed, **kwargs):
        calls.append(replica)
        return real(plan, replica, seed, **kwargs)

    return mock.patch.object(montecarlo, "simulate_replica", simulate), calls


def parts_rows(run_dir: Path) -> int:
    return sum(len(pd.read_parquet(p)) for p in (run_dir / "parts").glob("p*.parquet"))


@pytest.mark.parametrize("slow", [5, 20], ids=["in round 1", "in round 3"])
def test_an_interrupted_plan_resumes_to_the_uninterrupted_plan(tmp_path, uninterrupted, slow):
    out = tmp_path / "out"
    with slow_replica(slow):  # the stop comes while replica `slow` of the first point runs
        timer = interrupt_after(2.0)
        started = time.monotonic()
        r = cli_in_process([*PLAN, "--out", str(out)])
        timer.join()
    assert r.returncode == 130, r.stderr
    assert time.monotonic() - started < 15
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    (run_dir,) = run_dirs(out)
    assert manifest(run_dir)["status"] == "interrupted"
    assert not (run_dir / "plan.json").exists() and not (run_dir / "run.lock").exists()
    # the hint is a command that runs as printed
    (hint,) = [line for line in r.stderr.splitlines() if line.startswith("resume with: ")]
    command = shlex.split(hint.removeprefix("resume with: ").split(" (")[0])
    assert command[-3:] == ["run", "--resume", str(run_dir)]
    kept = parts_rows(run_dir)
    # round 1 (9 points x 8) and, stopped in round 3, round 2 (5 points x 8 more)
    assert kept >= (9 * 8 + 5 * 8 if slow >= 16 else slow)

    patch, calls = counting_replicas()
    with patch:
        r = cli_in_process([*command[-3:], "--no-progress"])
    assert r.returncode == 0, r.stderr
    assert "chosen" in r.stdout  # the plan's answer, not a run's
    assert manifest(run_dir)["status"] == "complete"
    assert plan_json(run_dir) == plan_json(uninterrupted)
    table = pd.read_parquet(run_dir / "replicas.parquet")
    pd.testing.assert_frame_equal(table, pd.read_parquet(uninterrupted / "replicas.parquet"))
    # the replicas the parts held were read, not simulated again
    assert len(calls) == len(table) - kept
    again = cli_in_process([*command[-3:], "--no-progress"])
    assert again.returncode == 2 and "complete" in again.stderr


def test_a_stop_while_plan_json_is_written_resumes(tmp_path, uninterrupted):
    out = tmp_path / "out"

    def slow_figure(doc):  # Ctrl-C while the answer is written
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(60)

    with mock.patch.object(plan_plots, "pareto_figure", slow_figure):
        r = cli_in_process([*PLAN, "--out", str(out)])
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr and "run --resume" in r.stderr
    (run_dir,) = run_dirs(out)
    assert manifest(run_dir)["status"] == "interrupted"
    patch, calls = counting_replicas()
    with patch:
        r = cli_in_process(["run", "--resume", str(run_dir), "--no-progress"])
    assert r.returncode == 0, r.stderr
    assert calls == []  # every replica was in the parts
    assert plan_json(run_dir) == plan_json(uninterrupted)
    assert (run_dir / "figures" / "pareto.png").stat().st_size > 0


def test_a_plan_resume_keeps_the_run_directory_guarantees(tmp_path):
    """An edited plan setting is refused by the fingerprint (exit 2, nothing run), as is a
    second writer; a bad part is set aside and its replicas run again."""
    out = tmp_path / "out"
    with slow_replica(5):
        timer = interrupt_after(2.0)
        r = cli_in_process([*PLAN, "--out", str(out)])
        timer.join()
    assert r.returncode == 130, r.stderr
    (run_dir,) = run_dirs(out)
    original = (run_dir / "run.json").read_text()
    edited = json.loads(original)
    edited["plan"]["deadline_days"] = 30.0
    (run_dir / "run.json").write_text(json.dumps(edited))
    r = cli_in_process(["run", "--resume", str(run_dir), "--no-progress"])
    assert r.returncode == 2 and "fingerprint" in r.stderr, r.stderr
    assert manifest(run_dir)["status"] == "interrupted"
    (run_dir / "run.json").write_text(original)
    first = sorted((run_dir / "parts").glob("p*.parquet"))[0]
    first.write_bytes(b"not a parquet file")
    r = cli_in_process(["run", "--resume", str(run_dir), "--no-progress"])
    assert r.returncode == 0, r.stderr
    assert "set aside" in r.stderr
    table = pd.read_parquet(run_dir / "replicas.parquet")
    assert not table.duplicated(["point", "replica"]).any()


OPTIMIZE = [
    "optimize", SMALL, "--param", "checkpoint.interval_steps=250,500,1000", "--replicas", "12",
    "--seed", "5", "--workers", "1", "--json", "--no-progress",
]  # fmt: skip


def test_an_interrupted_optimize_resumes_to_its_answer(tmp_path):
    """`optimize` interrupted: exit 130 and a hint that runs as printed; the resume runs the
    missing replicas and prints the optimize answer, that of an uninterrupted optimize."""
    r = cli_in_process([*OPTIMIZE, "--out", str(tmp_path / "whole")])
    assert r.returncode == 0, r.stderr
    expected = json.loads(r.stdout)
    out = tmp_path / "out"
    with slow_replica(7):
        timer = interrupt_after(1.5)
        r = cli_in_process([*OPTIMIZE, "--out", str(out)])
        timer.join()
    assert r.returncode == 130, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    (run_dir,) = run_dirs(out)
    (hint,) = [line for line in r.stderr.splitlines() if line.startswith("resume with: ")]
    command = shlex.split(hint.removeprefix("resume with: ").split(" (")[0])
    assert command[-3:] == ["run", "--resume", str(run_dir)]
    patch, calls = counting_replicas()
    with patch:
        r = cli_in_process([*command[-3:], "--json", "--no-progress"])
    assert r.returncode == 0, r.stderr
    assert 0 < len(calls) < 36  # only the missing replicas
    got = json.loads(r.stdout)
    assert got.pop("run_dir") == str(run_dir)
    expected.pop("run_dir")
    assert got == expected
    r = cli_in_process(["run", "--resume", str(run_dir), "--no-progress"])
    assert r.returncode == 2 and "complete" in r.stderr
