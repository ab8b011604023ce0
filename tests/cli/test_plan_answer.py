"""`trainsim plan`'s answer as a user reads it, piped (COLUMNS 80 and 200; once through a real
pipe into a file): the answer last, every point best first with the points that meet the
deadline before those that miss it, one set of status words (plan.json's, the README's) in
every table, and when nothing meets the deadline the closest point (the lowest time to
train at the quantile), why none makes it and what would, from the calculator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from sim.decide import plan_outcome
from tests.conftest import ROOT, cli_in_process, flat

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
# ideal (calculator, no failure): 8 nodes 35.2 days, 16 nodes 17.7 days, 32 nodes 8.89 days
VARY = ["--vary", "cluster.nodes=8,16,32", "--vary", "cluster.spare_nodes=0,1,2"]
QUICK = ["--replicas-first", "8", "--replicas-max", "32", "--workers", "1", "--no-progress"]
STATUS = re.compile(r"\b(chosen|feasible|unproven|dominated|infeasible)\b")


def plan(monkeypatch, tmp_path, width: int, *args: str) -> tuple[str, dict]:
    monkeypatch.setenv("COLUMNS", str(width))
    out = tmp_path / f"w{width}"
    r = cli_in_process(["plan", SMALL, *VARY, *QUICK, "--out", str(out), *args])
    assert r.returncode == 0, r.stderr
    (doc,) = [json.loads(p.read_text()) for p in out.glob("*/*/plan.json")]
    return r.stdout, doc


def rows_of(text: str, title: str) -> list[tuple[int, int, str]]:
    """(nodes, spare nodes, status) of each point of the table under the line starting
    `title`: a table's rows, or on a narrow screen its plain lines ('- nodes: 32; ...')."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    section = []
    for line in lines[start + 1 :]:
        if line.startswith(("where ", "time-cost", "replicas:", "answer")):
            break
        section.append(line)
    plain = re.findall(
        r"- nodes: (\d+); spare nodes: (\d+);.*?status: (\w+)", flat("\n".join(section))
    )
    if plain:
        return [(int(n), int(s), status) for n, s, status in plain]
    rows = []
    for line in section:
        cells = line.split()
        if cells and cells[0].isdigit():
            rows.append((int(cells[0]), int(cells[1]), STATUS.search(line).group(1)))
    return rows


@pytest.mark.parametrize("width", [80, 200])
def test_the_answer_comes_last_and_the_points_in_order(monkeypatch, tmp_path, width):
    text, doc = plan(monkeypatch, tmp_path, width, "--deadline-days", "18.5", "--quantile", "0.9")
    lines = [line for line in text.splitlines() if line.strip()]
    # the run's path last, whole: after "results: ", or on a line of its own when longer
    assert lines[-1].startswith("results: ") or lines[-2] == "results:"
    answer_at = next(i for i, line in enumerate(lines) if line.startswith("answer: "))
    replicas_at = next(i for i, line in enumerate(lines) if line.startswith("replicas: "))
    assert replicas_at < answer_at  # the accounting, then the answer
    assert "cluster.nodes=32  cluster.spare_nodes=1 (chosen)" in lines[answer_at]
    # every point best first: those that meet the deadline (chosen, the costlier ones) and
    # only then those that miss it, the closest first
    statuses = [c["status"] for c in doc["candidates"]]
    missing = [i for i, s in enumerate(statuses) if s == "infeasible"]
    assert missing and missing == list(range(missing[0], len(statuses)))
    assert statuses.index("dominated") < missing[0]
    at = [doc["candidates"][i]["time_to_train_days_at_quantile"] for i in missing]
    assert at == sorted(at)
    # the printed table follows plan.json, in its words
    assert rows_of(text, "every point") == [
        (c["cluster.nodes"], c["cluster.spare_nodes"], c["status"]) for c in doc["candidates"]
    ]
    assert "may meet" not in text and "meets the deadline;" not in text
    # the front says the same word for the same point
    words = {(c["cluster.nodes"], c["cluster.spare_nodes"]): c["status"] for c in doc["candidates"]}
    front = rows_of(text, "time-cost Pareto front")
    assert front
    for nodes, spares, status in front:
        assert status == words[(nodes, spares)]
    assert "where dominated = costs more than the chosen point" in flat(text)


def test_no_point_in_time_even_without_failures_says_more_nodes(monkeypatch, tmp_path):
    """Through a pipe into a file at 80 columns: the closest point, and that even the ideal
    run (the calculator's 8.89 days at 32 nodes) is past the deadline."""
    log = tmp_path / "plan.txt"
    command = [sys.executable, "-m", "sim", "plan", SMALL, *VARY, *QUICK, "--deadline-days",
               "5", "--out", str(tmp_path / "out")]  # fmt: skip
    with log.open("w") as stdout:
        done = subprocess.run(
            command, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
            env={**os.environ, "COLUMNS": "80"}, cwd=ROOT,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert "\x1b[" not in text
    (path,) = (tmp_path / "out").glob("*/*/plan.json")
    doc = json.loads(path.read_text())
    closest = doc["closest"]
    at = [c["time_to_train_days_at_quantile"] for c in doc["candidates"] if c["replicas"]]
    assert closest["time_to_train_days_at_quantile"] == min(at) and closest["cluster.nodes"] == 32
    last = flat(text.split("answer: ", 1)[1])
    assert last.startswith("no configuration meets the deadline")
    assert (
        f"The closest, cluster.nodes=32 cluster.spare_nodes={closest['cluster.spare_nodes']},"
        in last
    )
    assert "Even without a failure none can" in last and "8.89 days" in last
    assert "more nodes" in last and "later deadline" in last
    end = text.rstrip().splitlines()
    assert end[-1].startswith("results: ") or end[-2] == "results:"  # the path whole


def test_no_point_in_time_for_its_failures_says_so(monkeypatch, tmp_path):
    """The ideal run at 32 nodes fits 8.9 days; checkpoints and failures do not."""
    text, doc = plan(monkeypatch, tmp_path, 80, "--deadline-days", "8.9")
    assert doc["chosen"] is None
    closest = doc["closest"]
    assert closest["ideal_days"] == pytest.approx(8.894, abs=1e-3)
    assert closest["time_to_train_days_at_quantile"] == min(
        c["time_to_train_days_at_quantile"] for c in doc["candidates"] if c["replicas"]
    )
    last = flat(text.split("answer: ", 1)[1])
    assert "Without failures it could" in last and "8.89 days" in last
    assert "spare nodes" in last and "a deadline of" in last


def test_every_candidate_has_its_ideal_days(monkeypatch, tmp_path):
    _, doc = plan(monkeypatch, tmp_path, 200, "--deadline-days", "5")
    ideal = {c["cluster.nodes"]: round(c["ideal_days"], 2) for c in doc["candidates"]}
    assert ideal == {8: 35.25, 16: 17.71, 32: 8.89}
    assert set(plan_outcome.STATUSES) >= {c["status"] for c in doc["candidates"]}
