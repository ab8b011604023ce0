"""The library's public functions check their arguments as the command line's options do:
a wrong type or value raises the library's own error (ArgumentError: a ScenarioError and a
ValueError) naming the function and the argument, before anything is written or simulated;
never an AttributeError, KeyError or IndexError from inside, nor nonsense accepted."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sim.decide import analysis, planner
from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError
from sim.runs import api, montecarlo
from sim.runs.arguments import ArgumentError
from tests.conftest import TINY


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def refused(call, argument: str, function: str):
    """`call()` raises ArgumentError naming `function: argument:`; its message."""
    with pytest.raises(ArgumentError) as raised:
        call()
    assert isinstance(raised.value, ScenarioError) and isinstance(raised.value, ValueError)
    assert str(raised.value).startswith(f"{function}: {argument}: "), str(raised.value)
    return str(raised.value)


@pytest.mark.parametrize(
    ("argument", "value", "words"),
    [
        ("scenario", None, "expected a scenario file's path"),
        ("scenario", 42, "expected a scenario file's path"),
        ("replicas", True, "whole number from 1"),
        ("replicas", 0, "whole number from 1"),
        ("replicas", 2.5, "not 2.5 (float)"),
        ("seed", "7", "not '7' (str)"),
        ("seed", 1.0, "not 1.0 (float)"),
        ("seed", -1, "whole number from 0"),
        ("workers", 0, "whole number from 1"),
        ("executor", "threads", "one of serial, processes, dask"),
        ("points", [0, 1], "expected a range of sweep points"),
        ("points", range(1, 1), "0 <= I < J"),
        ("target_ci", -0.1, "more than 0 and at most 1"),
        ("target_ci", math.nan, "nan is not a finite number"),
        ("overrides", "checkpoint.interval_steps=500", "expected a list of strings"),
        ("out", 3, "expected a path"),
    ],
)
def test_run_scenario_refuses_a_bad_argument_before_anything_is_written(
    tiny, tmp_path, argument, value, words
):
    given = {"scenario": tiny, "out": tmp_path / "out", "progress": False, argument: value}
    assert words in refused(lambda: api.run_scenario(**given), argument, "run_scenario")
    assert not (tmp_path / "out").exists()


def test_resume_and_merge_refuse_what_is_not_a_path(tmp_path):
    refused(lambda: api.resume_run(None), "run_dir", "resume_run")
    refused(lambda: api.resume_run(tmp_path, workers=-2), "workers", "resume_run")
    message = refused(lambda: api.merge_runs(str(tmp_path), tmp_path), "run_dirs", "merge_runs")
    assert "expected a list of run directories" in message


def test_the_monte_carlo_refuses_bad_counts():
    tiny = load_document(TINY)
    refused(lambda: montecarlo.run(tiny, replicas=True, progress=False), "replicas", "run")
    refused(lambda: montecarlo.run(tiny, 2, seed=-5, progress=False), "seed", "run")
    refused(lambda: montecarlo.run(str(TINY), 2, progress=False), "scenario_set", "run")


def test_optimize_names_an_unknown_metric_and_a_key_the_table_lacks():
    table = pd.DataFrame(
        {"checkpoint.interval_steps": [1, 2], "replica": [0, 0], "time_to_train_days": [1.0, 2.0]}
    )
    key = "checkpoint.interval_steps"
    message = refused(lambda: analysis.optimize(table, key, "speed"), "metric", "optimize")
    assert "unknown metric 'speed'; one of time_to_train_days" in message
    refused(lambda: analysis.optimize(table, "cluster.nodes"), "key", "optimize")
    refused(lambda: analysis.optimize(None, key), "table", "optimize")


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("deadline_days", -1.0),
        ("deadline_days", math.inf),
        ("deadline_days", math.nan),
        ("deadline_days", "16"),
        ("seed", "1"),
        ("seed", 2.5),
        ("seed", -3),
        ("replicas_max", True),
        ("vary", "cluster.nodes=64,128"),
        ("scenario", None),
    ],
)
def test_plan_refuses_a_bad_argument(tiny, argument, value):
    given = {"scenario": tiny, "deadline_days": 30.0, "progress": False, argument: value}
    refused(lambda: planner.plan(**given), argument, "plan")


# The functions below live in modules another change owns (sim/model, sim/data): these tests
# hold them to the same rule and pass once those modules check their arguments.
ELSEWHERE = pytest.mark.xfail(
    strict=True, reason="argument checks of sim/model/calculator.py and sim/data/ to come"
)


@pytest.mark.parametrize("scenario", [None, "scenarios/llama7b-128.yaml", "a ScenarioSet"])
def test_calculate_names_what_it_was_given(scenario):
    from sim.model import calculator

    if scenario == "a ScenarioSet":
        scenario = load_document(TINY)
    with pytest.raises(ScenarioError, match=r"^calculate: scenario: expected a Scenario"):
        calculator.calculate(scenario)


def test_fit_log_names_what_it_was_given():
    from sim.data import fit

    with pytest.raises(ScenarioError, match=r"^fit_log: log: expected an IncidentLog"):
        fit.fit_log(None)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("replicas", 0),
        ("replicas", True),
        ("elapsed_days", math.inf),
        ("elapsed_days", math.nan),
        ("done_steps", -10),
        ("deadline_days", -3.0),
        ("seed", "1"),
        ("seed", 1.5),
        ("seed", -1),
    ],
)
def test_forecast_refuses_a_bad_argument(tiny, argument, value):
    from sim.data import forecast

    given = {"elapsed_days": 0.001, "done_steps": 10, "replicas": 2, "seed": 1, argument: value}
    with pytest.raises(ScenarioError, match=rf"^forecast: {argument}: "):
        forecast.forecast(tiny, **given)


@pytest.mark.parametrize("nodes", [0, -4, 2.5])
def test_read_log_refuses_a_count_of_nodes_that_is_not_one(tmp_path, nodes):
    from sim.data import logs

    with pytest.raises(ScenarioError, match=r"^read_log: nodes: expected a whole number from 1"):
        logs.read_log(tmp_path / "log.csv", nodes=nodes)
