"""Holes an adversarial pass found in arguments and values (issue 18, section 5), each
refused as bad input: exit 2, a message naming the option or key path, no traceback, and
nothing written (the working directory and --out hold only what the test put there).

Most cases run in this process (`sim.cli.commands.main`); those that could hang before the fix (a
FIFO, a straggler rate that never lets a replica end) run as a real process with a time
limit, so that a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.cli.test_adversarial import trainsim
from tests.conftest import ROOT, cli_in_process, flat

SMALL = ROOT / "scenarios/llama7b-128.yaml"
QUICK = ["--replicas", "2", "--workers", "1", "--no-progress"]
PLAN = ["plan", str(SMALL), "--vary", "cluster.spare_nodes=0,1", "--deadline-days", "30"]
TIMEOUT_S = 60


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def refused(args: list[str], cwd: Path, *words: str) -> subprocess.CompletedProcess:
    """Run a command in `cwd`; it must exit 2 naming every word on stderr, without a
    traceback, and leave `cwd` as it was."""
    before = files_under(cwd)
    r = cli_in_process(args, cwd)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout and "internal error" not in r.stderr
    for word in words:
        assert word in flat(r.stderr), (word, r.stderr[-2000:])
    assert files_under(cwd) == before, sorted(files_under(cwd) - before)
    return r


MEMORY_LIMIT = 8 * 2**30  # address space of a real command: a runaway fails, not the machine


def real_command(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`python -m sim ARGS` in its own process group, killed after TIMEOUT_S, its memory
    limited: a hang or a runaway allocation fails the test."""
    return trainsim(args, cwd, TIMEOUT_S, MEMORY_LIMIT)


def scenario_with(tmp_path: Path, **sections) -> Path:
    doc = yaml.safe_load(SMALL.read_text())
    doc.update(sections)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# --------------------------------------------------------------------------- numbers on the command line


@pytest.mark.parametrize(
    "option, value",
    [
        ("--deadline-days", "nan"),
        ("--deadline-days", "inf"),
        ("--quantile", "nan"),
        ("--precision", "nan"),
        ("--precision", "-inf"),
    ],
)
def test_plan_refuses_non_finite_numbers(tmp_path, option, value):
    args = [a for a in PLAN if a not in ("--deadline-days", "30")]
    args += ["--deadline-days", "30"] if option != "--deadline-days" else []
    refused([*args, option, value, "--out", "o"], tmp_path, option, "finite")


def test_target_ci_nan_is_refused(tmp_path):
    refused(
        ["run", str(SMALL), *QUICK, "--target-ci", "nan", "--out", "o"], tmp_path, "--target-ci"
    )


@pytest.mark.parametrize("command", ["run", "optimize", "plan"])
def test_workers_beyond_any_machine_are_refused(tmp_path, command):
    args = {
        "run": ["run", str(SMALL), *QUICK[:2]],
        "optimize": ["optimize", str(SMALL), "--param", "checkpoint.interval_minutes=30,60"],
        "plan": PLAN,
    }[command]
    refused([*args, "--workers", str(10**30), "--out", "o"], tmp_path, "--workers", "4096")


@pytest.mark.parametrize("text", ["²", "²:3", "0:²", "1:1", "3:1", "0:１"])
def test_points_take_ascii_digits_and_a_nonempty_slice(tmp_path, text):
    doc_args = ["--param", "checkpoint.interval_minutes=30,60"]
    refused(
        ["run", str(SMALL), *QUICK, *doc_args, "--points", text, "--out", "o"], tmp_path, "--points"
    )


def refused_by_the_real_command(args: list[str], cwd: Path, *words: str) -> str:
    """As `refused`, through a real process (time and memory limited): what its stderr said."""
    before = files_under(cwd)
    r = real_command(args, cwd)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    for word in words:
        assert word in flat(r.stderr), (word, r.stderr[-2000:])
    assert files_under(cwd) == before
    return r.stderr


def test_replicas_beyond_the_limit_are_refused_at_once(tmp_path):
    # before the limit: a list of 10^9 replica numbers, minutes without output
    err = refused_by_the_real_command(
        ["run", str(SMALL), "--replicas", "1000000001", "--out", "o", "--no-progress"],
        tmp_path,
        "--replicas",
    )
    assert "1000000" in err.replace(",", "")  # the limit is stated


def test_replicas_times_points_beyond_the_run_limit_are_refused(tmp_path):
    values = ",".join(str(m) for m in range(30, 41))  # 11 points x 10^6 replicas
    err = refused_by_the_real_command(
        ["run", str(SMALL), "--replicas", "1000000", "--param",
         f"checkpoint.interval_minutes={values}", "--out", "o", "--no-progress"],
        tmp_path,
        "--replicas",
    )  # fmt: skip
    assert "11,000,000" in err and "10,000,000" in err and "--points" in err


# --------------------------------------------------------------------------- keys a sweep cannot vary


@pytest.mark.parametrize("param", ["simulation.seed=1,2", "simulation.replicas=2,5"])
def test_keys_every_point_shares_cannot_be_swept(tmp_path, param):
    key = param.partition("=")[0]
    refused(
        ["run", str(SMALL), *QUICK, "--param", param, "--out", "o"],
        tmp_path,
        key,
        "cannot be swept",
    )


def test_a_sweep_section_of_the_seed_is_refused_by_validate(tmp_path):
    path = scenario_with(tmp_path, sweep={"simulation.seed": [1, 2]})
    refused(["validate", str(path)], tmp_path, "simulation.seed", "cannot be swept")


def test_plan_refuses_two_exclusive_keys(tmp_path):
    args = [
        "plan", str(SMALL), "--vary", "checkpoint.interval_steps=500,1000",
        "--vary", "checkpoint.interval_minutes=30,60", "--deadline-days", "30", "--out", "o",
        "--replicas-first", "2", "--replicas-max", "4", "--workers", "1", "--no-progress",
    ]  # fmt: skip
    refused(args, tmp_path, "checkpoint.interval_steps", "checkpoint.interval_minutes", "exclusive")


def test_a_repeated_sweep_value_is_refused(tmp_path):
    refused(
        ["run", str(SMALL), *QUICK, "--param", "checkpoint.interval_minutes=60,60.0", "--out", "o"],
        tmp_path,
        "checkpoint.interval_minutes",
        "twice",
    )


# --------------------------------------------------------------------------- refused before any file


def test_optimize_with_duplicate_values_writes_nothing(tmp_path):
    refused(
        ["optimize", str(SMALL), *QUICK, "--param", "checkpoint.interval_minutes=30,30",
         "--out", "o"],
        tmp_path,
        "checkpoint.interval_minutes",
    )  # fmt: skip


def test_optimize_of_a_metric_without_values_writes_nothing(tmp_path):
    # backup_lag_hours is missing (NaN) in every replica without a backup tier
    refused(
        ["optimize", str(SMALL), *QUICK, "--param", "checkpoint.interval_minutes=30,60",
         "--metric", "backup_lag_hours", "--out", "o"],
        tmp_path,
        "--metric",
        "storage.backup",
    )  # fmt: skip


def test_plan_with_an_unreachable_scheduler_writes_nothing(tmp_path):
    refused(
        [*PLAN, "--executor", "dask", "--scheduler", "tcp://127.0.0.1:1", "--out", "o"],
        tmp_path,
        "--scheduler",
        "tcp://127.0.0.1:1",
    )


# --------------------------------------------------------------------------- compare


@pytest.fixture(scope="module")
def two_scenarios(tmp_path_factory) -> dict[str, Path]:
    """Runs of two scenarios (the 7B one and a copy named otherwise), same seed, and one
    more run of each sweeping the interval."""
    root = tmp_path_factory.mktemp("two")
    other = root / "other.yaml"
    other.write_text(SMALL.read_text().replace("name: llama7b-128", "name: other-7b"))
    runs = {}
    for label, path, extra in (
        ("A", SMALL, []),
        ("B", other, []),
        ("SA", SMALL, ["--param", "checkpoint.interval_minutes=30,60"]),
        ("SB", other, ["--param", "checkpoint.interval_minutes=30,60"]),
    ):
        out = root / label
        r = cli_in_process(["run", str(path), *QUICK, "--replicas", "4", "--no-figures",
                            "--out", str(out), *extra])  # fmt: skip
        assert r.returncode == 0, r.stderr
        (runs[label],) = [p for p in out.glob("*/*") if p.is_dir()]
    return runs


def test_compare_of_two_scenarios_says_so_first_and_does_not_pair(two_scenarios, tmp_path):
    a, b = two_scenarios["A"], two_scenarios["B"]
    r = cli_in_process(["compare", str(a), str(b), "--no-figure"], tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stdout.strip().splitlines()[0]
    assert "different scenarios" in first and "llama7b-128" in first and "other-7b" in first
    # the same seed and replica ids, but replicas of two scenarios are not paired
    assert "paired by replica" not in r.stdout and "Welch" in flat(r.stdout)


def test_compare_of_two_scenarios_does_not_match_sweep_points(two_scenarios, tmp_path):
    a, b = two_scenarios["SA"], two_scenarios["SB"]
    refused(
        ["compare", str(a), str(b), "--no-figure"], tmp_path, "different scenarios", "--point-a"
    )


@pytest.mark.parametrize("name", ["x.txt", "x.yaml", "figure.docx"])
def test_compare_refuses_a_figure_format_it_cannot_write(two_scenarios, tmp_path, name):
    a, b = two_scenarios["A"], two_scenarios["A"]
    before = files_under(a)
    refused(["compare", str(a), str(b), "--figure", name], tmp_path, "--figure", ".png")
    assert files_under(a) == before


# --------------------------------------------------------------------------- files that are not files


@pytest.mark.parametrize("command", [["validate"], ["run", *QUICK, "--out", "o"]])
def test_a_fifo_nobody_writes_is_refused_without_hanging(tmp_path, command):
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    args = [command[0], str(fifo), *command[1:]]
    r = real_command(args, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "FIFO" in r.stderr and "not a regular file" in r.stderr and str(fifo) in r.stderr
    assert files_under(tmp_path) == {"s.yaml"}


def test_a_directory_is_refused_as_a_scenario(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    refused(["validate", str(tmp_path / "d.yaml")], tmp_path, "a directory", "not a regular file")


# --------------------------------------------------------------------------- events a replica could make


STRAGGLERS = {"rate_per_1k_gpu_day": 1.0e6, "slowdown": 0.999, "detect_hours": None}


def test_a_straggler_rate_no_replica_could_get_through_is_refused(tmp_path):
    path = scenario_with(tmp_path, stragglers=STRAGGLERS)
    r = real_command(["run", str(path), *QUICK, "--out", "o"], tmp_path)
    assert r.returncode == 2, r.stderr
    text = flat(r.stderr)
    assert "stragglers.rate_per_1k_gpu_day" in text
    # the estimate: 10^6 per 1,000 GPU-days x 128 GPUs x 365 days
    assert "46,720,000 straggler onsets" in text and "1,000,000 events" in text
    assert files_under(tmp_path) == {"s.yaml"}
    refused(["validate", str(path)], tmp_path, "stragglers.rate_per_1k_gpu_day")


def test_the_shipped_straggler_scenario_stays_within_the_bound(tmp_path):
    r = cli_in_process(["validate", str(ROOT / "scenarios/llama70b-1k-gray.yaml")], tmp_path)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- export


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export")
    r = cli_in_process(["run", str(SMALL), *QUICK, "--replicas", "5", "--no-figures",
                        "--param", "checkpoint.interval_minutes=30,60", "--out", str(out)])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run


def test_export_writes_the_replica_table_as_csv(one_run, tmp_path):
    out = tmp_path / "table.csv"
    r = cli_in_process(["export", str(one_run), "--out", str(out)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert str(out) in r.stdout
    csv = pd.read_csv(out, keep_default_na=False, na_values=[""])
    table = pd.read_parquet(one_run / "replicas.parquet")
    assert list(csv.columns) == list(table.columns) and len(csv) == len(table) == 10
    for column in ("point", "replica", "wall_hours", "cost_usd", "time_to_train_days"):
        pd.testing.assert_series_equal(
            csv[column].astype(float), table[column].astype(float), check_names=False, rtol=1e-12
        )
    assert sorted(csv["checkpoint.interval_minutes"].unique()) == [30, 60]


def test_export_by_default_into_the_run_and_never_over_its_files(one_run, tmp_path):
    parquet = one_run / "replicas.parquet"
    before = parquet.read_bytes()
    for target in [parquet, one_run / "run.json", one_run / "summary.csv"]:
        refused(["export", str(one_run), "--out", str(target)], tmp_path, "--out")
    assert parquet.read_bytes() == before
    r = cli_in_process(["export", str(one_run)], tmp_path)
    assert r.returncode == 0 and (one_run / "replicas.csv").is_file(), r.stderr
    # a second export does not overwrite it unless told to
    refused(["export", str(one_run)], tmp_path, "--force")
    assert cli_in_process(["export", str(one_run), "--force"], tmp_path).returncode == 0
    (one_run / "replicas.csv").unlink()


def test_export_of_something_that_is_not_a_run(tmp_path):
    refused(["export", str(tmp_path)], tmp_path, "run.json")


# --------------------------------------------------------------------------- issue 27, section 5


def test_run_scheduler_without_the_dask_executor_is_refused(tmp_path):
    refused(["run", str(SMALL), *QUICK, "--scheduler", "tcp://127.0.0.1:1", "--out", "o"],
            tmp_path, "--scheduler", "--executor dask")  # fmt: skip
    refused([*PLAN, "--executor", "serial", "--scheduler", "tcp://127.0.0.1:1", "--out", "o"],
            tmp_path, "--scheduler", "--executor dask")  # fmt: skip


def test_plan_first_round_beyond_the_most_replicas_is_refused(tmp_path):
    refused([*PLAN, "--replicas-first", "64", "--replicas-max", "32", "--out", "o"], tmp_path,
            "--replicas-first", "--replicas-max 32")  # fmt: skip


FORECAST = ["forecast", str(SMALL), "--replicas", "2"]


def test_forecast_start_without_a_log_is_refused(tmp_path):
    refused([*FORECAST, "--elapsed-days", "1", "--done-steps", "10", "--start",
             "2026-01-01T00:00"], tmp_path, "--start", "--incidents")  # fmt: skip


def test_forecast_progress_faster_than_the_ideal_step_is_refused(tmp_path):
    refused([*FORECAST, "--elapsed-days", "0", "--done-steps", "4000"], tmp_path,
            "--done-steps", "at least", "--elapsed-days 0")  # fmt: skip
    refused([*FORECAST, "--elapsed-days", "0.5", "--done-steps", "40000"], tmp_path,
            "--done-steps")  # fmt: skip


def test_forecast_of_a_log_of_many_replicas_names_no_option_it_lacks(one_run, tmp_path):
    log = tmp_path / "log.csv"
    pd.DataFrame({"time": [1.0, 2.0], "node": [1, 2], "replica": [0, 1]}).to_csv(log, index=False)
    r = refused([*FORECAST, "--elapsed-days", "30", "--done-steps", "10", "--incidents",
                 str(log)], tmp_path, "--incidents", "one run")  # fmt: skip
    assert "--replica" not in r.stderr and "--point" not in r.stderr


def test_never_more_worker_processes_than_chunks(tmp_path, monkeypatch):
    from sim.data import forecast
    from sim.runs import montecarlo

    sizes = []
    real = montecarlo.ProcessPoolExecutor

    def recording(*args, max_workers=None, **kwargs):
        sizes.append(max_workers)
        return real(*args, max_workers=max_workers, **kwargs)

    monkeypatch.setattr(montecarlo, "ProcessPoolExecutor", recording)
    r = cli_in_process(["run", str(SMALL), "--replicas", "2", "--workers", "64", "--executor",
                        "processes", "--no-progress", "--no-figures", "--out", "o"], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = cli_in_process([*FORECAST, "--elapsed-days", "1", "--done-steps", "10", "--workers",
                        "64"], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sizes and max(sizes) <= 2, sizes
    assert forecast.stoppable_pool is montecarlo.stoppable_pool
