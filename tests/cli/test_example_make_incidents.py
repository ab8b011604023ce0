"""examples/make_incidents.py as a user runs it: its defaults print examples/incidents.csv
on stdout and write nothing into the checkout; --out, --seed, --nodes, --days, --start and
--lemons draw another log that `trainsim fit` reads; a lemon outside the nodes is refused."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd

from tests.conftest import ROOT, cli_in_process

SCRIPT = ROOT / "examples" / "make_incidents.py"


def make_incidents(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_defaults_print_the_checked_in_log_and_write_nothing(tmp_path):
    before = {p: p.stat().st_mtime_ns for p in (ROOT / "examples").iterdir()}
    r = make_incidents(cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ROOT / "examples" / "incidents.csv").read_text()
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "examples").iterdir()} == before
    assert list(tmp_path.iterdir()) == []


def test_the_options_draw_another_log_that_fit_reads(tmp_path):
    out = tmp_path / "my log.csv"

    def options(seed: int) -> list[str]:
        return ["--nodes", "16", "--gpus-per-node", "4", "--days", "20", "--seed", str(seed),
                "--start", "2025-01-01T00:00:00Z", "--lemons", "2,9"]  # fmt: skip

    r = make_incidents(*options(5), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and str(out) in r.stderr
    log = pd.read_csv(out)
    assert list(log.columns) == ["time", "node", "class", "scope", "repair_hours"]
    nodes = log["node"].dropna()
    assert nodes.str.removeprefix("gpu-node-").astype(int).between(0, 15).all()
    times = pd.to_datetime(log["time"])
    start = pd.Timestamp("2025-01-01T00:00:00Z")
    assert times.min() >= start and times.max() <= start + pd.Timedelta(days=20)
    # the seed decides the draw
    again = make_incidents(*options(5), cwd=tmp_path)
    assert again.stdout == out.read_text()
    other = make_incidents(*options(6), cwd=tmp_path)
    assert other.stdout != out.read_text()
    fitted = cli_in_process(
        ["fit", str(out), "--nodes", "16", "--gpus-per-node", "4", "--start",
         "2025-01-01T00:00:00Z", "--end", "2025-01-21T00:00:00Z", "--out",
         str(tmp_path / "fit"), "--no-figures", "--json"]
    )  # fmt: skip
    assert fitted.returncode == 0, fitted.stderr


def test_a_lemon_outside_the_nodes_and_a_bad_number_are_refused(tmp_path):
    r = make_incidents("--nodes", "8", cwd=tmp_path)  # the default lemons 7, 23, 51
    assert r.returncode == 2 and "--lemons" in r.stderr and "0 to 7" in r.stderr
    for bad in (["--nodes", "0"], ["--days", "-1"], ["--lemons", "x"], ["--start", "soon"]):
        r = make_incidents(*bad, cwd=tmp_path)
        assert r.returncode == 2 and bad[0] in r.stderr, (bad, r.stderr)
    assert list(tmp_path.iterdir()) == []
