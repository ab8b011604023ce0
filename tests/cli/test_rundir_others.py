"""Run directories against other runs' files, and changed under a command (issue 35, "Holes
found by a hostile pass"): a command deletes only what it made, writes nothing into another
run's directory and never follows a link inside a run directory; a run directory deleted or
changed under a command is bad input (exit 2) naming the path, and what is there is kept.
Also a tilde in --out and $TRAINSIM_RESULTS, the lock named when a resume is refused, and a
nested parquet column in an incident log.

Each test failed on the code before its fix. Runs are small (scenarios/llama7b-128.yaml,
5 or 10 replicas) and write only under tmp_path.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim.runs import montecarlo
from sim.runs.lock import RunLock
from tests.cli.test_rundir_holes import (
    QUIET,
    SMALL,
    complete_run,
    manifest,
    resume,
    run_dirs,
    table,
    unfinished_run,
)
from tests.conftest import cli_in_process, flat


def files_of(folder: Path) -> dict[Path, bytes]:
    """Every regular file under `folder` (links not followed) and its bytes."""
    return {
        p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
    }


def no_bug(r) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- another run's files


def test_a_resume_removes_only_the_parts_it_wrote(tmp_path):
    """A complete run B kept under A/parts/ (and a note beside it) outlives A's resume."""
    run_a = unfinished_run(tmp_path / "a", replicas=10)
    run_b = complete_run(tmp_path / "b")
    kept = run_a / "parts" / run_b.name
    shutil.move(run_b, kept)
    (run_a / "parts" / "notes.txt").write_text("mine\n")
    before = files_of(kept)
    r = resume(run_a)
    assert r.returncode == 0, r.stderr
    assert files_of(kept) == before and len(before) >= 4  # run.json, scenario, table, summaries
    assert (run_a / "parts" / "notes.txt").read_text() == "mine\n"
    assert not list((run_a / "parts").glob("*.parquet"))  # its own parts went
    assert f"{run_a / 'parts'} kept" in flat(r.stderr)
    assert len(table(run_a)) == 10


def test_export_report_and_compare_write_nothing_into_another_run(tmp_path):
    run_a, run_b = complete_run(tmp_path / "a"), complete_run(tmp_path / "b")
    assert cli_in_process(["export", str(run_b)]).returncode == 0  # B's own replicas.csv
    assert cli_in_process(["report", str(run_b)]).returncode == 0  # B's own report.html
    before = files_of(run_b)
    for command in (
        ["export", str(run_a), "--out", str(run_b / "replicas.csv"), "--force"],
        ["export", str(run_a), "--out", str(run_b / "a.csv")],
        ["report", str(run_a), "--out", str(run_b / "report.html")],
        ["report", str(run_a), "--out", str(run_b / "sub" / "a.html")],
        ["compare", str(run_a), str(run_a), "--figure", str(run_b / "a.png")],
    ):
        r = cli_in_process(command)
        assert r.returncode == 2, (command, r.stderr)
        assert "another run" in r.stderr and str(run_b) in r.stderr, r.stderr
        no_bug(r)
    assert files_of(run_b) == before and not (run_b / "sub").exists()
    # a run's own outputs are still its commands' to write over
    for command in (["export", str(run_a), "--force"], ["report", str(run_a)]):
        assert cli_in_process(command).returncode == 0
    r = cli_in_process(["compare", str(run_a), str(run_b), "--figure", str(run_b / "ab.png")])
    assert r.returncode == 0, r.stderr


def test_the_report_reads_no_figures_through_a_linked_figures_folder(tmp_path):
    run_dir = complete_run(tmp_path / "a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "private.png").write_bytes(b"\x89PNG\r\n\x1a\n not the run's")
    (run_dir / "figures").symlink_to(elsewhere)
    r = cli_in_process(["report", str(run_dir), "--out", str(tmp_path / "r.html")])
    assert r.returncode == 0, r.stderr
    assert "private" not in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(
    "change", ["parts a link", "figures a link", "a figure a link", "a part a link",
               "parts a file", "table a directory"],
)  # fmt: skip
def test_a_resume_never_follows_a_link_nor_removes_what_took_a_run_file_s_place(tmp_path, change):
    """A resume follows no link inside the run directory (parts/, figures/, a figure, a part)
    and refuses a folder of the run that is a file or a file that is a folder, naming it:
    exit 2 before anything is written, everything left as it was."""
    run_dir = unfinished_run(tmp_path / "out", replicas=10)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep me\n")
    status = manifest(run_dir)["status"]
    figures: list[str] = []  # the resume draws figures: it must not draw through a link
    if change == "parts a link":
        named = run_dir / "parts"
        shutil.move(named, elsewhere / "parts")
        named.symlink_to(elsewhere / "parts")
    elif change == "figures a link":
        named = run_dir / "figures"
        named.symlink_to(elsewhere)
    elif change == "a figure a link":
        (run_dir / "figures").mkdir()
        named = run_dir / "figures" / "lost_work.png"
        named.symlink_to(elsewhere / "keep.txt")
    elif change == "a part a link":  # not refused: set aside as no part of the run's
        named = sorted((run_dir / "parts").glob("p*.parquet"))[0]
        shutil.move(named, elsewhere / named.name)
        named.symlink_to(elsewhere / named.name)
        figures = ["--no-figures"]
    elif change == "parts a file":
        named = run_dir / "parts"
        shutil.rmtree(named)
        named.write_text("keep me\n")
    else:
        named = run_dir / "replicas.parquet"
        named.mkdir()
        (named / "keep.txt").write_text("keep me\n")
    before = files_of(elsewhere)
    r = cli_in_process(["run", "--resume", str(run_dir), "--workers", "1", "--no-progress",
                        *figures])  # fmt: skip
    no_bug(r)
    assert files_of(elsewhere) == before  # nothing written or removed through a link
    if change == "a part a link":
        assert r.returncode == 0, r.stderr
        assert f"{named}: a symbolic link" in flat(r.stderr)
        assert (run_dir / "rejected-parts" / named.name).is_symlink()
        assert len(table(run_dir)) == 10
        return
    assert r.returncode == 2, r.stderr
    assert str(named) in r.stderr, r.stderr
    assert manifest(run_dir)["status"] == status
    if change.endswith("a link"):
        assert "symbolic link" in r.stderr and named.is_symlink()
    elif change == "parts a file":
        assert named.read_text() == "keep me\n"
    else:
        assert (named / "keep.txt").read_text() == "keep me\n"


# --------------------------------------------------------------------------- changed under a run


@pytest.mark.parametrize("change", ["deleted", "parts a file", "table a directory"])
def test_a_run_directory_changed_mid_run_is_bad_input_naming_the_path(tmp_path, change):
    out = tmp_path / "out"
    real = montecarlo.simulate_replica

    def simulate(plan, replica, seed, **kwargs):
        if replica == 6:  # three parts of two replicas are written: change the directory
            (run_dir,) = run_dirs(out)
            if change == "deleted":
                shutil.rmtree(run_dir)
            elif change == "parts a file":
                shutil.rmtree(run_dir / "parts")
                (run_dir / "parts").write_text("keep me\n")
            else:
                (run_dir / "replicas.parquet").mkdir()
                (run_dir / "replicas.parquet" / "keep.txt").write_text("keep me\n")
        return real(plan, replica, seed, **kwargs)

    with (
        mock.patch.object(montecarlo, "simulate_replica", simulate),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 2),
    ):
        r = cli_in_process(["run", SMALL, "--replicas", "10", "--workers", "1", "--executor",
                            "serial", "--out", str(out), *QUIET])  # fmt: skip
    no_bug(r)
    assert r.returncode == 2, r.stderr
    (run_dir,) = [p for p in out.glob("*/*")] or [None]
    if change == "deleted":
        assert run_dir is None  # nothing made again
        assert "deleted" in r.stderr and str(out) in r.stderr
        return
    if change == "parts a file":
        assert str(run_dir / "parts") in r.stderr
        assert (run_dir / "parts").read_text() == "keep me\n"
        return
    assert str(run_dir / "replicas.parquet") in r.stderr
    assert (run_dir / "replicas.parquet" / "keep.txt").read_text() == "keep me\n"
    assert len(list((run_dir / "parts").glob("p*.parquet"))) == 5  # every part kept
    shutil.rmtree(run_dir / "replicas.parquet")  # moved away, as the message says: it resumes
    again = resume(run_dir)
    assert again.returncode == 0, again.stderr
    assert len(table(run_dir)) == 10


# --------------------------------------------------------------------------- smaller


def test_a_tilde_in_out_and_trainsim_results_is_the_home_directory(tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TRAINSIM_RESULTS", raising=False)
    args = ["run", SMALL, "--replicas", "2", "--workers", "1", *QUIET]
    r = cli_in_process([*args, "--out=~/r"], cwd=cwd)
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("TRAINSIM_RESULTS", "~/env")
    r = cli_in_process(args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert not (cwd / "~").exists()
    (run_dir,) = run_dirs(home / "r")
    assert len(run_dirs(home / "env")) == 1
    for command in (["export", str(run_dir), "--out=~/t.csv"],
                    ["report", str(run_dir), "--out=~/t.html"]):  # fmt: skip
        r = cli_in_process(command, cwd=cwd)
        assert r.returncode == 0, r.stderr
    assert (home / "t.csv").is_file() and (home / "t.html").is_file()
    assert not (cwd / "~").exists()


def test_a_resume_refused_for_the_lock_names_run_lock(tmp_path):
    run_dir = unfinished_run(tmp_path / "out", replicas=10)
    holder = RunLock(run_dir)
    holder.acquire("test")  # as a run or another resume of this directory holds it
    try:
        r = resume(run_dir)
    finally:
        holder.release()
    assert r.returncode == 2, r.stderr
    assert str(run_dir / "run.lock") in flat(r.stderr)


@pytest.mark.parametrize("kind", ["list", "map", "struct"])
def test_a_nested_parquet_column_in_an_incident_log_is_refused_naming_it(tmp_path, kind):
    column = {
        "list": pa.array([["gpu"], ["gpu", "x"], ["host"]]),
        "map": pa.array(
            [[("a", "gpu")], [("a", "host")], [("b", "x")]], pa.map_(pa.string(), pa.string())
        ),
        "struct": pa.array([{"n": "gpu"}, {"n": "host"}, {"n": "gpu"}]),
    }[kind]
    log = tmp_path / "log.parquet"
    pq.write_table(pa.table({"time": [1.0, 5.0, 9.0], "node": [0, 1, 2], "class": column}), log)
    r = cli_in_process(["fit", str(log), "--nodes", "4", "--end", "100", "--out",
                        str(tmp_path / "fit"), "--no-figures"])  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "column class" in r.stderr and "nested" in r.stderr, r.stderr
    assert not (tmp_path / "fit").exists()
