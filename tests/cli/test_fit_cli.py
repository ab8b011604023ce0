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

import numpy as np
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


def test_a_users_log_never_reads_files_that_happen_to_lie_beside_it(tmp_path):
    """Only a trainsim log (replica/point columns) with the run's run.json beside it takes
    its window and nodes from the folder: a user's CSV next to a scenario.yaml (a list, or a
    scenario of 7 nodes) and a corrupt replicas.parquet is fitted as given."""
    log = tmp_path / "log.csv"
    log.write_text(EXAMPLE.read_text())
    (tmp_path / "replicas.parquet").write_bytes(b"PAR1 not parquet")
    for text in ("- a\n- b\n", "cluster: {nodes: 7, gpus_per_node: 4}\n"):
        (tmp_path / "scenario.yaml").write_text(text)
        result = cli_in_process(["fit", str(log), *EXAMPLE_WINDOW, "--out", str(tmp_path / "o")])
        assert result.returncode == 2, (text, result.stderr)  # --nodes is asked for
        assert "give --nodes N" in flat(result.stderr) and "Traceback" not in result.stderr
        result = cli_in_process(
            ["fit", str(log), "--nodes", "64", *EXAMPLE_WINDOW, "--out", str(tmp_path / "o"),
             "--json", "--no-figures"]
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert (doc["nodes"], doc["gpus_per_node"]) == (64, 8)


def test_a_run_directory_that_cannot_be_read_exits_2_naming_the_file(run_dir, tmp_path):
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("incidents.parquet", "run.json", "scenario.yaml"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    (copy / "replicas.parquet").write_bytes(b"PAR1 truncated")
    args = ["fit", str(copy / "incidents.parquet"), "--replica", "1", "--out", str(tmp_path)]
    result = cli_in_process(args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert str(copy / "replicas.parquet") in flat(result.stderr)
    (copy / "replicas.parquet").unlink()
    (copy / "scenario.yaml").write_text("- not\n- a scenario\n")
    result = cli_in_process([*args, "--end", "100"])
    assert result.returncode == 2, result.stderr
    message = flat(result.stderr)
    assert str(copy / "scenario.yaml") in message and "cluster.nodes" in message


def test_out_that_cannot_be_written_exits_2_naming_out(tmp_path):
    for out in ("/dev/null/x", str(tmp_path / "file")):
        (tmp_path / "file").write_text("")
        result = cli_in_process(["fit", str(EXAMPLE), "--nodes", "64", *EXAMPLE_WINDOW,
                                 "--out", out])  # fmt: skip
        assert result.returncode == 2, (out, result.stderr)
        message = flat(result.stderr)
        assert "--out" in message and out in message and "Traceback" not in result.stderr


def test_the_rate_printed_is_the_rate_written_and_the_command_runs_as_printed(tmp_path):
    """With lemons, failures.yaml holds a sound node's rate: the table prints it too; the
    `use it` line quotes the path (a space in it) and runs in a shell as printed."""
    out = tmp_path / "my fit"
    result = cli_in_process(
        ["fit", str(EXAMPLE), "--nodes", "64", *EXAMPLE_WINDOW, "--out", str(out), "--no-figures"]
    )
    assert result.returncode == 0, result.stderr
    written = {f["name"]: f for f in yaml.safe_load((out / "failures.yaml").read_text())}
    text = re.sub("[│┃]", " ", result.stdout)
    shown = {}
    for line in text.splitlines():
        match = re.match(r"\s*(\w+)\s+rate written \([^)]*\)\s+([0-9.,]+)", line)
        if match:
            shown[match.group(1)] = float(match.group(2).replace(",", ""))
    node_classes = {n for n, f in written.items() if f["scope"] in ("gpu", "node")}
    assert node_classes and set(shown) == node_classes, (shown, text)
    for name, value in shown.items():
        assert value == pytest.approx(written[name]["rate_per_1k_gpu_day"], rel=2e-3, abs=6e-4)
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("use it:")]
    assert " run SCENARIO --set " in line
    argument = line.split(" --set ", 1)[1]
    echoed = subprocess.run(["bash", "-c", f"printf '%s\\0' {argument}"], capture_output=True,
                            text=True, check=True)  # fmt: skip
    words = echoed.stdout.split("\0")
    assert words[0] == "failures=" + (out / "failures.yaml").read_text().rstrip("\n")
    # the spread's keys on the same line: pasted whole, the run gets every fitted figure
    assert words[1:4:2] == ["--set", "--set"] and "cluster.lemon_fraction=" in words[2]


def unfinished_incident_run(out: Path, scenario: Path) -> Path:
    """A run with --incidents whose chunks (of 2 replicas) all finished but which was never
    finalised: replica parts and their failure parts in parts/."""
    from unittest import mock

    from sim.runs import api, montecarlo

    with (
        mock.patch.object(api, "finalise", side_effect=SystemExit(137)),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 2),
        pytest.raises(SystemExit),
    ):
        api.run_scenario(str(scenario), replicas=6, seed=3, workers=1, out=out, progress=False,
                         figures=None, incidents=True)  # fmt: skip
    (found,) = (out / "round-trip").iterdir()
    return found


@pytest.mark.parametrize("damage", ["truncated", "other columns", "other replicas"])
def test_a_bad_incident_part_is_set_aside_with_its_replicas_which_run_again(
    tmp_path, run_dir, damage
):
    """An incidents-*.parquet part that cannot be merged: the resume sets it aside with its
    replica part (never merged), runs those replicas again, and the log is a whole run's."""
    scenario = run_dir / "scenario.yaml"
    whole = cli_in_process(["run", str(scenario), "--replicas", "6", "--seed", "3",
                            "--incidents", "--out", str(tmp_path / "whole"), "--no-progress",
                            "--no-figures"])  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    cut = unfinished_incident_run(tmp_path / "cut", scenario)
    parts = sorted((cut / "parts").glob("incidents-*.parquet"))
    assert len(parts) == 3
    bad = parts[1]
    if damage == "truncated":
        bad.write_bytes(bad.read_bytes()[:100])
    elif damage == "other columns":
        pd.DataFrame({"time": [1.0], "node": [0]}).to_parquet(bad)
    else:
        pd.read_parquet(parts[0]).to_parquet(bad, index=False)  # replicas 0-1 under the name of 2-3
    resumed = cli_in_process(["run", "--resume", str(cut), "--no-progress", "--no-figures"])
    assert resumed.returncode == 0, resumed.stderr
    assert bad.name in resumed.stderr and "set aside" in resumed.stderr
    aside = sorted(p.name for p in (cut / "rejected-parts").iterdir())
    assert aside == [bad.name, bad.name.removeprefix("incidents-")]
    (done,) = (tmp_path / "whole" / "round-trip").iterdir()
    pd.testing.assert_frame_equal(
        pd.read_parquet(cut / "incidents.parquet"), pd.read_parquet(done / "incidents.parquet")
    )
    pd.testing.assert_frame_equal(
        pd.read_parquet(cut / "replicas.parquet").drop(columns=["sim_seconds"], errors="ignore"),
        pd.read_parquet(done / "replicas.parquet").drop(columns=["sim_seconds"], errors="ignore"),
    )


def fit_json(tmp_path: Path, path: Path, *args: str):
    result = cli_in_process(["fit", str(path), *args, "--out", str(tmp_path / "out"), "--json"])
    assert "Traceback" not in result.stderr and "Warning:" not in result.stderr, result.stderr
    return result


@pytest.mark.parametrize(
    "table, args, where, says",
    [
        # a boolean time, a list for a node, trainsim's own columns out of range
        (pd.DataFrame({"time": [True, False], "node": [0, 1]}), ("--end", "10"),
         "row 1, column time", "True is a boolean"),
        (pd.DataFrame({"time": [1.0, 2.0], "node": [[0, 1], [2]]}), ("--end", "10"),
         "column node", "a nested parquet column"),
        (pd.DataFrame({"time": [1.0], "node": [0], "point": [0.5], "replica": [0]}),
         ("--end", "10"), "row 1, column point", "0.5: trainsim's point column"),
        (pd.DataFrame({"time": [1.0], "node": [0], "point": [0], "replica": [-1]}),
         ("--end", "10"), "row 1, column replica", "-1: trainsim's replica column"),
        (pd.DataFrame({"time": [1.0], "node": [0]}), ("--end", "inf"), "--end",
         "expected a finite number of hours"),
        (pd.DataFrame({"time": [1.0], "node": [0], "repair_hours": [1e308]}), ("--end", "10"),
         "row 1, column repair_hours", "expected hours from 0 to"),
        (pd.DataFrame({"time": [1.0, 2.0], "node": [None, 1], "scope": ["node", "node"]}),
         ("--end", "10"), "row 1, column node", "a node failure names no node"),
    ],
)  # fmt: skip
def test_a_log_is_read_as_what_it_is_or_refused_with_its_row(tmp_path, table, args, where, says):
    path = tmp_path / "log.parquet"
    table.to_parquet(path)
    result = fit_json(tmp_path, path, "--nodes", "4", *args)
    assert result.returncode == 2, result.stdout
    message = flat(result.stderr)
    assert f"{path}: {where}" in message and says in message, message
    assert "np.float64" not in message and "np.int64" not in message


def test_messy_logs_that_are_read(tmp_path):
    """Timestamps in parquet are times (not nanoseconds as hours); hosts named NA, None or
    null are hosts; a node id beyond 64 bits is a name, not a negative number; a header
    with spaces; a repair of 0 hours is one warning; a header alone is no failure."""
    stamps = pd.DataFrame(
        {"time": pd.to_datetime(["2026-03-01T06:00:00Z", "2026-03-01T18:00:00Z"]), "node": [0, 1]}
    )
    path = tmp_path / "stamps.parquet"
    stamps.to_parquet(path)
    window = ("--start", "2026-03-01T00:00:00Z", "--end", "2026-03-02T00:00:00Z")
    doc = json.loads(fit_json(tmp_path, path, "--nodes", "4", *window).stdout)
    assert doc["window_hours"] == 24.0 and doc["classes"][0]["events"] == 2
    names = tmp_path / "names.csv"
    names.write_text(
        "time, node, repair_hours\n1,NA,0\n2,None,3\n3,null,4\n4,123456789012345678901234,5\n"
    )
    result = fit_json(tmp_path, names, "--nodes", "4", "--end", "10")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["classes"][0]["scope"] == "node"  # every row names a node
    assert sum("repair times of 0 hours" in w for w in doc["warnings"]) == 1
    empty = tmp_path / "empty.csv"
    empty.write_text("time,node\n")
    result = fit_json(tmp_path, empty, "--nodes", "4", "--end", "10")
    assert result.returncode == 0 and "the log has no failures" in result.stdout


def test_ties_are_merged_with_a_warning(tmp_path):
    """Two failures of one node logged in the same minute: one life of zero length would
    drive a Weibull shape towards 0; they are merged for the law, counted for the rate."""
    rng = np.random.default_rng(4)
    times = np.sort(rng.uniform(0, 1000, 60))
    nodes = rng.integers(0, 16, 60)
    table = pd.DataFrame({"time": np.concatenate((times, times[:5])),
                          "node": np.concatenate((nodes, nodes[:5]))})  # fmt: skip
    path = tmp_path / "ties.csv"
    table.to_csv(path, index=False)
    doc = json.loads(fit_json(tmp_path, path, "--nodes", "16", "--end", "1000").stdout)
    (fitted,) = doc["classes"]
    assert fitted["events"] == 65
    assert fitted["lifetime"]["weibull_shape"]["value"] > 0.5
    assert any("5 failure(s) logged at the same time" in w for w in doc["warnings"])


def test_fit_out_never_writes_through_a_link_nor_into_a_run(tmp_path):
    """--out that is a link, or a run directory (or its figures), is refused; a planted link
    where fit writes a file is replaced by a new regular file, its target untouched."""
    target = tmp_path / "precious.yaml"
    target.write_text("keep me\n")
    out = tmp_path / "fit"
    out.mkdir()
    (out / "fitted.yaml").symlink_to(target)
    args = ["fit", str(EXAMPLE), "--nodes", "64", *EXAMPLE_WINDOW, "--no-figures"]
    result = cli_in_process([*args, "--out", str(out)])
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "keep me\n"
    assert (
        not (out / "fitted.yaml").is_symlink() and "failures:" in (out / "fitted.yaml").read_text()
    )
    link = tmp_path / "link"
    link.symlink_to(out)
    result = cli_in_process([*args, "--out", str(link)])
    assert result.returncode == 2 and "symbolic link" in flat(result.stderr)
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    for inside in (run, run / "figures"):
        result = cli_in_process([*args, "--out", str(inside)])
        assert result.returncode == 2 and "would destroy the run" in flat(result.stderr), (
            result.stderr
        )
