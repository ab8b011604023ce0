"""Run directories under attack: two writers at once, a resume while the run still runs,
a kill between the merge and "complete", bad parts (overlapping, truncated, of another
schema), an edited scenario or manifest, a run.json that is not one, stops that must
end with exit 130 and a resumable directory for every command that simulates, a full
disk, a report written over the run's own table, and merges of slices whose table is
missing or not a table.

Each case is one hole an adversarial pass found (issue 18, section 5): the test fails
on the code before the fix. Runs are small (scenarios/llama7b-128.yaml, 16 nodes) and
write only under tmp_path.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest import mock

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from sim.runs import api, montecarlo, results
from sim.runs.parts import with_provenance
from tests.conftest import ROOT, cli_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
QUIET = ["--no-progress", "--no-figures"]
REPLICAS = 40


def python_m_sim(*args: str) -> list[str]:
    return [sys.executable, "-m", "sim", *args]


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.glob("*/*") if p.is_dir())


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def table(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "replicas.parquet")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> pd.DataFrame:
    """The table of an uninterrupted run of REPLICAS replicas (seed 3, serial)."""
    out = tmp_path_factory.mktemp("reference")
    r = cli_in_process(["run", SMALL, "--replicas", str(REPLICAS), "--seed", "3", "--workers",
                        "1", "--out", str(out), *QUIET])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(out)
    return table(run_dir)


def unfinished_run(out: Path, replicas: int = REPLICAS) -> Path:
    """A run whose every chunk finished but which was never finalised (as if it had failed
    then): its parts in parts/, no table. Chunks of 5 replicas."""
    real = montecarlo.default_chunk_size
    with (
        mock.patch.object(api, "finalise", side_effect=SystemExit(137)),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 5),
        pytest.raises(SystemExit),
    ):
        api.run_scenario(SMALL, replicas=replicas, seed=3, workers=1, out=out, progress=False,
                         figures=None)  # fmt: skip
    assert montecarlo.default_chunk_size is real
    (run_dir,) = run_dirs(out)
    assert len(list((run_dir / "parts").glob("p*.parquet"))) == replicas // 5
    return run_dir


def resume(run_dir: Path, *extra: str):
    return cli_in_process(["run", "--resume", str(run_dir), "--workers", "1", *QUIET, *extra])


def part(run_dir: Path, index: int) -> Path:
    return sorted((run_dir / "parts").glob("p*.parquet"))[index]


# --------------------------------------------------------------------------- one writer


def test_a_second_writer_is_refused_naming_the_holder(tmp_path, reference):
    run_dir = unfinished_run(tmp_path / "out")
    before = sorted(p.name for p in (run_dir / "parts").iterdir())
    status = manifest(run_dir)["status"]
    from sim.runs.lock import RunLock

    holder = RunLock(run_dir)
    holder.acquire("test")  # as a run or a resume of this directory holds it
    try:
        r = resume(run_dir)
    finally:
        holder.release()
    assert r.returncode == 2, r.stderr
    assert f"pid {os.getpid()}" in r.stderr and str(run_dir) in r.stderr
    assert "Traceback" not in r.stderr
    assert manifest(run_dir)["status"] == status  # not flipped to failed
    assert sorted(p.name for p in (run_dir / "parts").iterdir()) == before
    r = resume(run_dir)  # the holder is gone: it runs
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path, reference):
    run_dir = unfinished_run(tmp_path / "out")
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True)
    pid = int(dead.stdout)
    (run_dir / "run.lock").write_text(
        json.dumps({"pid": pid, "host": os.uname().nodename, "since": "x", "command": "x"})
    )
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)
    assert not (run_dir / "run.lock").exists()  # let go once complete


def test_two_concurrent_resumes_one_refused_the_table_whole(tmp_path, reference):
    run_dir = unfinished_run(tmp_path / "out")
    for path in sorted((run_dir / "parts").glob("p*.parquet"))[1:]:
        path.unlink()  # 35 replicas left to run: both resumes race for them
    procs = [
        subprocess.Popen(
            python_m_sim("run", "--resume", str(run_dir), "--workers", "1", *QUIET),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    # refused while the other runs, or (when that one was quicker) as complete
    assert (
        "another trainsim process is writing this run directory" in refused
        or "nothing to resume" in refused
    ), refused
    assert manifest(run_dir)["status"] == "complete"
    pd.testing.assert_frame_equal(table(run_dir), reference)


def test_a_resume_while_the_run_runs_is_refused_and_the_run_completes(tmp_path):
    out = tmp_path / "out"
    process = subprocess.Popen(
        python_m_sim("run", SMALL, "--replicas", "400", "--workers", "1", "--out", str(out),
                     *QUIET),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(out.glob("*/*/parts/p*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (run_dir,) = run_dirs(out)
    r = resume(run_dir)
    _, err = process.communicate(timeout=300)
    assert r.returncode == 2, r.stderr
    assert f"pid {process.pid}" in r.stderr
    assert process.returncode == 0, err
    assert manifest(run_dir)["status"] == "complete"
    rows = table(run_dir)
    assert len(rows) == 400 and not rows.duplicated(["point", "replica"]).any()


# --------------------------------------------------------------------------- killed, then resumed


def test_killed_after_the_merge_the_run_still_resumes(tmp_path, reference):
    """A kill while the summary is written (after the table is merged): the parts are
    still there, and a resume finishes the run."""
    out = tmp_path / "out"
    code = (
        "import os, sys; import sim.runs.summaries as a\n"
        "a.summarize_file = lambda *x, **k: os._exit(137)\n"
        "from sim.cli.commands import main\n"
        f"main(['run', {SMALL!r}, '--replicas', '{REPLICAS}', '--seed', '3', '--workers', '1',"
        f" '--out', {str(out)!r}, '--no-progress', '--no-figures'])\n"
    )
    killed = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True)
    assert killed.returncode == 137
    (run_dir,) = run_dirs(out)
    assert (run_dir / "replicas.parquet").exists() and manifest(run_dir)["status"] == "running"
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)
    assert not (run_dir / "parts").exists()  # gone once complete


def test_a_complete_run_without_its_table_resumes_as_the_report_advises(tmp_path, reference):
    r = cli_in_process(["run", SMALL, "--replicas", str(REPLICAS), "--seed", "3", "--workers",
                        "1", "--out", str(tmp_path / "out"), *QUIET])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    (run_dir / "replicas.parquet").unlink()
    report = cli_in_process(["report", str(run_dir), "--out", str(tmp_path / "r.html")])
    assert report.returncode == 0, report.stderr
    assert "run --resume" in (tmp_path / "r.html").read_text()
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)
    again = resume(run_dir)  # complete with its table: nothing to do
    assert again.returncode == 2 and "nothing to resume" in again.stderr


# --------------------------------------------------------------------------- bad parts


def test_bad_parts_are_set_aside_and_run_again_never_merged(tmp_path, reference):
    run_dir = unfinished_run(tmp_path / "out")
    parts = run_dir / "parts"
    # an overlapping part: replicas 2..6 (real rows), across the parts of 0..4 and 5..9
    rows = reference[reference["replica"].between(2, 6)].reset_index(drop=True)
    own = with_provenance(pa.Table.from_pandas(rows, preserve_index=False),
                          manifest(run_dir)["fingerprint"])  # fmt: skip
    pq.write_table(own, parts / "p00000-r000000002-n000000005.parquet")
    # a copy under another range: its rows are not the replicas its name says
    shutil.copy(part(run_dir, 0), parts / "p00000-r000000040-n000000005.parquet")
    # a truncated part
    truncated = part(run_dir, 3)
    truncated.write_bytes(truncated.read_bytes()[:300])
    # a part with a wrong column type
    wrong = part(run_dir, 5)
    frame = pd.read_parquet(wrong)
    frame["goodput"] = frame["goodput"].astype(str)
    frame.to_parquet(wrong, index=False)
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    for reason in ("overlap", "beyond the run's", "unreadable", "column goodput is"):
        assert reason in r.stderr, (reason, r.stderr)
    merged = table(run_dir)
    pd.testing.assert_frame_equal(merged, reference)  # no duplicate, no string column
    assert len(list((run_dir / "rejected-parts").iterdir())) == 4


def test_a_corrupt_part_is_not_counted_as_done(tmp_path, reference):
    """Found bad once, the part's replicas run again: the resume after does not fail the
    same way."""
    run_dir = unfinished_run(tmp_path / "out")
    part(run_dir, 2).write_bytes(b"PAR1 not a parquet file PAR1")
    with mock.patch.object(api, "finalise", side_effect=SystemExit(137)), pytest.raises(SystemExit):
        api.resume_run(run_dir, workers=1, progress=False, figures=None)
    names = [p.name for p in (run_dir / "parts").glob("p*.parquet")]
    assert "p00000-r000000010-n000000005.parquet" in names  # run again, good now
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


# --------------------------------------------------------------------------- edited runs


@pytest.mark.parametrize("edit", ["scenario value", "scenario seed", "scenario replicas",
                                  "run.json seed", "run.json replicas"])  # fmt: skip
def test_a_resume_after_editing_the_run_is_refused(tmp_path, edit):
    run_dir = unfinished_run(tmp_path / "out")
    scenario = run_dir / "scenario.yaml"
    doc = yaml.safe_load(scenario.read_text())
    info = manifest(run_dir)
    if edit == "scenario value":
        doc["checkpoint"]["interval_steps"] = doc["checkpoint"].get("interval_steps", 500) + 1
    elif edit == "scenario seed":
        doc["simulation"]["seed"] = 4
    elif edit == "scenario replicas":
        doc["simulation"]["replicas"] = 100
    elif edit == "run.json seed":
        info["seed"] = 4
    else:
        info["replicas"] = 100
    scenario.write_text(yaml.safe_dump(doc, sort_keys=False))
    (run_dir / "run.json").write_text(json.dumps(info))
    parts = sorted(p.name for p in (run_dir / "parts").iterdir())
    r = resume(run_dir)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert "mix" in r.stderr  # says why: the table would mix two runs
    assert sorted(p.name for p in (run_dir / "parts").iterdir()) == parts
    assert not (run_dir / "replicas.parquet").exists()


@pytest.mark.parametrize(
    "content, words",
    [
        ("no seed", ["run.json", "seed", "missing"]),
        ("a list", ["run.json", "expected an object"]),
        ("/dev/zero", ["run.json", "not a regular file"]),
        ("a FIFO", ["run.json", "not a regular file"]),
        ("huge", ["run.json", "larger than"]),
    ],
)
@pytest.mark.parametrize("command", ["resume", "report", "compare"])
def test_a_run_json_that_is_not_a_manifest_is_refused(tmp_path, content, words, command):
    run_dir = unfinished_run(tmp_path / "out")
    run_json = run_dir / "run.json"
    info = manifest(run_dir)
    run_json.unlink()
    if content == "no seed":
        del info["seed"]
        run_json.write_text(json.dumps(info))
    elif content == "a list":
        run_json.write_text(json.dumps([info]))
    elif content == "/dev/zero":
        run_json.symlink_to("/dev/zero")
    elif content == "a FIFO":
        os.mkfifo(run_json)
    else:
        run_json.write_text(json.dumps({**info, "pad": "x" * 2_000_000}))
    args = {
        "resume": ["run", "--resume", str(run_dir), *QUIET],
        "report": ["report", str(run_dir), "--out", str(tmp_path / "r.html")],
        "compare": ["compare", str(run_dir), str(run_dir), "--no-figure"],
    }[command]
    result: list = []
    worker = threading.Thread(target=lambda: result.append(cli_in_process(args)), daemon=True)
    worker.start()
    worker.join(30)
    assert result, f"{command} hung on a run.json that is {content}"
    (r,) = result
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    if content == "no seed" and command != "resume":
        assert r.returncode in (0, 2), r.stderr  # a report needs no seed; a resume does
        return
    assert r.returncode == 2, r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)


# --------------------------------------------------------------------------- stops


def slow_replica(replica: int, seconds: float = 60.0):
    """simulate_replica, but replica `replica` takes `seconds` (a slow one)."""
    real = montecarlo.simulate_replica

    def simulate(plan, r, seed, **kwargs):
        if r == replica:
            time.sleep(seconds)
        return real(plan, r, seed, **kwargs)

    return mock.patch.object(montecarlo, "simulate_replica", simulate)


def interrupt_after(seconds: float, count: int = 1, gap: float = 0.2) -> threading.Timer:
    def send() -> None:
        for i in range(count):
            if i:
                time.sleep(gap)
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(seconds, send)
    timer.start()
    return timer


@pytest.mark.parametrize("signals", [1, 2])
def test_a_serial_stop_does_not_wait_for_the_replica_in_flight(tmp_path, reference, signals):
    out = tmp_path / "out"
    with slow_replica(7):
        timer = interrupt_after(1.5, signals)
        started = time.monotonic()
        r = cli_in_process(["run", SMALL, "--replicas", str(REPLICAS), "--seed", "3",
                            "--workers", "1", "--out", str(out), *QUIET])  # fmt: skip
        timer.join()
    assert r.returncode == 130, r.stderr
    assert time.monotonic() - started < 10  # not the 60 s of the replica in flight
    assert "Traceback" not in r.stderr
    (run_dir,) = run_dirs(out)
    assert manifest(run_dir)["status"] == "interrupted"
    done = pd.concat(pd.read_parquet(p) for p in (run_dir / "parts").glob("p*.parquet"))
    assert sorted(done["replica"]) == list(range(7))  # those before the slow one, kept
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


def test_sigint_twice_exits_130_quickly_and_the_run_resumes(tmp_path):
    out = tmp_path / "out"
    process = subprocess.Popen(
        python_m_sim("run", SMALL, "--replicas", "3000", "--seed", "3", "--workers", "2",
                     "--out", str(out), *QUIET),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(out.glob("*/*/parts/p*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert time.monotonic() - sent < 5
    assert "Traceback" not in err and "resume with" in err
    (run_dir,) = run_dirs(out)
    assert manifest(run_dir)["status"] == "interrupted"
    r = subprocess.run(python_m_sim("run", "--resume", str(run_dir), "--workers", "2", *QUIET),
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = table(run_dir)
    assert len(rows) == 3000 and not rows.duplicated(["point", "replica"]).any()


def test_a_stop_while_the_table_is_written_keeps_the_run_resumable(tmp_path, reference):
    """SIGINT after the simulation, during the summaries and figures: exit 130, status
    interrupted, and the resume finishes it (nothing to simulate)."""
    out = tmp_path / "out"

    def slow_summary(*args, **kwargs):  # Ctrl-C while the summaries are written
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(60)

    with mock.patch("sim.runs.summaries.summarize_file", slow_summary):
        r = cli_in_process(["run", SMALL, "--replicas", str(REPLICAS), "--seed", "3",
                            "--workers", "1", "--out", str(out), *QUIET])  # fmt: skip
    assert r.returncode == 130, r.stderr
    (run_dir,) = run_dirs(out)
    assert manifest(run_dir)["status"] == "interrupted"
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


def test_optimize_interrupted_exits_130_not_as_a_bug(tmp_path):
    with slow_replica(3):
        timer = interrupt_after(1.5)
        r = cli_in_process(["optimize", SMALL, "--param", "checkpoint.interval_steps=250,500",
                            "--replicas", "8", "--workers", "1", "--out", str(tmp_path / "o"),
                            "--no-progress"])  # fmt: skip
        timer.join()
    assert r.returncode == 130, r.stderr
    assert "internal error" not in r.stderr and "run --resume" in r.stderr
    (run_dir,) = run_dirs(tmp_path / "o")
    assert manifest(run_dir)["status"] == "interrupted"
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    assert len(table(run_dir)) == 16


def test_dask_interrupted_then_resumed_serially(tmp_path, reference):
    pytest.importorskip("distributed")
    out = tmp_path / "out"
    process = subprocess.Popen(
        python_m_sim("run", SMALL, "--replicas", str(REPLICAS), "--seed", "3", "--executor",
                     "dask", "--workers", "2", "--out", str(out), *QUIET),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(out.glob("*/*/parts/p*.parquet")) and time.monotonic() < deadline:
        if process.poll() is not None:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    (run_dir,) = run_dirs(out)
    if process.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert process.returncode == 130, err
    r = resume(run_dir, "--executor", "serial")
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


# --------------------------------------------------------------------------- a full disk


def test_a_full_disk_says_what_was_kept_and_how_to_resume(tmp_path, reference):
    out = tmp_path / "out"
    real = api.RunDir.write_part
    written = []

    def write_part(self, point, first, rows):
        if len(written) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(first)
        real(self, point, first, rows)

    with (
        mock.patch.object(api.RunDir, "write_part", write_part),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 5),
    ):
        r = cli_in_process(["run", SMALL, "--replicas", str(REPLICAS), "--seed", "3",
                            "--workers", "1", "--out", str(out), *QUIET])  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "bug" not in r.stderr
    assert "No space left on device" in r.stderr
    assert f"Kept: 15 of {REPLICAS} replicas in 3 parts" in r.stderr
    assert "run --resume" in r.stderr and "cp -r" in r.stderr
    (run_dir,) = run_dirs(out)
    moved = tmp_path / "elsewhere"
    shutil.copytree(run_dir, moved)  # resumed on a disk with room
    r = resume(moved)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(table(moved), reference)


# --------------------------------------------------------------------------- outputs over the run


@pytest.mark.parametrize("target", ["replicas.parquet", "run.json", "scenario.yaml",
                                    "figures/x.html", "."])  # fmt: skip
def test_report_out_over_the_run_is_refused(tmp_path, target):
    r = cli_in_process(["run", SMALL, "--replicas", "5", "--workers", "1", "--out",
                        str(tmp_path / "out"), *QUIET])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    r = cli_in_process(["report", str(run_dir), "--out", str(run_dir / target)])
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "destroy the run" in r.stderr
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_report_out_through_a_link_to_the_table_is_refused(tmp_path):
    r = cli_in_process(["run", SMALL, "--replicas", "5", "--workers", "1", "--out",
                        str(tmp_path / "out"), *QUIET])  # fmt: skip
    (run_dir,) = run_dirs(tmp_path / "out")
    os.link(run_dir / "replicas.parquet", tmp_path / "table.html")
    r = cli_in_process(["report", str(run_dir), "--out", str(tmp_path / "table.html")])
    assert r.returncode == 2, r.stderr
    assert pq.ParquetFile(run_dir / "replicas.parquet").metadata.num_rows == 5


# --------------------------------------------------------------------------- merge


@pytest.mark.parametrize(
    "damage", ["missing", "truncated", "/dev/zero", "a FIFO", "string goodput"]
)
def test_merge_of_a_slice_without_a_good_table_is_refused(tmp_path, damage):
    sweep = ["--param", "checkpoint.interval_steps=250,500", "--replicas", "4", "--workers", "1"]
    slices = []
    for i, points in enumerate(["0:1", "1:2"]):
        r = cli_in_process(["run", SMALL, *sweep, "--points", points, "--out",
                            str(tmp_path / f"s{i}"), *QUIET])  # fmt: skip
        assert r.returncode == 0, r.stderr
        slices += run_dirs(tmp_path / f"s{i}")
    bad = slices[1] / "replicas.parquet"
    if damage == "missing":
        bad.unlink()
    elif damage == "truncated":
        bad.write_bytes(bad.read_bytes()[:200])
    elif damage == "/dev/zero":
        bad.unlink()
        bad.symlink_to("/dev/zero")
    elif damage == "a FIFO":
        bad.unlink()
        os.mkfifo(bad)
    else:
        frame = pd.read_parquet(bad)
        frame["goodput"] = frame["goodput"].astype(str)
        frame.to_parquet(bad, index=False)
    result: list = []
    args = ["merge", *map(str, slices), "--out", str(tmp_path / "merged"), "--no-figures"]
    worker = threading.Thread(target=lambda: result.append(cli_in_process(args)), daemon=True)
    worker.start()
    worker.join(30)
    assert result, f"merge hung on a table that is {damage}"
    (r,) = result
    assert r.returncode == 2, r.stderr
    assert str(bad) in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "merged").exists()  # refused before anything is written


def test_part_schema_is_that_of_real_parts():
    """The schema parts are checked against is the one chunks really write (every shipped
    scenario, and a sweep of a string and an integer key)."""
    from sim.model.scenario import load_scenario

    cases = [load_scenario(path) for path in sorted((ROOT / "scenarios").glob("*.yaml"))]
    cases.append(load_scenario(SMALL, [], ["checkpoint.interval_steps=250,500"]))
    for scenario_set in cases:
        point = scenario_set.feasible[0]
        chunk = next(
            montecarlo.chunks(scenario_set, 2, 1, 2, points=range(point.index, point.index + 1))
        )
        real = pa.Table.from_pandas(montecarlo.run_chunk_table(chunk), preserve_index=False)
        expected = montecarlo.part_schema(scenario_set, point.index, 1)
        assert real.schema.remove_metadata().equals(expected), scenario_set.name


def test_plan_interrupted_exits_130_and_says_what_was_kept(tmp_path):
    """A plan stops like a run (exit 130 within seconds, status interrupted) and resumes
    like one (`run --resume`; tests/cli/test_plan_resume.py compares it with an
    uninterrupted plan)."""
    with slow_replica(2):
        timer = interrupt_after(1.5)
        started = time.monotonic()
        r = cli_in_process(
            ["plan", SMALL, "--vary", "checkpoint.interval_steps=250,500", "--deadline-days",
             "30", "--replicas-first", "4", "--replicas-max", "8", "--workers", "1", "--executor",
             "serial", "--out", str(tmp_path / "p"), "--no-progress"]
        )  # fmt: skip
        timer.join()
    assert r.returncode == 130, r.stderr
    assert time.monotonic() - started < 10
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    (run_dir,) = run_dirs(tmp_path / "p")
    assert manifest(run_dir)["status"] == "interrupted"
    assert not (run_dir / "run.lock").exists()
    assert f"run --resume {run_dir}" in r.stderr
    again = resume(run_dir)  # the race goes on from the parts
    assert again.returncode == 0, again.stderr
    assert manifest(run_dir)["status"] == "complete" and (run_dir / "plan.json").exists()


def test_compare_figure_over_a_run_s_figure_is_refused(tmp_path):
    r = cli_in_process(["run", SMALL, "--replicas", "5", "--workers", "1", "--out",
                        str(tmp_path / "out"), "--no-progress"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(tmp_path / "out")
    target = run_dir / "figures" / "lost_work.png"
    before = target.read_bytes()
    r = cli_in_process(["compare", str(run_dir), str(run_dir), "--figure", str(target)])
    assert r.returncode == 2, r.stderr
    assert "destroy the run" in r.stderr and target.read_bytes() == before


# --------------------------------------------------------------------------- issue 27, section 5
#
# Nothing written through a link or onto another run's files; a run directory checks what
# it holds (each part and the table carry their fingerprint and row count); merge joins
# the slices' incident logs.


def complete_run(out: Path, *extra: str) -> Path:
    r = cli_in_process(["run", SMALL, "--replicas", "5", "--seed", "3", "--workers", "1",
                        "--out", str(out), *QUIET, *extra])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = run_dirs(out)
    return run_dir


def test_a_run_lock_that_is_a_link_is_refused_its_target_untouched(tmp_path):
    run_dir = unfinished_run(tmp_path / "out")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (run_dir / "run.lock").unlink(missing_ok=True)
    (run_dir / "run.lock").symlink_to(victim)
    r = resume(run_dir)
    assert r.returncode == 2, r.stderr
    assert "symbolic link" in r.stderr and "run.lock" in r.stderr
    assert victim.read_text() == "keep me\n"


def test_a_part_of_another_scenario_with_the_same_seed_runs_again(tmp_path, reference):
    run_dir = unfinished_run(tmp_path / "out")
    other = unfinished_run(tmp_path / "other", replicas=10)  # same seed, another replicas
    shutil.copy(part(other, 1), part(run_dir, 1))
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    assert "run from another scenario, seed or replicas" in r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


def test_a_complete_table_that_lost_rows_is_run_again(tmp_path, reference):
    out = tmp_path / "out"
    r = cli_in_process(["run", SMALL, "--replicas", str(REPLICAS), "--seed", "3", "--workers",
                        "1", "--out", str(out), *QUIET])  # fmt: skip
    (run_dir,) = run_dirs(out)
    table(run_dir).iloc[:-3].to_parquet(run_dir / "replicas.parquet", index=False)
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    assert "nothing to resume" not in r.stderr
    pd.testing.assert_frame_equal(table(run_dir), reference)


def test_a_resume_without_the_fingerprint_is_refused_naming_it(tmp_path):
    run_dir = unfinished_run(tmp_path / "out")
    doc = manifest(run_dir)
    del doc["fingerprint"]
    (run_dir / "run.json").write_text(json.dumps(doc))
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    scenario["cluster"]["nodes"] = 8
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    r = resume(run_dir)
    assert r.returncode == 2, r.stderr
    assert "fingerprint" in r.stderr and "Traceback" not in r.stderr


def test_the_resumed_table_is_byte_identical(tmp_path, monkeypatch):
    """Row groups of 3 rows, whatever the parts (of 5 rows uninterrupted, of 2 resumed)."""
    monkeypatch.setattr(results, "ROW_GROUP", 3)
    with mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 5):
        reference_dir = complete_run(tmp_path / "whole")
    with (
        mock.patch.object(api, "finalise", side_effect=SystemExit(137)),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 2),
        pytest.raises(SystemExit),
    ):
        api.run_scenario(SMALL, replicas=5, seed=3, workers=1, out=tmp_path / "cut",
                         progress=False, figures=None)  # fmt: skip
    (run_dir,) = run_dirs(tmp_path / "cut")
    (part(run_dir, 1)).unlink()
    assert resume(run_dir).returncode == 0
    assert (run_dir / "replicas.parquet").read_bytes() == (
        reference_dir / "replicas.parquet"
    ).read_bytes()


def incidents(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "incidents.parquet")


def test_a_deleted_incident_part_runs_its_replicas_again(tmp_path):
    whole = complete_run(tmp_path / "whole", "--incidents")
    with (
        mock.patch.object(api, "finalise", side_effect=SystemExit(137)),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 2),
        pytest.raises(SystemExit),
    ):
        api.run_scenario(SMALL, replicas=5, seed=3, workers=1, out=tmp_path / "cut",
                         progress=False, figures=None, incidents=True)  # fmt: skip
    (run_dir,) = run_dirs(tmp_path / "cut")
    (run_dir / "parts" / f"incidents-{part(run_dir, 0).name}").unlink()
    r = resume(run_dir)
    assert r.returncode == 0, r.stderr
    assert "are missing" in r.stderr
    assert len(incidents(whole)) > 0
    pd.testing.assert_frame_equal(incidents(run_dir), incidents(whole))


def sliced(tmp_path: Path, *extra: str) -> list[Path]:
    sweep = ["--param", "checkpoint.interval_steps=250,500", "--replicas", "4", "--workers", "1"]
    slices = []
    for i, points in enumerate(["0:1", "1:2"]):
        r = cli_in_process(["run", SMALL, *sweep, "--points", points, "--out",
                            str(tmp_path / f"s{i}"), *QUIET, *extra])  # fmt: skip
        assert r.returncode == 0, r.stderr
        slices += run_dirs(tmp_path / f"s{i}")
    return slices


def test_merge_joins_the_slices_incident_logs(tmp_path):
    slices = sliced(tmp_path, "--incidents")
    r = cli_in_process(["merge", *map(str, slices), "--out", str(tmp_path / "m"), "--no-figures"])
    assert r.returncode == 0, r.stderr
    (merged,) = run_dirs(tmp_path / "m")
    joined = pd.concat([incidents(s) for s in slices], ignore_index=True)
    assert len(joined) > 0
    pd.testing.assert_frame_equal(incidents(merged), joined)


def test_merge_of_a_slice_that_lost_rows_is_refused(tmp_path):
    slices = sliced(tmp_path)
    table(slices[1]).iloc[:-1].to_parquet(slices[1] / "replicas.parquet", index=False)
    r = cli_in_process(["merge", *map(str, slices), "--out", str(tmp_path / "m"), "--no-figures"])
    assert r.returncode == 2, r.stderr
    assert "replicas.parquet" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m").exists() or not run_dirs(tmp_path / "m")


# --------------------------------------------------------------------------- links, other runs


def test_export_and_report_never_write_over_another_run(tmp_path):
    one, other = complete_run(tmp_path / "a"), complete_run(tmp_path / "b")
    before = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
    for command in (
        ["export", str(one), "--out", str(other / "replicas.parquet"), "--force"],
        ["export", str(one), "--out", str(other / "figures" / "x.csv"), "--force"],
        ["report", str(one), "--out", str(other / "figures" / "r.html")],
        ["report", str(one), "--out", str(other / "summary.json")],
    ):
        r = cli_in_process(command)
        assert r.returncode == 2, (command, r.stderr)
        assert "destroy the run" in r.stderr and str(other) in r.stderr
    assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("command", ["export", "report"])
def test_export_and_report_never_write_through_a_link(tmp_path, command):
    run_dir = complete_run(tmp_path / "a")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    for link in (tmp_path / "out.txt", tmp_path / "dangling.txt"):
        link.symlink_to(victim if link.name == "out.txt" else tmp_path / "nowhere")
        r = cli_in_process(
            [command, str(run_dir), "--out", str(link), "--force"][
                : 5 if command == "export" else 4
            ]
        )
        assert r.returncode == 2, r.stderr
        assert "symbolic link" in r.stderr
    assert victim.read_text() == "keep me\n" and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "key, value",
    [("executor", "quantum"), ("resumed", 5), ("adaptive", 5), ("overrides", 7),
     ("merged_from", 3), ("incidents", "yes")],
)  # fmt: skip
def test_a_damaged_run_json_value_is_bad_input_naming_the_key(tmp_path, key, value):
    run_dir = unfinished_run(tmp_path / "out", replicas=10)
    (run_dir / "run.json").write_text(json.dumps({**manifest(run_dir), key: value}))
    r = resume(run_dir)
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert key in r.stderr and "run.json" in r.stderr


def test_a_complete_run_whose_table_is_a_fifo_resumes_without_hanging(tmp_path):
    run_dir = complete_run(tmp_path / "out")
    expected = table(run_dir)
    (run_dir / "replicas.parquet").unlink()
    os.mkfifo(run_dir / "replicas.parquet")
    result: list = []
    worker = threading.Thread(target=lambda: result.append(resume(run_dir)), daemon=True)
    worker.start()
    worker.join(60)
    assert result, "the resume hung on a FIFO"
    assert result[0].returncode == 0, result[0].stderr
    pd.testing.assert_frame_equal(table(run_dir), expected)
