"""`trainsim forecast`: the conjugate update exactly, the direction a run's own log moves the
forecast, and, with nothing elapsed and no log, exactly `trainsim run` of the same seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from sim.data import forecast as forecasting
from sim.data.logs import log_from_table
from sim.model.scenario import load_scenario
from sim.runs.api import run_scenario
from tests.conftest import cli_in_process
from tests.stats.test_fit import ROUND_TRIP

REPLICAS = 12
SEED = 5


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("forecast") / "round-trip.yaml"
    path.write_text(yaml.safe_dump(ROUND_TRIP, sort_keys=False))
    return path


def test_posterior_exact():
    # prior: 2 per 1k GPU-days worth 5,000 GPU-days -> Gamma(10, 5); 3 failures in 2,000
    # GPU-days -> Gamma(13, 7), mean 13/7
    before = forecasting.prior(2.0, 5000.0)
    assert (before.shape, before.rate, before.mean) == (10.0, 5.0, 2.0)
    after = forecasting.posterior(before, 3, 2000.0)
    assert (after.shape, after.rate) == (13.0, 7.0)
    assert after.mean == pytest.approx(13 / 7, rel=1e-15)
    # Gamma(13, rate 7) quantiles are χ²(26) quantiles over 2·7
    low, high = after.interval()
    assert low == pytest.approx(stats.chi2.ppf(0.025, 26) / 14, rel=1e-9)
    assert high == pytest.approx(stats.chi2.ppf(0.975, 26) / 14, rel=1e-9)


def test_updates_count_each_class_and_the_exposure(scenario):
    loaded = load_scenario(scenario)
    events = pd.DataFrame(
        {"time": [1.0, 2.0, 30.0, 47.0], "node": [0, 3, 3, -1],
         "class": ["gpu", "host", "gpu", "software"]}
    )  # fmt: skip
    log = log_from_table(events, "log", 32, 8, end=48.0)
    classes = forecasting.updates(loaded, log, elapsed_days=2.0, prior_gpu_days=1000.0)
    by_name = {c.name: c for c in classes}
    assert {n: c.events for n, c in by_name.items()} == {"gpu": 2, "host": 1, "software": 1}
    gpu = by_name["gpu"]
    assert gpu.exposure_gpu_days == 32 * 8 * 2.0
    assert gpu.scenario_rate == pytest.approx(20.0)
    assert (gpu.prior.shape, gpu.prior.rate) == pytest.approx((20.0, 1.0))
    assert (gpu.posterior.shape, gpu.posterior.rate) == pytest.approx((22.0, 1.512))


def test_elapsed_zero_without_a_log_is_trainsim_run(scenario):
    run = run_scenario(
        load_scenario(scenario), replicas=REPLICAS, seed=SEED, workers=1, executor="serial",
        progress=False,
    )  # fmt: skip
    result = forecasting.forecast(scenario, 0.0, 0, replicas=REPLICAS, seed=SEED)
    days = result.forecast.table["total_days"].to_numpy()
    assert np.array_equal(days, run.table["time_to_train_days"].to_numpy())
    assert np.array_equal(
        result.forecast.table["cost_to_go_usd"].to_numpy(), run.table["cost_usd"].to_numpy()
    )
    assert result.forecast is result.unconditional  # nothing drawn without a log


def quiet_then_busy_logs(scenario: Path, days: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """No failure in `days`, and twice the failures the scenario expects of each class."""
    loaded = load_scenario(scenario)
    exposure = loaded.base.cluster.gpus * days
    rows = []
    rng = np.random.Generator(np.random.PCG64(0))
    for failure in loaded.base.failures:
        rate = forecasting.scenario_rate_per_1k(loaded.base, failure)
        count = round(2 * rate * exposure / 1000)
        for t in np.sort(rng.uniform(0, days * 24, count)):
            node = -1 if failure.scope == "job" else int(rng.integers(32))
            rows.append((t, node, failure.name))
    busy = pd.DataFrame(rows, columns=["time", "node", "class"])
    return busy.iloc[:0], busy


def test_quiet_run_forecasts_sooner_busy_run_later(scenario, tmp_path):
    days, done = 3.0, 30_000  # of 500,000 steps
    quiet, busy = quiet_then_busy_logs(scenario, days)
    means = {}
    for name, log in (("quiet", quiet), ("busy", busy)):
        path = tmp_path / f"{name}.csv"
        log.to_csv(path, index=False)
        result = forecasting.forecast(
            scenario, days, done, incidents=path, replicas=REPLICAS, seed=SEED,
            prior_gpu_days=500.0,
        )  # fmt: skip
        assert result.total_steps - result.done_steps == 470_000
        means[name] = result.forecast.summary()["remaining_days"]["mean"]
        means["scenario"] = result.unconditional.summary()["remaining_days"]["mean"]
        posterior = {c.name: c.posterior.mean / c.scenario_rate for c in result.classes}
        if name == "quiet":
            assert all(ratio < 0.5 for ratio in posterior.values()), posterior
        else:
            assert all(1.5 < ratio < 2.0 for ratio in posterior.values()), posterior
    print("mean days to go:", means)
    assert means["quiet"] < means["scenario"] < means["busy"]


def test_forecast_json(scenario, tmp_path):
    log = tmp_path / "log.csv"
    pd.DataFrame({"time": [5.0], "node": [2], "class": ["host"]}).to_csv(log, index=False)
    result = cli_in_process(
        ["forecast", str(scenario), "--elapsed-days", "1", "--done-steps", "10000",
         "--incidents", str(log), "--deadline-days", "11", "--replicas", "4", "--json"]
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    for key in ("remaining_days", "total_days"):
        assert set(doc[key]) == {"mean", "p50", "p95"}
        assert set(doc["unconditional"][key]) == {"mean", "p50", "p95"}
    assert doc["total_days"]["mean"] == pytest.approx(doc["remaining_days"]["mean"] + 1)
    assert 0 <= doc["p_deadline"] <= 1
    assert doc["remaining_steps"] == 490_000
    host = next(c for c in doc["classes"] if c["name"] == "host")
    assert host["events"] == 1 and host["exposure_gpu_days"] == 256.0


def test_forecast_refuses_bad_input(scenario, tmp_path):
    result = cli_in_process(
        ["forecast", str(scenario), "--elapsed-days", "1", "--done-steps", "500000"]
    )
    assert result.returncode == 2 and "nothing is left to forecast" in result.stderr
    log = tmp_path / "log.csv"
    pd.DataFrame({"time": [5.0], "node": [2], "class": ["psu"]}).to_csv(log, index=False)
    result = cli_in_process(
        ["forecast", str(scenario), "--elapsed-days", "1", "--done-steps", "0",
         "--incidents", str(log)]
    )  # fmt: skip
    assert result.returncode == 2
    assert "'psu' is not one of the scenario's failure classes" in " ".join(result.stderr.split())
    pd.DataFrame({"time": [30.0], "node": [2], "class": ["host"]}).to_csv(log, index=False)
    result = cli_in_process(
        ["forecast", str(scenario), "--elapsed-days", "1", "--done-steps", "0",
         "--incidents", str(log)]
    )  # fmt: skip
    assert result.returncode == 2 and "outside the window" in result.stderr


def test_forecast_refuses_what_run_would_refuse(scenario):
    """The remaining run goes through `trainsim run`'s feasibility check: a horizon shorter
    than the steps left at full speed, or failures faster than a step, exit 2 naming the key
    (before, every replica ran to the horizon and the forecast said 'unfinished')."""
    for setting, key in (
        ("simulation.horizon_days=0.5", "simulation.horizon_days"),
        ("failures.0.rate_per_1k_gpu_day=1000000", "failures.0.rate_per_1k_gpu_day"),
    ):
        result = cli_in_process(
            ["forecast", str(scenario), "--elapsed-days", "1", "--done-steps", "10000",
             "--replicas", "2", "--set", setting]
        )  # fmt: skip
        assert result.returncode == 2, (setting, result.stdout, result.stderr)
        message = " ".join(result.stderr.split())
        assert key in message and str(scenario) in message and "Traceback" not in message


def test_a_fleet_that_ages_is_forecast_at_its_age(tmp_path):
    """With `cluster.aging` the run's days so far count at the fleet's age then (the power
    law's mean function, by hand here), and the rest of the run starts that much older."""
    doc = ROUND_TRIP | {
        "cluster": ROUND_TRIP["cluster"]
        | {"aging": {"beta": 0.5, "rated_at_days": 400.0, "age_days": 10.0}},
    }
    path = tmp_path / "aging.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    rest, _ = forecasting.remaining_scenario(path, [], 1000, elapsed_days=30.0)
    assert rest.base.cluster.aging.age_days == pytest.approx(40.0)
    gpus = rest.base.cluster.gpus
    log = log_from_table(
        pd.DataFrame({"time": [1.0, 2.0], "node": [0, 1], "class": ["host", "host"]}),
        "run", rest.base.cluster.nodes, rest.base.cluster.gpus_per_node, end=30 * 24.0,
    )  # fmt: skip
    updates = {u.name: u for u in forecasting.updates(rest, log, 30.0, 1000.0)}
    # ∫ from 10 to 40 days of (a/400)^(-1/2) da = 2·√400·(√40 − √10)
    mean_multiplier = 2 * 400**0.5 * (40**0.5 - 10**0.5) / 30
    assert updates["host"].exposure_gpu_days == pytest.approx(gpus * 30 * mean_multiplier)
    # the job-wide class does not age
    assert updates["software"].exposure_gpu_days == pytest.approx(gpus * 30)
