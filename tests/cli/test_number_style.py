"""One number style in every command (in-process, outputs in tmp_path), read as a pipe
gives it at 80 and 200 columns: every line fits the width (a path alone on its line may
not, and is never broken mid-name); money with three significant digits, a duration in one
unit with its interval, shares as percentages, counts with thousands separators, no
exponent, metrics named in words (docs/metrics.md, "Numbers as the commands print them")."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from sim.decide import answer
from sim.show import console
from tests.conftest import ROOT, cli_in_process

SEVENTY = str(ROOT / "scenarios/llama70b-1k.yaml")
SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
QUICK = ["--workers", "1", "--no-figures", "--no-progress"]
SWEEP = ["run", SEVENTY, "--replicas", "12", *QUICK,
         "--param", "checkpoint.interval_steps=250,500,1000,2000"]  # fmt: skip
WIDTHS = [80, 200]
# a number written with an exponent (1.58e-227), anywhere
EXPONENT = re.compile(r"\d(\.\d+)?e[-+]\d")
# money with more than three significant digits, outside an interval that needs them
LONG_MONEY = re.compile(r"\$\d\.\d{3,}[kMB]|\$\d{2}\.\d{2,}[kMB]|\$\d{3}\.\d+[kMB]")


def trainsim(monkeypatch, width: int, *args: str):
    monkeypatch.setenv("COLUMNS", str(width))
    r = cli_in_process(list(args))
    assert r.returncode == 0, (args, r.stderr)
    return r


def assert_fits(text: str, width: int) -> None:
    """Every line within `width`, but a path alone on its line (one word, never broken)."""
    for line in text.splitlines():
        line = line.rstrip()
        if len(line) > width:
            assert len(line.split()) == 1, f"{len(line)} > {width}: {line!r}"


def joined(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_a_sweeps_answer_fits_the_width_and_its_path_stays_whole(monkeypatch, tmp_path, width):
    out = tmp_path / "a-directory-with-a-rather-long-name-to-push-the-path-past-eighty"
    r = trainsim(monkeypatch, width, *SWEEP, "--out", str(out))
    assert_fits(r.stdout, width)
    (run_dir,) = out.glob("*/*")
    # the path whole on one line, never broken mid-name
    lines = [line.strip() for line in r.stdout.splitlines()]
    assert str(run_dir) in lines or f"results: {run_dir}" in lines
    # wrapped lines are indented deeper than the answer's own two-space steps
    text = r.stdout[r.stdout.index("answer (per point") :]
    assert "  interval_steps=250: p50 " in text and "best on cost: " in joined(text)


def test_a_sweeps_answer_reads_days_and_money_as_metrics_md_says(monkeypatch, tmp_path):
    r = trainsim(monkeypatch, 200, *SWEEP, "--out", str(tmp_path))
    text = joined(r.stdout[r.stdout.index("answer (per point") :])
    assert not LONG_MONEY.search(text), text  # $1.07M, never $1.067M
    for p50, p95 in re.findall(r"p50 ([\d.]+) days, p95 ([\d.]+) days", text):
        assert re.fullmatch(r"\d+\.\d", p50) and re.fullmatch(r"\d+\.\d", p95), text
    assert re.search(r"mean cost \$\d\.\d\dM", text)
    # the next best's difference and its interval in one unit, said once
    time = re.search(r"takes ([\d.]+) (\w+) longer \(95% CI ([-\d.]+) … ([-\d.]+) (\w+)", text)
    assert time and time[2] == time[5], text


@pytest.mark.parametrize("width", WIDTHS)
def test_calc_reads_mfu_as_a_percentage_and_costs_as_money(monkeypatch, width):
    r = trainsim(monkeypatch, width, "calc", SEVENTY)
    assert_fits(r.stdout, width)
    text = joined(r.stdout.replace("│", " "))
    assert re.search(r"\bMFU 45\.0%", text), text  # as `run` reads effective MFU: 44.2%
    assert "0.450" not in text and "MFU 0.45 " not in text
    assert "cost (ideal) $1.05M at $2.50/GPU-hour" in text
    assert re.search(r"ideal time to train 16\.1 days", text)
    assert not re.search(r"\$\d{1,3},\d{3}", text), text  # not $1,049,189


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_reads_p_meet_as_a_percentage(monkeypatch, tmp_path, width):
    r = trainsim(monkeypatch, width, "plan", SEVENTY, "--vary", "cluster.nodes=64,128",
                 "--vary", "cluster.spare_nodes=0,4", "--deadline-days", "40",
                 "--replicas-first", "8", "--replicas-max", "16", "--workers", "1",
                 "--no-progress", "--out", str(tmp_path))  # fmt: skip
    assert_fits(r.stdout, width)
    text = joined(r.stdout)
    assert "≥ 95%" in text and "≥ 0.95" not in text
    assert not re.search(r"\b[01]\.\d{3}\b", text), text  # P(meet) 1.000 [0.943, 1.000]
    assert re.search(r"\d+% \[\d+(\.\d)?%, \d+(\.\d)?%\]", text), text
    assert not LONG_MONEY.search(re.sub(r"\$[\d.]+[kMB]? ± .*?(;|│|$)", "", text)), text


@pytest.mark.parametrize("width", WIDTHS)
def test_optimize_gives_a_value_and_its_interval_in_one_unit(monkeypatch, tmp_path, width):
    r = trainsim(monkeypatch, width, "optimize", SEVENTY, "--param",
                 "checkpoint.interval_minutes=15,30,60", "--replicas", "12", "--workers", "1",
                 "--no-progress", "--out", str(tmp_path))  # fmt: skip
    assert_fits(r.stdout, width)
    text = joined(r.stdout.replace("│", " "))
    pairs = re.findall(r"([-+\d.]+) (s|min|h|days) \((?:paired 95% CI )?[-+\d.]+ … "
                       r"[-+\d.]+ (s|min|h|days)", text)  # fmt: skip
    assert pairs, text
    assert all(unit == ci_unit for _, unit, ci_unit in pairs), pairs  # not 0.10 h (3.5 … 9.0 min)
    sentence = text[text.index("best checkpoint.interval_minutes") :]
    low, high = re.search(r"95% CI ([\d.]+) … ([\d.]+) days", sentence).groups()
    assert low != high  # the interval's ends read apart


@pytest.mark.parametrize("width", WIDTHS)
def test_forecast_heads_counts_as_counts_and_writes_no_exponent(monkeypatch, width):
    r = trainsim(monkeypatch, width, "forecast", SMALL, "--elapsed-days", "6", "--done-steps",
                 "150000", "--incidents", str(ROOT / "examples/llama7b-128-day6.csv"),
                 "--deadline-days", "20", "--replicas", "20", "--workers", "1")  # fmt: skip
    assert_fits(r.stdout, width)
    assert not EXPONENT.search(r.stdout), r.stdout  # 95% low 1.58e-227
    text = joined(r.stdout)
    assert "< 0.001" in text
    assert "failure rates per" not in text  # a table of counts and rates, each said so
    assert "counts in the 6 days so far" in text and "seen (count)" in text
    assert re.search(r"total days mean\W+[\d.]+ days", text.replace("│", " "))
    assert re.search(r"P\(done by day 20\)\W+\d+(\.\d)?%", text.replace("│", " "))


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_names_metrics_in_words(monkeypatch, tmp_path, width):
    run_dirs = []
    for name, more in (("a", []), ("b", ["--set", "checkpoint.interval_steps=500"])):
        trainsim(monkeypatch, width, "run", SEVENTY, "--replicas", "6", *QUICK,
                 "--out", str(tmp_path / name), *more)  # fmt: skip
        run_dirs.append(str(next((tmp_path / name).glob("*/*"))))
    r = trainsim(monkeypatch, width, "compare", *run_dirs, "--no-figure", "--all")
    assert_fits(r.stdout, width)
    for column in ("time_to_train_days", "cost_usd", "lost_work_hours", "finished_fraction",
                   "effective_mfu", "cost_idle_spares_usd"):  # fmt: skip
        assert column not in r.stdout, column
    text = joined(r.stdout.replace("│", " "))
    for name in ("time to train", "lost work", "effective MFU", "cost: idle spares"):
        assert name in text, name
    assert not LONG_MONEY.search(text), text


def test_counts_read_with_thousands_separators(monkeypatch, tmp_path):
    r = trainsim(monkeypatch, 120, "run", SMALL, "--replicas", "1000", *QUICK,
                 "--out", str(tmp_path))  # fmt: skip
    assert "1,000 replicas, 1,000 finished" in r.stdout
    assert "1000 replicas" not in r.stdout


def test_the_sweep_prints_alike_in_a_terminal_and_a_pipe_at_80(monkeypatch, tmp_path):
    """The README's sweep with its wrapped answer: the same text on a terminal of 80
    columns as in a pipe with COLUMNS=80, apart from colours."""
    outputs = []
    for where in ("pipe", "term"):  # paths alike in length: they wrap alike
        if where == "term":
            monkeypatch.setattr(
                console, "stdout_console", lambda: Console(force_terminal=True, width=80)
            )
        r = trainsim(monkeypatch, 80, *SWEEP, "--out", str(tmp_path / where))
        monkeypatch.undo()
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.stdout).replace(where, "W")
        outputs.append(re.sub(r"\d{8}T\d{6}Z-seed\d+-[0-9a-f]+", "RUN-ID", text))
    assert outputs[0] == outputs[1]


def test_the_formatter():
    assert answer.money(1_067_285) == "$1.07M" and answer.money(749.42) == "$749"
    assert answer.duration(16.341 * 24) == "16.3 days"
    assert answer.duration(7.23) == "7.2 h" and answer.duration(35 / 60) == "35 min"
    assert answer.duration(215 * 24) == "215 days"
    assert answer.readable_estimate("wall_hours", 0.1, 3.5 / 60, 9 / 60) == (
        "6.0 min (3.5 … 9.0 min)"
    )
    assert answer.readable_interval("cost_usd", 1_065_400, 1_066_300, signed=False) == (
        "$1.065M … $1.066M"  # not $1.07M … $1.07M
    )
    assert answer.number(1.58e-227) == "< 0.001" and answer.number(0.00425) == "0.00425"
    assert answer.number(1_234.5) == "1,234" and answer.number(2.4567) == "2.46"
    assert answer.share(1.0) == "100%" and answer.share(0.943) == "94%"
    assert answer.share(0.996) == "99.6%"
    assert answer.readable("effective_mfu", 0.4418) == "44.2%"
    assert answer.metric_name("time_to_train_days") == "time to train"
    assert answer.metric_name("cost_lost_work_usd") == "cost: lost work"
    assert answer.metric_name("detect_hours") == "downtime: detect"
    wrapped = console.wrapped("results: /a/very/long/path/" + "x" * 90, 80)
    assert wrapped == ["results:", "    /a/very/long/path/" + "x" * 90]
