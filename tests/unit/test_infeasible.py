"""Sweep points that cannot run (`Point.infeasible`): never built nor simulated, rows marked
infeasible with their reason in every summary, never chosen by optimize or plan, skipped by
the figures; a sweep none of whose points can run is refused.

The loader decides which points are infeasible; here a wrapper around it marks the points
with cluster.nodes=3 (dataclasses.replace on the loaded point), so these tests do not
depend on which configurations the performance model refuses.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest
import yaml

from sim.decide import analysis, plan_outcome, planner
from sim.model import feasibility, perf, scenario
from sim.model.scenario_set import ScenarioError
from sim.runs import api, montecarlo, summaries
from sim.runs.results import RunDir
from sim.show import plan_plots, plots
from sim.show.run_figures import write_run_figures
from tests.conftest import TINY, merge

REASON = "parallelism.pipeline: 3 nodes cannot hold the pipeline's stages (a test's reason)"
NODES = "cluster.nodes"
DOC = merge(
    TINY,
    {
        "failures": [{"name": "node", "scope": "node", "mtbf_hours": 1.0, "repair_hours": 0.5}],
        "cluster": {"spare_nodes": 1},
        "sweep": {NODES: [2, 3, 4]},
    },
)


def refuse(monkeypatch, values=(3,), key=NODES, reason=REASON) -> None:
    """Make the loader mark the points whose `key` is one of `values` infeasible."""
    real = scenario.load_document

    def load(*args, **kwargs):
        loaded = real(*args, **kwargs)
        points = [
            dataclasses.replace(p, infeasible=reason) if p.params.get(key) in values else p
            for p in loaded.points
        ]
        return dataclasses.replace(loaded, points=points)

    monkeypatch.setattr(scenario, "load_document", load)


@pytest.fixture
def loaded(monkeypatch):
    refuse(monkeypatch)
    return scenario.load_document(DOC)


@pytest.fixture
def path(tmp_path, monkeypatch):
    refuse(monkeypatch)
    file = tmp_path / "tiny.yaml"
    file.write_text(yaml.safe_dump(DOC))
    return file


def test_an_infeasible_point_is_neither_built_nor_simulated(loaded, monkeypatch):
    built = []
    real = montecarlo.build_plan

    def build(s):
        assert s.cluster.nodes != 3, "build_plan was called for the infeasible point"
        built.append(s.cluster.nodes)
        return real(s)

    monkeypatch.setattr(montecarlo, "build_plan", build)
    assert [p.index for p in loaded.feasible] == [0, 2]
    assert not [c for c in montecarlo.chunks(loaded, 4, 1, 2) if c.point == 1]
    table = montecarlo.run(loaded, replicas=4, workers=1, progress=False)
    assert sorted(table["point"].unique()) == [0, 2] and len(table) == 8
    assert sorted(set(built)) == [2, 4]
    # a slice of infeasible points only has nothing to run
    assert len(montecarlo.run(loaded, 4, workers=1, progress=False, points=range(1, 2))) == 0


def test_the_summaries_list_the_point_with_its_reason_and_no_metric(loaded):
    outcome = api.run_scenario(loaded, replicas=4, workers=1, progress=False)
    points = outcome.summary_doc["points"]
    assert [p["point"] for p in points] == [0, 1, 2]
    assert points[1] == {
        "point": 1, "params": {NODES: 3}, "infeasible": REASON,
        "replicas": 0, "finished": 0, "errors": 0, "metrics": {},
    }  # fmt: skip
    assert points[0]["infeasible"] is None and points[2]["infeasible"] is None
    assert points[0]["metrics"]["time_to_train_days"]["mean"] > 0
    summary = outcome.summary
    row = summary[summary["point"] == 1]
    assert len(row) == 1
    assert row["infeasible"].iloc[0] == REASON and row[NODES].iloc[0] == 3
    assert pd.isna(row["metric"].iloc[0]) and row["n"].iloc[0] == 0
    assert row[summaries.STATISTICS].isna().all(axis=None)
    rest = summary[summary["point"] != 1]
    assert (rest["infeasible"] == "").all() and rest["metric"].notna().all()
    assert list(summary["point"]) == sorted(summary["point"])  # point order kept


def test_a_run_directory_writes_the_row_and_draws_around_it(path, tmp_path):
    outcome = api.run_scenario(
        path, replicas=4, workers=1, progress=False, out=tmp_path / "out", figures=write_run_figures
    )
    run_dir = outcome.run_dir
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    assert 1 not in set(pd.read_parquet(run_dir / "replicas.parquet")["point"])
    csv = pd.read_csv(run_dir / "summary.csv")
    assert "infeasible" in csv.columns
    (row,) = csv[csv["point"] == 1].to_dict(orient="records")
    assert row["infeasible"] == REASON and row[NODES] == 3 and row["n"] == 0
    assert pd.isna(row["metric"]) and pd.isna(row["mean"])
    assert csv[csv["point"] != 1]["infeasible"].isna().all()  # empty cells
    doc = json.loads((run_dir / "summary.json").read_text())
    assert [p["infeasible"] for p in doc["points"]] == [None, REASON, None]
    assert doc["points"][1]["metrics"] == {} and doc["points"][1]["replicas"] == 0
    assert (run_dir / "figures" / "sweep_time_to_train_days.png").is_file()


def test_slices_and_merge_keep_the_infeasible_point(path, tmp_path):
    def run(i: int) -> api.RunOutcome:
        return api.run_scenario(path, replicas=3, workers=1, progress=False, out=tmp_path / "s",
                                points=range(i, i + 1), figures=None)  # fmt: skip

    slices = [run(i) for i in range(3)]
    only = slices[1]  # a slice whose one point is infeasible: complete, an empty table
    assert json.loads((only.run_dir / "run.json").read_text())["status"] == "complete"
    assert len(pd.read_parquet(only.run_dir / "replicas.parquet")) == 0
    assert [p["infeasible"] for p in only.summary_doc["points"]] == [REASON]
    assert [p["point"] for p in slices[0].summary_doc["points"]] == [0]
    merged = api.merge_runs([s.run_dir for s in slices], tmp_path / "m", figures=None)
    manifest = json.loads((merged.run_dir / "run.json").read_text())
    assert manifest["status"] == "complete" and "missing_points" not in manifest
    assert [p["infeasible"] for p in merged.summary_doc["points"]] == [None, REASON, None]
    whole = api.run_scenario(path, replicas=3, workers=1, progress=False, out=tmp_path / "w",
                             figures=None)  # fmt: skip
    pd.testing.assert_frame_equal(
        pd.read_parquet(merged.run_dir / "replicas.parquet"),
        pd.read_parquet(whole.run_dir / "replicas.parquet"),
    )


def test_target_ci_and_resume_leave_the_infeasible_point_out(path, tmp_path):
    adaptive = api.run_scenario(path, replicas=60, workers=1, progress=False, out=tmp_path,
                                target_ci=0.5, figures=None)  # fmt: skip
    manifest = json.loads((adaptive.run_dir / "run.json").read_text())
    assert set(manifest["adaptive"]) == {"0", "2"}
    assert [p["infeasible"] for p in adaptive.summary_doc["points"]] == [None, REASON, None]
    # a run killed before its first chunk: resume runs the feasible points only
    loaded = scenario.load_scenario(path)
    run = RunDir.create(tmp_path / "r", loaded, 1, 3, "serial", 1)
    run.set_status("interrupted")
    resumed = api.resume_run(run.path, progress=False, figures=None)
    assert sorted(resumed.table["point"].unique()) == [0, 2]
    assert [p["infeasible"] for p in resumed.summary_doc["points"]] == [None, REASON, None]


def test_the_checks_skip_infeasible_points_and_refuse_a_sweep_of_none(loaded, monkeypatch):
    real = perf.step_time_s

    def step(s):
        assert s.cluster.nodes != 3, "the model was asked about the infeasible point"
        return real(s)

    monkeypatch.setattr(perf, "step_time_s", step)
    assert feasibility.check(loaded) == []
    nothing = dataclasses.replace(
        loaded, points=[dataclasses.replace(p, infeasible=f"k: {p.index}") for p in loaded.points]
    )
    with pytest.raises(ScenarioError, match="every sweep point is infeasible") as error:
        feasibility.check(nothing)
    message = str(error.value)
    assert "cluster.nodes=2: k: 0" in message and "cluster.nodes=4: k: 2" in message
    with pytest.raises(ScenarioError, match="every sweep point is infeasible"):
        api.run_scenario(nothing, replicas=2, workers=1, progress=False)


def test_optimize_lists_an_infeasible_value_last_and_never_chooses_it(loaded):
    table = montecarlo.run(loaded, replicas=6, workers=1, progress=False)
    best = analysis.optimize(table, NODES, "cost_usd", infeasible={3: REASON})
    assert best.best in (2, 4) and 3 not in best.tied and best.runner_up != 3
    last = best.points.iloc[-1]
    assert last[NODES] == 3 and last["verdict"] == "infeasible" and last["infeasible"] == REASON
    assert math.isnan(last["mean"])
    assert best.points["infeasible"].iloc[:-1].isna().all()


def test_a_plan_never_races_an_infeasible_point(loaded):
    result = planner.plan(loaded, 1.0, 0.9, "cost_usd", replicas_first=4, replicas_max=8,
                          workers=1, progress=False)  # fmt: skip
    assert 1 not in set(result.table["point"])
    doc = result.doc
    (cannot,) = [c for c in doc["candidates"] if c["point"] == 1]
    assert cannot["status"] == "infeasible" and cannot["reason"] == REASON
    assert cannot["replicas"] == 0 and cannot["p_meet"] is None and cannot[NODES] == 3
    assert cannot["dropped_round"] is None and doc["candidates"][-1] is cannot
    assert doc["chosen"] is not None and doc["chosen"]["point"] != 1
    assert doc["highest_p_meet"]["point"] != 1
    assert all(p["point"] != 1 for p in doc["pareto"])
    assert all(c["reason"] is None for c in doc["candidates"] if c["status"] != "infeasible")
    assert doc["replicas_full_grid"] == 2 * doc["chosen"]["replicas"]
    assert json.loads(json.dumps(doc)) == doc  # plain JSON
    plan_plots.pareto_figure(doc)  # draws the points that ran, says why the other is missing


def test_a_plan_that_misses_the_deadline_says_so_apart_from_the_infeasible(loaded):
    doc = planner.plan(loaded, 1e-4, 0.9, "cost_usd", replicas_first=4, replicas_max=4,
                       workers=1, progress=False).doc  # fmt: skip
    reasons = {c["point"]: c["reason"] for c in doc["candidates"]}
    assert reasons == {0: plan_outcome.MISSES_DEADLINE, 1: REASON, 2: plan_outcome.MISSES_DEADLINE}
    assert doc["chosen"] is None and doc["highest_p_meet"]["point"] in (0, 2)


def test_a_plan_of_only_infeasible_points_is_refused(loaded, tmp_path):
    nothing = dataclasses.replace(
        loaded, points=[dataclasses.replace(p, infeasible=REASON) for p in loaded.points]
    )
    with pytest.raises(ScenarioError, match="every sweep point is infeasible"):
        planner.plan(nothing, 1.0, workers=1, progress=False, out=tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_heatmap_says_infeasible_and_the_curve_names_what_it_left_out(loaded):
    table = montecarlo.run(loaded, replicas=4, workers=1, progress=False)
    summary = summaries.with_infeasible(summaries.summarize(table, [NODES]), loaded)
    curve = plots.sweep_curve(summary, NODES, "time_to_train_days")
    (line,) = [x for x in curve.axes[0].get_lines() if x.get_label() == "mean"]
    assert list(line.get_xdata()) == [2, 4]
    (note,) = [t for t in curve.axes[0].texts if t.get_gid() == "infeasible"]
    assert "nodes=3" in note.get_text()
    two = [NODES, "cluster.spare_nodes"]
    summary[two[1]] = 1
    heat = plots.sweep_heatmap(summary, two, "time_to_train_days")
    cells = [t.get_text() for t in heat.axes[0].texts if t.get_gid() == "cell"]
    assert len(cells) == 3 and cells[1] == "infeasible"
    assert [t.get_text() for t in heat.axes[0].get_xticklabels()] == ["2", "3", "4"]
