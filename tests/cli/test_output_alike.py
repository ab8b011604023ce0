"""Output that reads the same in a terminal, a pipe and a log (in-process, outputs in
tmp_path): COLUMNS honoured when piped, no key or number column cut short at 80 or 200
columns, infeasible reasons below the table, progress as plain lines off a terminal, one
number style (thousands separators in ± s.e., the same decimals along a row, an
interval's ends never reading alike), metric names in words; and the README's commands
printing the same in a terminal and a pipe apart from colours."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from rich.console import Console

from sim.decide import answer
from sim.runs import progress
from sim.show import console
from tests.conftest import ROOT, cli_in_process

SEVENTY = str(ROOT / "scenarios/llama70b-1k.yaml")
SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
QUICK = ["--workers", "1", "--no-figures"]
PLAN = [
    "plan", SEVENTY, "--vary", "cluster.nodes=64,128,256",
    "--vary", "cluster.spare_nodes=0,4,8,16", "--deadline-days", "16.5",
    "--replicas-first", "4", "--replicas-max", "8", "--workers", "1", "--no-progress",
]  # fmt: skip
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def trainsim(monkeypatch, columns: int | None, *args: str):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    return cli_in_process(list(args))


def table_lines(text: str) -> list[str]:
    """The lines drawn by a table (its borders and rows), not the sentences around it."""
    return [line for line in text.splitlines() if re.search(r"[│┃┏└─━]", line)]


@pytest.mark.parametrize("width", [80, 200])
def test_plan_piped_never_elides_a_key_column(monkeypatch, tmp_path, width):
    r = trainsim(monkeypatch, width, *PLAN, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    # nothing cut short, the header neither (an interval's … has spaces around)
    assert not re.search(r"\S…", r.stdout), r.stdout
    assert all(len(line.rstrip()) <= width for line in table_lines(r.stdout)), r.stdout
    # every point, with both its keys, is there whole: as a table row or a plain line
    plan = pd.read_json(next(tmp_path.glob("*/*/plan.json")), typ="series")
    for point in plan["candidates"]:
        if not point["replicas"]:
            continue
        nodes, spares = point["cluster.nodes"], point["cluster.spare_nodes"]
        row = re.compile(rf"^\s*│?\s*{nodes}\s+│?\s*{spares}\s", re.M)  # a table's row
        plain = f"- nodes: {nodes}; spare nodes: {spares};"  # a plain line, wrapped or not
        assert row.search(r.stdout) or plain in " ".join(r.stdout.split()), (nodes, spares)
    if width == 200:  # COLUMNS is honoured beyond the old fixed 120
        assert max(len(line.rstrip()) for line in r.stdout.splitlines()) > 120


@pytest.mark.parametrize("width", [80, 200])
def test_an_infeasible_reason_goes_below_the_sweep_table(monkeypatch, tmp_path, width):
    r = trainsim(monkeypatch, width, "run", SEVENTY, "--replicas", "4", *QUICK,
                 "--no-progress", "--param", "cluster.nodes=64,96,128", "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr
    sweep = r.stdout[r.stdout.index("sweep: time to train") :]
    drawn = table_lines(sweep)
    assert not any("global_batch_tokens" in line or "sequences" in line for line in drawn)
    (reason,) = [line for line in sweep.splitlines() if line.startswith("infeasible, not")]
    assert "nodes=96: model.global_batch_tokens" in reason
    assert all(len(line.rstrip()) <= width for line in drawn)


def test_progress_off_a_terminal_is_a_few_plain_lines(monkeypatch, tmp_path):
    r = trainsim(monkeypatch, 80, "run", SMALL, "--replicas", "40", *QUICK, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "replicas" in line]
    assert lines and lines[-1].startswith("llama7b-128: 40/40 replicas, done in ")
    assert len(lines) <= 11  # a tenth at most each, however small the chunks
    assert not re.search("[━─]", r.stderr) and not ANSI.search(r.stderr)


def test_plain_progress_says_each_tenth_once_and_the_end(monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_SECONDS", 0.0)
    out = Console(width=80, file=__import__("io").StringIO())
    bar = progress.PlainProgress(out, "replicas")
    task = bar.add_task("round 1", total=1000)
    for _ in range(200):
        bar.advance(task, 5)
    bar.update(task, description="round 1, out: 2 infeasible")
    bar.stop()
    lines = out.file.getvalue().splitlines()
    assert lines[0] == "round 1: 100/1,000 replicas, 10%"
    assert len(lines) == 11 and lines[-2].startswith("round 1: 1,000/1,000 replicas, done in ")
    assert lines[-1] == "round 1, out: 2 infeasible"


def test_one_number_style_in_the_run_table(monkeypatch, tmp_path):
    r = trainsim(monkeypatch, 120, "run", SEVENTY, "--replicas", "30", *QUICK, "--no-progress",
                 "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in table_lines(r.stdout):
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 7 and cells[0] != "metric":
            rows[cells[0]] = cells[1:]
    cost = rows["cost (USD)"]
    table = pd.read_parquet(next(tmp_path.glob("*/*/replicas.parquet")))
    sem = table["cost_usd"].std(ddof=1) / len(table) ** 0.5
    assert sem >= 1000 and cost[1] == f"{sem:,.0f}"  # ± s.e. with separators too
    for label, cells in rows.items():  # one number of decimals along a row
        decimals = {len(c.rstrip("%").partition(".")[2]) for c in cells if c != "—"}
        assert len(decimals) == 1, (label, cells)
    assert rows["goodput"][0].endswith("%")  # a share reads as in the sweep and the answer


def test_an_intervals_ends_read_apart_and_table_columns_keep_their_decimals():
    # a value alone has three significant digits (docs/metrics.md); an interval whose ends
    # would read alike gets the digits that tell them apart, and its estimate with them
    costs = [1_071_200.0, 1_073_600.0, 1_074_900.0]
    assert {answer.money(c) for c in costs} == {"$1.07M"}
    assert answer.readable_interval("cost_usd", costs[0], costs[1], signed=False) == (
        "$1.071M … $1.074M"
    )
    assert answer.readable_interval("cost_usd", 2e6, 2e6, signed=False) == "$2.00M … $2.00M"
    assert answer.readable_estimate("time_to_train_days", 16.32, 16.30, 16.33) == (
        "16.32 days (16.30 … 16.33 days)"
    )
    assert answer.same_decimals([16.43, 16.9, 0.0291]) == ["16.43", "16.90", "0.03"]
    assert answer.same_decimals([16.431, 16.432], distinct=True) == ["16.431", "16.432"]
    assert answer.same_decimals([1074882.0, 1010.7]) == ["1,074,882", "1,011"]
    assert answer.same_decimals([0.985, 0.0009266], "goodput") == ["98.50%", "0.09%"]


def test_plan_and_optimize_name_metrics_in_words(monkeypatch, tmp_path):
    r = trainsim(monkeypatch, 200, *PLAN, "--out", str(tmp_path / "plan"))
    assert r.returncode == 0, r.stderr
    assert "cost_usd" not in r.stdout and "mean cost" in r.stdout
    r = trainsim(monkeypatch, 200, "optimize", SMALL, "--param",
                 "checkpoint.interval_minutes=30,60,240", "--replicas", "12", "--workers", "1",
                 "--no-progress", "--out", str(tmp_path / "optimize"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "time_to_train_days" not in r.stdout and "mean time to train" in r.stdout
    # values in the unit they read best in, not a fraction of a day
    assert not re.search(r"\b0\.0\d+ days", r.stdout), r.stdout
    assert answer.metric_title("cost_usd") == "cost (USD)"
    assert answer.metric_words("effective_mfu") == "effective MFU"


def test_readme_commands_print_alike_in_a_terminal_and_a_pipe(monkeypatch, tmp_path):
    """The README's commands (fewer replicas): forced onto a terminal of 120 columns, and
    piped with COLUMNS=120, they print the same apart from colours."""
    fast = ["--workers", "1", "--no-progress"]
    commands = [  # (arguments, whether it takes --out)
        (["calc", SEVENTY], False),
        (["run", SEVENTY, "--replicas", "8", *QUICK, "--no-progress",
          "--param", "checkpoint.interval_steps=250,500,1000,2000"], True),
        (["validate", SMALL, SEVENTY], False),
        (["fabric", str(ROOT / "scenarios/llama70b-1k-fabric.yaml"),
          "--degrade", "leaf0-spine0=0.5"], False),
        (["optimize", SEVENTY, "--param", "checkpoint.interval_minutes=15,30,60",
          "--replicas", "12", *fast], True),
        (PLAN, True),
        (["fit", str(ROOT / "examples/incidents.csv"), "--nodes", "64",
          "--start", "2026-03-01T00:00:00Z", "--end", "2026-04-30T00:00:00Z",
          "--no-figures"], True),
        (["forecast", SMALL, "--elapsed-days", "6", "--done-steps", "150000",
          "--incidents", str(ROOT / "examples/llama7b-128-day6.csv"), "--deadline-days", "20",
          "--replicas", "20", "--workers", "1"], False),
    ]  # fmt: skip
    for i, (command, has_out) in enumerate(commands):
        outputs = []
        for where in ("pipe", "tty"):
            out = ["--out", str(tmp_path / f"{where}{i}")] if has_out else []
            if where == "tty":
                monkeypatch.setattr(
                    console, "stdout_console", lambda: Console(force_terminal=True, width=120)
                )
            r = trainsim(monkeypatch, 120, *command, *out)
            monkeypatch.undo()
            assert r.returncode == 0, (command, r.stderr)
            outputs.append(r.stdout)
        piped, shown = outputs
        assert not ANSI.search(piped), command

        def same(text: str) -> str:
            return re.sub(r"(pipe|tty)\d+\S*", "RUN", ANSI.sub("", text))

        assert same(shown) == same(piped), command


@pytest.mark.parametrize("width", [80, 200])
def test_compare_piped_never_elides_a_cell(monkeypatch, tmp_path, width):
    run_dirs = []
    for name, more in (("a", []), ("b", ["--set", "storage.checkpoint_tier.write_GB_s=5"])):
        r = trainsim(monkeypatch, width, "run", SMALL, "--replicas", "6", *QUICK,
                     "--no-progress", "--out", str(tmp_path / name), *more)  # fmt: skip
        assert r.returncode == 0, r.stderr
        run_dirs.append(str(next((tmp_path / name).glob("*/*"))))
    r = trainsim(monkeypatch, width, "compare", *run_dirs, "--no-figure", "--all")
    assert r.returncode == 0, r.stderr
    assert not re.search(r"\S…", r.stdout), r.stdout  # an interval's … has spaces around
    assert all(len(line.rstrip()) <= width for line in table_lines(r.stdout))
    table = pd.read_parquet(next((tmp_path / "a").glob("*/*/replicas.parquet")))
    for metric in ("time_to_train_days", "checkpoint_stall_hours", "cost_idle_spares_usd"):
        name = answer.metric_name(metric)  # in words, as docs/metrics.md names it
        assert re.search(rf"(^|│ |metric: ){re.escape(name)}( |;)", r.stdout, re.M), name
        assert metric not in r.stdout
    assert "checkpoint_stall_hours" in table
