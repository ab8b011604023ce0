"""The answer at the top, as a user reads it (in-process, outputs in tmp_path): the lines
`trainsim run` ends with, their numbers recomputed from replicas.parquet; the best point of
a sweep on time and on cost; the report's headline box before the scenario and its plan
section in words (rendered by headless Chromium); `compare` by default and with --all;
the resume hint and the progress bar's last word."""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.decide import answer
from sim.decide.analysis import paired_difference
from sim.runs.manifest import trainsim_command
from sim.show.console import CONTINUATION
from tests.conftest import ROOT, cli_in_process, flat, running_as

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
QUICK = ["--replicas", "20", "--workers", "1", "--no-progress", "--no-figures"]
INTERVAL = "checkpoint.interval_minutes"
UNITS_H = {"s": 1 / 3600, "min": 1 / 60, "h": 1.0, "days": 24.0}
FIRST = re.compile(
    r"p50 (?P<p50>[\d.]+) days, p95 (?P<p95>[\d.]+) days, mean cost \$(?P<cost>[\d.]+)(?P<scale>[kMB]?), "
    r"goodput (?P<goodput>[\d.]+)%"
)
SECOND = re.compile(
    r"mean (?P<total>[\d.]+) (?P<unit>s|min|h|days) beyond the ideal (?P<ideal>[\d.]+) days: (?P<parts>.*)$"
)
PART = re.compile(r"(?P<value>[\d.]+) (?P<unit>s|min|h|days) (?P<name>lost work|checkpoint stalls|down|slowdown)")  # fmt: skip
COLUMN = {"lost work": "lost_work_hours", "checkpoint stalls": "checkpoint_stall_hours",
          "down": "downtime_hours", "slowdown": "slowdown_hours"}  # fmt: skip
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9}


def trainsim(*args: str) -> subprocess.CompletedProcess:
    return cli_in_process(list(args))


def unwrapped(text: str) -> list[str]:
    """The printed lines with the lines a sentence wrapped onto (console.CONTINUATION
    deeper than the line before) joined back to it."""
    lines: list[str] = []
    first_indent = 0
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if lines and line.strip() and indent >= first_indent + CONTINUATION:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
            first_indent = indent
    return lines


def only_run(out: Path) -> Path:
    (run_dir,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run_dir


def check_point_lines(first: str, second: str, rows: pd.DataFrame) -> None:
    """The two answer lines of one point against that point's replica rows."""
    m = FIRST.search(first)
    assert m, first
    finished = rows.loc[rows["finished"], "time_to_train_days"]
    assert float(m["p50"]) == pytest.approx(np.percentile(finished, 50), abs=0.051)
    assert float(m["p95"]) == pytest.approx(np.percentile(finished, 95), abs=0.051)
    # one decimal of days and three significant digits of money (docs/metrics.md)
    assert m["p50"] == f"{np.percentile(finished, 50):.1f}"
    cost = float(m["cost"]) * SCALE[m["scale"]]
    assert answer.money(rows["cost_usd"].mean()) == f"${m['cost']}{m['scale']}"
    assert cost == pytest.approx(rows["cost_usd"].mean(), rel=0.006)
    assert float(m["goodput"]) == pytest.approx(100 * rows["goodput"].mean(), abs=0.051)

    m = SECOND.search(second)
    assert m, second
    unit = UNITS_H[m["unit"]]
    overhead = (rows["wall_hours"] - rows["ideal_hours"]).mean()
    assert float(m["total"]) * unit == pytest.approx(overhead, abs=0.051 * unit)
    assert float(m["ideal"]) == pytest.approx(rows["ideal_hours"].mean() / 24, abs=0.051)
    parts = {p["name"]: float(p["value"]) for p in PART.finditer(m["parts"])}
    assert {p["unit"] for p in PART.finditer(m["parts"])} == {m["unit"]}  # one unit: they add up
    assert "lost work" in parts and "down" in parts and "checkpoint stalls" in parts
    # the printed parts add up to the printed total exactly, each within rounding of its mean
    assert sum(parts.values()) == pytest.approx(float(m["total"]), abs=1e-9)
    for name, column in COLUMN.items():
        mean = rows[column].mean() / unit
        assert parts.get(name, 0.0) == pytest.approx(mean, abs=0.1 + 1e-9), name
    # the parts are the whole overhead: wall = ideal + the four buckets, replica by replica
    buckets = rows[list(COLUMN.values())].sum(axis=1)
    assert np.allclose(buckets, rows["wall_hours"] - rows["ideal_hours"], rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------- run


def test_a_run_ends_with_the_answer_and_its_numbers_are_the_table(tmp_path):
    r = trainsim("run", SMALL, *QUICK, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = unwrapped(r.stdout.rstrip("\n"))
    assert lines[-1].startswith("results: ")
    start = next(i for i, line in enumerate(lines) if line.startswith("answer: "))
    assert start >= len(lines) - 5  # at the end, after the table
    first, second, legend = lines[start][len("answer: "):], lines[start + 1].strip(), lines[start + 2]  # fmt: skip
    rows = pd.read_parquet(only_run(tmp_path) / "replicas.parquet")
    check_point_lines(first, second, rows)
    assert "lost work = training redone after a failure" in legend
    assert "down = no training" in legend
    # time to train is shown once (in days), not again as wall hours
    assert "time to train (days)" in r.stdout and "wall (hours)" not in r.stdout


def test_a_sweep_says_which_point_is_best_on_time_and_on_cost(tmp_path):
    r = trainsim("run", SMALL, *QUICK, "--param", f"{INTERVAL}=30,60,240", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    rows = pd.read_parquet(only_run(tmp_path) / "replicas.parquet")
    lines = unwrapped(r.stdout)
    start = lines.index("answer (per point: means and percentiles over its replicas):")
    for minutes in (30, 60, 240):
        (i,) = [j for j in range(start, len(lines)) if lines[j].startswith(f"  interval_minutes={minutes}: ")]  # fmt: skip
        first = lines[i].split(": ", 1)[1]
        check_point_lines(first, lines[i + 1].strip(), rows[rows[INTERVAL] == minutes])

    by = rows.groupby(INTERVAL)
    for criterion, column in (("time", "wall_hours"), ("cost", "cost_usd")):
        (line,) = [x for x in lines if x.startswith(f"  best on {criterion}: ")]
        means = by[column].mean().sort_values()
        best, runner = means.index[0], means.index[1]
        assert f"best on {criterion}: interval_minutes={best} (" in line
        assert f"the next, interval_minutes={runner}," in line
        wide = rows.pivot(index="replica", columns=INTERVAL, values=column)
        d = paired_difference(wide[best].to_numpy(), wide[runner].to_numpy())
        if criterion == "time":  # the estimate and its interval in one unit, said once
            estimate, low, high = answer.durations([d.estimate, d.low, d.high])
            assert f"takes {estimate} longer" in line
            ci = f"{low.rpartition(' ')[0]} … {high}"
        else:
            assert f"costs {answer.money(d.estimate)} more" in line
            ci = f"{answer.money(d.low)} … {answer.money(d.high)}"
        assert f"95% CI {ci}" in line
        assert ("within the noise" in line) == (d.low <= 0)

    # the sweep table shows cost and goodput, and marks the same best points
    table = lines[lines.index(next(x for x in lines if x.startswith("sweep: time to train"))):]  # fmt: skip
    cells = {c[0]: c for c in ([s.strip() for s in x.split("│")[1:-1]] for x in table if "│" in x) if c and c[0]}  # fmt: skip
    for minutes, group in by:
        row = cells[str(minutes)]
        assert f"${group['cost_usd'].mean():,.0f}" in row
        assert f"{group['goodput'].mean():.2%}" in row
    marks = {m: cells[str(m)][-1] for m in (30, 60, 240)}
    assert "time" in marks[by["wall_hours"].mean().idxmin()]
    assert "cost" in marks[by["cost_usd"].mean().idxmin()]


# --------------------------------------------------------------------------- compare


def test_compare_shows_the_headline_and_clear_differences_and_all_with_all(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    assert trainsim("run", SMALL, *QUICK, "--seed", "3", "--out", str(a)).returncode == 0
    r = trainsim("run", SMALL, *QUICK, "--seed", "3", "--set", f"{INTERVAL}=30", "--out", str(b))
    assert r.returncode == 0, r.stderr
    run_a, run_b = only_run(a), only_run(b)
    doc = json.loads(trainsim("compare", str(run_a), str(run_b), "--json", "--no-figure").stdout)
    (pair,) = doc["pairs"]
    metrics = pair["metrics"]

    def printed(*more: str) -> dict[str, list[str]]:
        r = trainsim("compare", str(run_a), str(run_b), "--no-figure", *more)
        assert r.returncode == 0, r.stderr
        rows = {}
        names = {answer.metric_name(m): m for m in metrics}  # rows name metrics in words
        assert len(names) == len(metrics)
        for line in r.stdout.splitlines():
            cells = [c.strip() for c in line.split("│")[1:-1]]
            if cells and cells[0]:
                rows[names[cells[0]]] = cells[1:]
        return rows, r.stdout

    default, text = printed()
    # the header names what differs by value, not "A point 0 vs B point 0"
    assert "interval_minutes=60 vs 30" in flat(text) and "A: 60" in text and "B: 30" in text
    assert "point 0 vs" not in text
    clear = {m for m, v in metrics.items() if v["better"] in ("A", "B")}
    headline = {"finished_fraction", "time_to_train_days", "cost_usd", "goodput",
                "lost_work_hours", "checkpoint_stall_hours", "downtime_hours"}  # fmt: skip
    assert set(default) == (headline | clear) - {"wall_hours"}
    assert len(default) < len(metrics)
    assert f"{len(metrics) - len(default)} more metric row(s)" in flat(text)
    for metric in set(default) - headline:  # every other row shown: its CI excludes zero
        low, high = metrics[metric]["ci_low"], metrics[metric]["ci_high"]
        assert low > 0 or high < 0, metric
    # each value in the unit it reads best in: a difference under a day in hours or minutes
    ttt = metrics["time_to_train_days"]
    assert abs(ttt["difference"]) < 1
    cells = default["time_to_train_days"]
    assert cells[0] == f"{ttt['mean_a']:.1f} days"
    assert cells[2] == answer.duration(ttt["difference"] * 24, signed=True)
    assert cells[2].endswith((" h", " min")) and "days" not in cells[2]
    assert default["cost_usd"][0] == answer.money(metrics["cost_usd"]["mean_a"])  # $1.07M

    every, text = printed("--all")
    assert set(every) == set(metrics)  # every column of the table
    assert "more metric row" not in text


# --------------------------------------------------------------------------- report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RAW_KEYS = ("objective_ci_low", "objective_ci_high", "p_meet_low", "p_meet_high",
            "highest_p_meet", "time_to_train_days_at_quantile", "cost_usd_mean",
            "dropped_round", "difference_ci_low", "replicas_full_grid", "stop_reason",
            "varied_keys", "objective_mean", "dominated")  # fmt: skip


def rendered(tmp_path: Path, page: Path) -> str:
    """The page as headless Chromium laid it out: its DOM after load."""
    r = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def section_text(dom: str, name: str) -> str:
    m = re.search(rf'<section id="{name}">(.*?)</section>', dom, re.S)
    assert m, name
    text = " ".join(re.sub(r"<[^>]+>", " ", m.group(1)).split())
    return re.sub(r" ([:.,;])", r"\1", text)  # no space left where a tag closed


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_report_opens_with_the_answer_and_its_plan_reads_as_words(tmp_path):
    out = tmp_path / "plan"
    r = trainsim(
        "plan", SMALL, "--vary", "cluster.spare_nodes=0,1,2", "--deadline-days", "18.5",
        "--quantile", "0.9", "--replicas-first", "16", "--replicas-max", "64",
        "--workers", "1", "--no-progress", "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    run_dir = only_run(out)
    plan = json.loads((run_dir / "plan.json").read_text())
    rows = pd.read_parquet(run_dir / "replicas.parquet")
    page = tmp_path / "report.html"
    assert trainsim("report", str(run_dir), "--out", str(page)).returncode == 0
    dom = rendered(tmp_path, page)
    order = re.findall(r'<section id="([a-z]+)">', dom)
    assert order[:3] == ["answer", "plan", "scenario"], order
    assert 'class="headline"' in dom[: dom.index('<section id="plan">')]

    headline = section_text(dom, "answer")
    chosen = plan["chosen"]
    assert chosen is not None
    assert f"The plan chose spare_nodes={chosen['cluster.spare_nodes']}" in headline
    point = rows[rows["point"] == chosen["point"]]
    assert f"mean cost {answer.money(point['cost_usd'].mean())}" in headline
    p50 = np.percentile(point.loc[point["finished"], "time_to_train_days"], 50)
    assert f"p50 {p50:.1f} days" in headline

    words = section_text(dom, "plan")
    for key in RAW_KEYS:  # written for people: no raw plan.json key as a heading or a word
        assert key not in words, key
    assert "Every point, best first" in words and "Time–cost Pareto front" in words
    assert "chance of finishing within 18.5 days" in words
    front = words[words.index("Time–cost Pareto front") :]
    assert "against the chosen point" in front

    # the scenario: the replicas the run really used, per point, not the 512 asked for
    scenario = section_text(dom, "scenario")
    counts = rows.groupby("point").size()
    low, high = counts.min(), counts.max()
    used = f"{low:,}–{high:,} replicas per point" if low != high else f"{low:,} replicas per point"
    assert used in scenario
    assert "first point" not in scenario
    assert "Swept: cluster.spare_nodes = 0, 1, 2" in scenario
    assert "sweeps 3 points" in scenario and "base scenario" in scenario


def test_a_sweep_report_opens_with_the_answer_then_the_sweep(tmp_path):
    out = tmp_path / "s"
    r = trainsim("run", SMALL, *QUICK, "--param", f"{INTERVAL}=30,60", "--out", str(out))
    assert r.returncode == 0, r.stderr
    run_dir = only_run(out)
    assert trainsim("report", str(run_dir)).returncode == 0
    text = (run_dir / "report.html").read_text()
    order = re.findall(r'<section id="([a-z]+)">', text)
    assert order[:3] == ["answer", "sweep", "scenario"]
    headline = section_text(text, "answer")
    assert "interval_minutes=30: p50" in headline and "Best on time:" in headline
    assert "Best on cost:" in headline
    # the same words as the CLI's answer (one function writes both)
    cli = [x.strip() for x in r.stdout.splitlines() if x.startswith("  best on ")]
    for line in cli:
        assert line[:1].upper() + line[1:] in headline
    assert "wall (hours)" not in text


# --------------------------------------------------------------------------- hints


def test_the_resume_hint_runs_as_printed(monkeypatch, tmp_path):
    exe = running_as(monkeypatch, tmp_path / "bin")  # not on PATH: the full path
    assert trainsim_command() == shlex.quote(str(exe))
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")  # on PATH: its name
    assert trainsim_command() == "trainsim"
    monkeypatch.setattr(sys, "argv", ["-c"])  # in-process (a notebook): the venv's script
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    program = trainsim_command()
    sibling = Path(sys.executable).parent / "trainsim"
    assert program in (shlex.quote(str(sibling)), f"{shlex.quote(sys.executable)} -m sim")
    # and that command runs as printed, from anywhere
    r = subprocess.run([*shlex.split(program), "--version"], capture_output=True, text=True,
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=120)  # fmt: skip
    assert r.returncode == 0 and "trainsim" in r.stdout, r.stderr


def test_the_progress_bar_ends_on_the_time_it_took(monkeypatch):
    from rich.console import Console

    from sim.runs import progress
    from sim.runs.progress import ReplicaBar

    # in a terminal (off one, plain lines: tests/cli/test_output_alike.py)
    monkeypatch.setattr(
        progress, "stderr_console", lambda: Console(stderr=True, force_terminal=True)
    )
    bar = ReplicaBar(True, 10, "x")
    advance = bar.__enter__()
    try:
        column = bar._progress.columns[-1]
        task = bar._progress.tasks[0]
        advance(4)
        assert column.render(task).plain.endswith(" left")
        advance(6)
        text = column.render(task).plain
        assert text.startswith("done in ") and "0:00:00" not in text, text
        assert math.isfinite(float(text.removeprefix("done in ").removesuffix(" s")))
    finally:
        bar.__exit__(None, None, None)


def test_a_point_cut_short_by_the_horizon_is_not_the_cheapest(tmp_path):
    """16 nodes cannot finish within 12 days (17.6 ideal): its replicas stop at the horizon,
    cheaper than any finished run; the best on cost is the point that finishes (32 nodes:
    8.8 ideal days, 3 days to spare for failures)."""
    r = trainsim(
        "run", SMALL, "--replicas", "6", "--workers", "1", "--no-progress", "--no-figures",
        "--set", "simulation.horizon_days=12", "--param", "cluster.nodes=16,32",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = pd.read_parquet(only_run(tmp_path) / "replicas.parquet")
    by = rows.groupby("cluster.nodes")
    assert by["cost_usd"].mean()[16] < by["cost_usd"].mean()[32]  # cut short: cheaper
    assert not rows.loc[rows["cluster.nodes"] == 16, "finished"].any()
    text = r.stdout
    assert "nodes=16: no replica finished within the 12-day horizon" in text
    assert "best on cost: nodes=32 (" in text and "best on time: nodes=32 (" in text
    assert "the only point where every replica finished" in text
