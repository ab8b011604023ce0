"""Holes a hostile pass found at the command line (issue 35): what was silently accepted
(a boolean as a number, --set under a --param, --workers with the serial executor, both
directions to optimize), extremes the model cannot mean, the report written over a FIFO,
and texts (an unknown key's list of keys, a help text's "%%"). Each is refused as bad
input: exit 2, the option or key path named, no traceback, nothing written."""

from __future__ import annotations

import os
import stat

import pytest
import yaml

from tests.cli.test_argument_holes import (
    PLAN,
    QUICK,
    SMALL,
    files_under,
    real_command,
    refused,
    refused_by_the_real_command,
)
from tests.conftest import cli_in_process, flat

RUN = ["run", str(SMALL), *QUICK, "--no-figures", "--out", "o"]
OPTIMIZE = ["optimize", str(SMALL), "--param", "checkpoint.interval_minutes=30,60",
            "--replicas", "2", "--no-progress", "--out", "o"]  # fmt: skip


# --------------------------------------------------------------------------- silently accepted


@pytest.mark.parametrize(
    "assignment", ["model.params=true", "parallelism.zero_stage=true", "cluster.node_rate_cv=false"]
)
def test_a_boolean_is_no_number(tmp_path, assignment):
    key = assignment.partition("=")[0]
    refused([*RUN, "--set", assignment], tmp_path, key, "expected a number")


def test_a_set_key_that_a_param_sweeps_is_refused(tmp_path):
    refused(
        [*RUN, "--set", "cluster.spare_nodes=5", "--param", "cluster.spare_nodes=1,2"],
        tmp_path,
        "--set cluster.spare_nodes",
        "--param cluster.spare_nodes",
    )


def test_a_set_key_that_plan_varies_is_refused(tmp_path):
    refused(
        [*PLAN, "--set", "cluster.spare_nodes=5", "--out", "o"],
        tmp_path,
        "--set cluster.spare_nodes",
        "--vary",
    )


def test_optimize_with_both_directions_is_refused(tmp_path):
    refused([*OPTIMIZE, "--maximize", "--minimize"], tmp_path, "--maximize", "--minimize")
    refused([*OPTIMIZE, "--minimize", "--maximize"], tmp_path, "--maximize", "--minimize")


def test_optimize_with_workers_and_a_serial_scenario_is_refused(tmp_path):
    refused(
        [*OPTIMIZE, "--workers", "4", "--set", "simulation.executor=serial"],
        tmp_path,
        "--workers",
        "simulation.executor: serial",
    )


# needs sim/cli/run_commands.py and sim/cli/plan_command.py to call
# arguments.check_workers (the edits are in the report of issue 35's hostile pass)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_workers_with_the_serial_executor_are_refused(tmp_path, command):
    args = RUN if command == "run" else [*PLAN, "--out", "o", "--no-progress"]
    args = [a for a in args if a not in ("--workers", "1")]
    refused([*args, "--executor", "serial", "--workers", "4"], tmp_path, "--workers", "serial")


def test_one_worker_with_the_serial_executor_is_fine(tmp_path):
    r = cli_in_process([*RUN, "--executor", "serial"], tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["run", "optimize", "plan"])
def test_a_sweep_beyond_the_limit_is_refused_before_any_file(tmp_path, command):
    values = ",".join(str(v) for v in range(1, 10_002))
    args = {
        "run": ["run", str(SMALL), *QUICK, "--param", f"checkpoint.interval_steps={values}"],
        "optimize": ["optimize", str(SMALL), "--param", f"checkpoint.interval_steps={values}"],
        "plan": [*PLAN, "--vary", f"checkpoint.interval_steps={values}"],
    }[command]
    err = refused_by_the_real_command([*args, "--no-progress", "--out", "o"], tmp_path, "sweep")
    assert "10,001 sweep points" in err or "20,002 sweep points" in err


# --------------------------------------------------------------------------- extremes


def test_a_spread_of_nodes_too_small_to_mean_anything_is_refused(tmp_path):
    # before: a division by zero in every replica (the gamma's shape 1/cv² is infinite)
    refused([*RUN, "--set", "cluster.node_rate_cv=1e-300"], tmp_path, "cluster.node_rate_cv",
            "1e-06")  # fmt: skip


def test_a_weibull_shape_of_a_failure_storm_is_refused(tmp_path):
    # before: shape 0.05, in service or new, ran past a minute for one replica of 128 GPUs
    args = ["--set", "failures.0.distribution=weibull", "--set", "failures.0.weibull_shape=0.05",
            "--set", "failures.0.age=in_service"]  # fmt: skip
    refused_by_the_real_command([*RUN, *args], tmp_path, "failures.0.weibull_shape", "0.1")


# --------------------------------------------------------------------------- the report


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    r = cli_in_process(["run", str(SMALL), *QUICK, "--no-figures", "--out", str(root)])
    assert r.returncode == 0, r.stderr
    (run,) = [p for p in root.glob("*/*") if p.is_dir()]
    return run


def test_a_report_onto_a_fifo_is_refused_and_the_fifo_kept(one_run, tmp_path):
    fifo = tmp_path / "report.html"
    os.mkfifo(fifo)
    r = real_command(["report", str(one_run), "--out", str(fifo)], tmp_path)
    assert r.returncode == 2, r.stderr
    assert "--out" in r.stderr and "FIFO" in r.stderr and "not a regular file" in r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert files_under(tmp_path) == {"report.html"}


# --------------------------------------------------------------------------- texts


def test_an_unknown_checkpoint_key_lists_the_documented_names(tmp_path):
    doc = yaml.safe_load(SMALL.read_text())
    doc["checkpoint"]["validate_writes"] = True  # the attribute's name, not the key's
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    r = refused(["validate", "s.yaml"], tmp_path, "checkpoint.validate_writes", "unknown key")
    listed = flat(r.stderr).partition("expected one of:")[2]
    assert "validate" in listed.replace(",", " ").split()
    assert "validate_writes" not in listed


def test_run_help_says_95_percent_once(tmp_path):
    # needs the edit of sim/cli/run_commands.py (95%% in a click help text is printed as is)
    r = cli_in_process(["run", "--help"], tmp_path)
    assert r.returncode == 0
    assert "95%" in r.stdout and "%%" not in r.stdout
