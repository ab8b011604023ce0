"""`trainsim run --incidents`, `trainsim fit` and the fragment it writes, as a user types them:
the round trip through the run directory, the example log, and bad logs refused with exit 2
and a message naming the file, the row and the column."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import ROOT, cli_in_process, flat
from tests.stats.test_fit import ROUND_TRIP, TRUTH

EXAMPLE = ROOT / "examples" / "incidents.csv"
EXAMPLE_WINDOW = ["--start", "2026-03-01T00:00:00Z", "--end", "2026-04-30T00:00:00Z"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Three replicas of the round-trip scenario run with --incidents (processes: the
    failures travel back from the workers with their chunks)."""
    tmp = tmp_path_factory.mktemp("incidents")
    scenario = tmp / "round-trip.yaml"
    scenario.write_text(yaml.safe_dump(ROUND_TRIP, sort_keys=False))
    result = cli_in_process(
        ["run", str(scenario), "--replicas", "3", "--workers", "2", "--executor", "processes",
         "--incidents", "--out", str(tmp / "results"), "--no-progress", "--no-figures"],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (found,) = (tmp / "results" / "round-trip").iterdir()
    return found


def test_incidents_parquet_is_a_log_of_every_replica(run_dir):
    log = pd.read_parquet(run_dir / "incidents.parquet")
    replicas = pd.read_parquet(run_dir / "replicas.parquet")
    assert list(log.columns) == [
        "point", "replica", "time", "node", "class", "scope", "repair_hours", "lasting_fault",
        "repair_path",
    ]  # fmt: skip
    # one row per failure: the per-class counts of replicas.parquet, replica by replica
    counts = log.groupby(["replica", "class"]).size().unstack(fill_value=0)
    for name in TRUTH:
        assert counts[name].tolist() == replicas[f"failures_{name}"].tolist()
    # times within each replica's wall time; a job failure names no node
    wall = replicas.set_index("replica")["wall_hours"]
    assert (log["time"] <= log["replica"].map(wall)).all() and (log["time"] >= 0).all()
    assert (log.loc[log["scope"] == "job", "node"] == -1).all()
    assert (log.loc[log["scope"] != "job", "node"] >= 0).all()
    replaced = log[log["scope"] != "job"]
    assert (replaced["repair_path"] == "repair").all() and (replaced["repair_hours"] > 0).all()
    assert not (run_dir / "parts").exists() or not list((run_dir / "parts").glob("incidents-*"))


def test_fit_one_replica_recovers_the_rates_and_the_fragment_runs(run_dir, tmp_path):
    out = tmp_path / "fit"
    result = cli_in_process(
        ["fit", str(run_dir / "incidents.parquet"), "--replica", "1", "--out", str(out), "--json"]
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    wall = pd.read_parquet(run_dir / "replicas.parquet")["wall_hours"][1]
    # window and nodes from the run directory: the replica's wall time, the job's nodes
    assert doc["window_hours"] == pytest.approx(wall)
    assert (doc["nodes"], doc["gpus_per_node"]) == (32, 8)
    for c in doc["classes"]:
        rate = c["rate_per_1k_gpu_day"]
        assert rate["low"] <= TRUTH[c["name"]] <= rate["high"], c
    fragment = yaml.safe_load((out / "fitted.yaml").read_text())
    assert [f["name"] for f in fragment["failures"]] == list(TRUTH)
    assert "cluster" not in fragment  # no lemons in this scenario
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "lifetimes-gpu.png", "lifetimes-host.png", "lifetimes-software.png", "node-counts.png",
    ]  # fmt: skip
    # the failures list replaces the scenario's own through --set
    scenario = run_dir / "scenario.yaml"
    failures = (out / "failures.yaml").read_text()
    check = cli_in_process(["validate", str(scenario), "--set", f"failures={failures}"])
    assert check.returncode == 0, check.stderr


def test_a_log_of_several_replicas_needs_one_picked(run_dir, tmp_path):
    result = cli_in_process(["fit", str(run_dir / "incidents.parquet"), "--out", str(tmp_path)])
    assert result.returncode == 2
    assert "holds 3 replicas (0..2): pick one with --replica" in flat(result.stderr)


def test_example_log_table_and_fragment(tmp_path):
    result = cli_in_process(
        ["fit", str(EXAMPLE), "--nodes", "64", *EXAMPLE_WINDOW, "--out", str(tmp_path)]
    )
    assert result.returncode == 0, result.stderr
    text = flat(re.sub("[│┃]", " ", result.stdout))  # the table's rules out
    for expected in (
        "64 nodes x 8 GPUs, 1,440.0 h (30,720 GPU-days)",
        "gpu_xid rate per 1k GPU-days",
        "host Weibull shape",
        "lemon_fraction",
        "lemon_rate_multiplier",
        "dispersion p-value",
    ):
        assert expected in text, expected
    fragment = yaml.safe_load((tmp_path / "fitted.yaml").read_text())
    host = next(f for f in fragment["failures"] if f["name"] == "host")
    assert host["distribution"] == "weibull" and 0.5 < host["weibull_shape"] < 0.9
    assert 0 < fragment["cluster"]["lemon_fraction"] < 0.2
    # too few hangs for a shape: a warning, not a number
    assert "nccl_hang: 17 failures (< 20): no Weibull shape fitted" in flat(result.stderr)
    doc = json.loads((tmp_path / "fit.json").read_text())
    hang = next(c for c in doc["classes"] if c["name"] == "nccl_hang")
    assert hang["lifetime"] is None and hang["events"] == 17


def bad(tmp_path: Path, text: str, *args: str) -> str:
    path = tmp_path / "log.csv"
    path.write_text(text)
    result = cli_in_process(["fit", str(path), "--nodes", "4", *args, "--out", str(tmp_path)])
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr
    return flat(result.stderr)


def test_bad_logs_exit_2_naming_file_row_and_column(tmp_path):
    message = bad(tmp_path, "time,node\n1.0,0\nsoon,1\n", "--end", "10")
    assert "row 2, column time" in message and "'soon'" in message
    message = bad(tmp_path, "time,node\n1.0,0\n12.5,1\n", "--end", "10")
    assert "row 2, column time" in message and "outside the window" in message
    message = bad(tmp_path, "time,node,colour\n1.0,0,red\n", "--end", "10")
    assert "column colour" in message and "unknown column 'colour'" in message
    message = bad(tmp_path, "time,class\n1.0,gpu\n", "--end", "10")
    assert "missing column 'node'" in message
    message = bad(tmp_path, "time,node\n2026-03-01T10:00:00Z,0\n", "--end", "2026-03-02T00:00:00Z")
    assert "--start" in message
    message = bad(tmp_path, "time,node,repair_hours\n1.0,0,-3\n", "--end", "10")
    assert "row 1, column repair_hours" in message
    message = bad(tmp_path, "time,node,scope\n1.0,0,rack\n", "--end", "10")
    assert "row 1, column scope" in message and "gpu, node, job" in message


def test_no_end_warns_that_the_window_ends_at_the_last_failure(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("time,node\n1.0,0\n5.0,1\n")
    result = cli_in_process(["fit", str(path), "--nodes", "4", "--out", str(tmp_path), "--json"])
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["window_hours"] == 5.0
    assert any("no --end" in w for w in doc["warnings"])


def test_interrupted_run_resumes_to_the_same_incident_log(run_dir, tmp_path):
    """SIGINT keeps the finished chunks' failures beside their replicas; --resume completes
    incidents.parquet to an uninterrupted run's."""
    scenario = run_dir / "scenario.yaml"
    args = [sys.executable, "-m", "sim", "run", str(scenario), "--replicas", "120",
            "--workers", "2", "--incidents", "--no-progress", "--no-figures"]  # fmt: skip
    whole = subprocess.run([*args, "--out", str(tmp_path / "whole")], capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    process = subprocess.Popen([*args, "--out", str(tmp_path / "cut")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not list((tmp_path / "cut").glob("*/*/parts/incidents-*.parquet")):
        assert time.monotonic() < deadline and process.poll() is None, "no chunk written"
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    (cut,) = (tmp_path / "cut" / "round-trip").iterdir()
    print("interrupted:", process.returncode == 130)
    if process.returncode == 130:  # else it finished before the signal: nothing to resume
        assert not (cut / "incidents.parquet").exists()
        resumed = cli_in_process(["run", "--resume", str(cut), "--no-progress", "--no-figures"])
        assert resumed.returncode == 0, resumed.stderr
    else:
        assert process.returncode == 0, err
    (done,) = (tmp_path / "whole" / "round-trip").iterdir()
    pd.testing.assert_frame_equal(
        pd.read_parquet(cut / "incidents.parquet"), pd.read_parquet(done / "incidents.parquet")
    )
