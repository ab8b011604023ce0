"""`trainsim plan` as a user types it (in-process, outputs in tmp_path): the chosen point
against a brute-force full grid on the same replicas, early drops, plan.json, the Pareto
front, an impossible deadline and bad --vary items."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from sim.cli.commands import main
from sim.decide import plan_outcome, planner, racing
from sim.runs import montecarlo
from tests.conftest import ROOT, flat, main_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
# 16 nodes take 17.7 days without failures: 8 nodes (35.4 days) can never meet 18.5 days,
# and without a spare a failed node's 24-48 h repair makes the deadline a coin flip
# (the batch of 1,024 sequences splits over 64, 128 or 256 GPUs, not over 12 or 20 nodes' GPUs)
VARY = ["--vary", "cluster.nodes=8,16,32", "--vary", "cluster.spare_nodes=0,1,2"]
KEYS = ["cluster.nodes", "cluster.spare_nodes"]
DEADLINE, QUANTILE, FIRST, MOST = 18.5, 0.9, 16, 128
FAST = ["--workers", "1", "--no-progress"]


trainsim = main_in_process


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict:
    """One plan of the small grid, printed as tables; its run directory. (capsys is per
    test: this module-wide run captures its output by hand.)"""
    out = tmp_path_factory.mktemp("plan")
    stdout, stderr = io.StringIO(), io.StringIO()
    args = [
        "plan", SMALL, *VARY, "--deadline-days", str(DEADLINE), "--quantile", str(QUANTILE),
        "--replicas-first", str(FIRST), "--replicas-max", str(MOST), "--out", str(out), *FAST,
    ]  # fmt: skip
    with (
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        pytest.raises(SystemExit) as exit_,
    ):
        main(args)
    assert exit_.value.code == 0, stderr.getvalue()
    (run_dir,) = (out / "llama7b-128").iterdir()
    return {
        "stdout": stdout.getvalue(),
        "run_dir": run_dir,
        "doc": json.loads((run_dir / "plan.json").read_text()),
        "table": pd.read_parquet(run_dir / "replicas.parquet"),
    }


@pytest.fixture(scope="module")
def full_grid() -> pd.DataFrame:
    """The truth: every point of the grid with the most replicas, the same seed."""
    grid = planner.load_plan_grid(SMALL, [v for v in VARY if v != "--vary"])
    return montecarlo.run(grid, MOST, seed=None, workers=1, progress=False)


def test_the_chosen_point_is_the_cheapest_feasible_of_the_full_grid(planned, full_grid):
    samples = racing.samples_of(full_grid, DEADLINE, "cost_usd")
    feasible = {p: s.objective_mean for p, s in samples.items() if s.p_meet >= QUANTILE}
    assert 0 < len(feasible) < len(samples)
    truth = min(feasible, key=feasible.get)
    chosen = planned["doc"]["chosen"]
    assert chosen["point"] == truth and chosen["status"] == "chosen"
    assert chosen["p_meet"] >= QUANTILE and chosen["p_meet_low"] >= QUANTILE
    assert chosen["objective_ci_low"] <= chosen["objective_mean"] <= chosen["objective_ci_high"]
    text = flat(planned["stdout"])
    assert "answer: cluster.nodes=32 cluster.spare_nodes=1 (chosen)" in text
    assert "replicas: the search ran" in text and "results:" in text
    # each candidate's status in plan.json's words (the README's), said once what they mean
    statuses = {c["status"] for c in planned["doc"]["candidates"] if c["replicas"]}
    assert statuses & {"dominated", "infeasible"}
    assert all(f" {status} " in f" {text} " for status in statuses)
    assert "where " in text and "infeasible = misses the deadline" in text


def test_every_evaluated_replica_is_the_full_grids_replica(planned, full_grid):
    # common random numbers: replica r of a point is the same whichever round ran it
    table = planned["table"]
    assert {"point", *KEYS} <= set(table.columns)
    merged = table.merge(full_grid, on=["point", "replica"], suffixes=("", "_truth"))
    assert len(merged) == len(table)
    for column in ("time_to_train_days", "cost_usd", *KEYS):
        pd.testing.assert_series_equal(
            merged[column], merged[f"{column}_truth"], check_names=False, check_dtype=False
        )


def test_clearly_infeasible_points_leave_after_the_first_round(planned):
    doc = planned["doc"]
    chosen = doc["chosen"]
    never = [c for c in doc["candidates"] if c["cluster.nodes"] == 8]  # ideal 35.4 days
    assert len(never) == 3
    for c in never:
        assert c["status"] == "infeasible" and c["dropped_round"] == 1
        assert c["replicas"] == FIRST < chosen["replicas"]
        assert c["p_meet"] == 0 and c["p_meet_high"] < QUANTILE
    assert doc["replicas_spent"] < doc["replicas_full_grid"]


def test_plan_json_has_the_documented_schema(planned):
    doc, table, run_dir = planned["doc"], planned["table"], planned["run_dir"]
    assert {
        "objective", "direction", "deadline_days", "quantile", "chosen", "candidates",
        "pareto", "replicas_spent", "replicas_full_grid",
    } <= set(doc)  # fmt: skip
    assert (doc["objective"], doc["direction"]) == ("cost_usd", "min")
    assert (doc["deadline_days"], doc["quantile"]) == (DEADLINE, QUANTILE)
    assert len(doc["candidates"]) == 9
    fields = {
        "replicas", "objective_mean", "objective_ci_low", "objective_ci_high", "p_meet",
        "p_meet_low", "p_meet_high", "status", "dropped_round", *KEYS,
    }  # fmt: skip
    for c in doc["candidates"]:
        assert fields <= set(c)
        assert c["status"] in plan_outcome.STATUSES
        if c["status"] in ("chosen", "feasible", "unproven"):
            assert c["dropped_round"] is None
        elif c["dropped_round"] is not None:  # left the race, or judged at its end
            assert 1 <= c["dropped_round"] <= len(doc["rounds"])
        assert c["p_meet_low"] <= c["p_meet"] <= c["p_meet_high"]
        rows = table[table["point"] == c["point"]]
        assert len(rows) == c["replicas"] == rows["replica"].max() + 1
        assert (rows[KEYS].iloc[0].tolist()) == [c[k] for k in KEYS]
        met = (rows["finished"] & (rows["time_to_train_days"] <= DEADLINE)).mean()
        assert c["p_meet"] == pytest.approx(met)
        assert c["objective_mean"] == pytest.approx(rows["cost_usd"].mean())
    assert [c["status"] for c in doc["candidates"]].count("chosen") == 1
    assert doc["replicas_spent"] == len(table) == sum(c["replicas"] for c in doc["candidates"])
    assert doc["replicas_full_grid"] == 9 * doc["chosen"]["replicas"]
    assert json.loads(json.dumps(doc)) == doc  # plain JSON: no NaN
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "complete" and manifest["plan"]["deadline_days"] == DEADLINE
    png = run_dir / "figures" / "pareto.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_pareto_front_holds_no_dominated_point(planned):
    doc = planned["doc"]
    front = doc["pareto"]
    assert front

    def beats(a: dict, b: dict) -> bool:
        ta, ca = a["time_to_train_days_at_quantile"], a["cost_usd_mean"]
        tb, cb = b["time_to_train_days_at_quantile"], b["cost_usd_mean"]
        return ta <= tb and ca <= cb and (ta < tb or ca < cb)

    candidates = doc["candidates"]
    for p in front:
        assert not any(beats(c, p) for c in candidates)
    on_front = {p["point"] for p in front}
    for c in candidates:  # and every other point is beaten by one on the front
        if c["point"] not in on_front:
            assert any(beats(p, c) for p in front)
    assert doc["chosen"]["point"] in on_front


def test_an_impossible_deadline_is_said_in_words(capsys, tmp_path):
    args = [
        "plan", SMALL, *VARY, "--deadline-days", "5", "--replicas-first", "8",
        "--replicas-max", "16", "--out", str(tmp_path), *FAST,
    ]  # fmt: skip
    code, out, err = trainsim(capsys, *args, "--json")
    assert code == 0, err
    doc = json.loads(out)  # --json: the plan document and nothing else on stdout
    assert doc["chosen"] is None
    assert all(c["status"] == "infeasible" for c in doc["candidates"])
    assert doc["highest_p_meet"]["p_meet"] == max(c["p_meet"] for c in doc["candidates"])
    closest = doc["closest"]  # the lowest time to train at the quantile
    at = [c["time_to_train_days_at_quantile"] for c in doc["candidates"]]
    assert closest["time_to_train_days_at_quantile"] == min(at)
    code, out, err = trainsim(capsys, *args)
    assert code == 0, err
    text = flat(out)
    assert "no configuration meets the deadline" in text
    assert "The closest, cluster.nodes=" in text and "days" in text
    assert "Even without a failure none can" in text and "more nodes" in text


@pytest.mark.parametrize(
    "vary, named",
    [
        ("cluster.nodez=1,2", "cluster.nodez"),
        ("cluster.nodes=abc,16", "cluster.nodes"),
        ("cluster.nodes", "cluster.nodes"),
        ("cluster.nodes=16,,20", "cluster.nodes"),
        ("failures.9.mtbf_hours=1,2", "failures.9"),
    ],
)
def test_a_bad_vary_is_refused_naming_the_key(capsys, tmp_path, vary, named):
    code, out, err = trainsim(
        capsys, "plan", SMALL, "--vary", vary, "--deadline-days", "20", "--out", str(tmp_path),
        *FAST,
    )  # fmt: skip
    assert code == 2, err
    assert named in err and "Traceback" not in err and err.startswith("error:")
    assert len(err.strip().splitlines()) == 1  # one paragraph
    assert not list(Path(tmp_path).iterdir())  # refused before anything ran or was written


def test_other_bad_options_exit_2(capsys, tmp_path):
    base = ["plan", SMALL, *VARY, "--out", str(tmp_path), *FAST]
    for extra, named in [
        (["--deadline-days", "20", "--objective", "bogus"], "--objective"),
        (["--deadline-days", "0"], "--deadline-days"),
        (["--deadline-days", "20", "--quantile", "1.5"], "--quantile"),
    ]:
        code, _, err = trainsim(capsys, *base, *extra)
        assert code == 2 and named in err, err
    code, _, err = trainsim(capsys, "plan", SMALL, "--deadline-days", "20")
    assert code == 2 and "--vary" in err


def test_a_plan_run_directory_resumes_as_a_plan(capsys, planned, tmp_path):
    """`run --resume` of a plan's directory races its points again (not its whole grid as a
    sweep) and writes the same plan.json; a complete plan is refused (nothing to resume)."""
    code, _, err = trainsim(capsys, "run", "--resume", str(planned["run_dir"]), *FAST)
    assert code == 2 and "complete" in err
    copy = tmp_path / "copy"
    shutil.copytree(planned["run_dir"], copy)
    manifest = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    code, out, err = trainsim(capsys, "run", "--resume", str(copy), *FAST)
    assert code == 0, err
    assert "chosen" in out
    doc = json.loads((copy / "plan.json").read_text())
    assert doc.pop("run_dir") == str(copy)
    assert doc == {k: v for k, v in planned["doc"].items() if k != "run_dir"}
    pd.testing.assert_frame_equal(pd.read_parquet(copy / "replicas.parquet"), planned["table"])


def test_the_library_call_keeps_the_rows_in_memory_without_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = planner.plan(
        SMALL, 5.0, vary=VARY[1::2], replicas_first=4, replicas_max=4, workers=1, progress=False
    )
    assert result.run_dir is None and result.chosen is None
    assert len(result.table) == 9 * 4 == result.doc["replicas_spent"]
    assert not list(tmp_path.iterdir())
