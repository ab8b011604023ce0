"""Replicas that raise: the run keeps their error rows, then says why once (how many raised,
the first one's exception; in a sweep, the points none of whose replicas ran) and exits 1,
with or without --json; the first one's traceback only under TRAINSIM_DEBUG=1. The engine
is made to raise here (the replica function montecarlo calls), whatever bug made it raise."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from sim.runs import api
from sim.runs import montecarlo as mc
from tests.conftest import TINY, cli_in_process

QUIET = ["--replicas", "3", "--executor", "serial", "--no-progress", "--no-figures"]


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def raising(when=lambda plan, replica: True):
    real = mc.simulate_replica

    def simulate_replica(plan, replica, seed, **kwargs):
        if when(plan, replica):
            raise KeyError("leave")
        return real(plan, replica, seed, **kwargs)

    return simulate_replica


def run(tiny: Path, tmp_path: Path, *extra: str):
    return cli_in_process(["run", str(tiny), *QUIET, "--out", str(tmp_path / "out"), *extra])


@pytest.mark.parametrize("as_json", [False, True])
def test_a_run_whose_replicas_raise_says_why_once_and_exits_1(tiny, tmp_path, monkeypatch, as_json):
    monkeypatch.setattr(mc, "simulate_replica", raising())
    monkeypatch.delenv("TRAINSIM_DEBUG", raising=False)
    r = run(tiny, tmp_path, *(["--json"] if as_json else []))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == ""  # no answer (nor JSON) from replicas that did not run
    assert "3 of 3 replicas raised" in r.stderr
    assert r.stderr.count("KeyError: 'leave'") == 1, r.stderr  # once, no warning besides
    assert "time_to_train_days" not in r.stderr and "internal error" not in r.stderr
    assert "Traceback" not in r.stderr and "TRAINSIM_DEBUG=1" in r.stderr
    (table,) = (tmp_path / "out").rglob("replicas.parquet")  # the error rows are kept
    assert (pd.read_parquet(table)["error"].str.startswith("KeyError")).all()


@pytest.mark.parametrize("debug", ["1", "0", None])
def test_the_first_replicas_traceback_only_under_trainsim_debug(tiny, tmp_path, monkeypatch, debug):
    monkeypatch.setattr(mc, "simulate_replica", raising())
    if debug is None:
        monkeypatch.delenv("TRAINSIM_DEBUG", raising=False)
    else:
        monkeypatch.setenv("TRAINSIM_DEBUG", debug)
    r = run(tiny, tmp_path)
    assert r.returncode == 1
    if debug == "1":
        assert r.stderr.count("Traceback (most recent call last)") == 1
        assert "in simulate_replica" in r.stderr  # the replica's own frames
    else:
        assert "Traceback" not in r.stderr


def test_a_sweep_names_the_point_every_replica_of_which_raised(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "simulate_replica", raising(lambda plan, _: plan.interval_steps == 200))
    r = run(tiny, tmp_path, "--param", "checkpoint.interval_steps=100,200", "--json")
    assert r.returncode == 1 and r.stdout == ""
    assert "3 of 6 replicas raised, every replica of point 1 (checkpoint.interval_steps=200)" in (
        r.stderr
    )
    assert "the first, point 1 replica 0: KeyError: 'leave'" in r.stderr


def test_some_replicas_raising_is_said_too(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "simulate_replica", raising(lambda _, replica: replica == 1))
    r = run(tiny, tmp_path)
    assert r.returncode == 1
    assert "1 of 3 replicas raised; the first, replica 1: KeyError: 'leave'" in r.stderr


def test_the_traceback_comes_back_from_a_worker_process(tiny, tmp_path, monkeypatch):
    """With the processes executor the replica raises in a worker (forked: it has the patch)."""
    monkeypatch.setattr(mc, "simulate_replica", raising())
    monkeypatch.setenv("TRAINSIM_DEBUG", "1")
    r = cli_in_process(["run", str(tiny), "--replicas", "2", "--executor", "processes",
                        "--workers", "2", "--no-progress", "--no-figures", "--out",
                        str(tmp_path / "out")])  # fmt: skip
    assert r.returncode == 1
    assert "in simulate_replica" in r.stderr and "2 of 2 replicas raised" in r.stderr


def test_the_library_raises_replicas_raised_with_the_outcome(tiny, monkeypatch):
    monkeypatch.setattr(mc, "simulate_replica", raising(lambda _, replica: replica == 0))
    with pytest.raises(api.ReplicasRaised, match="1 of 2 replicas raised") as raised:
        api.run_scenario(tiny, replicas=2, executor="serial", workers=1, progress=False)
    assert len(raised.value.outcome.table) == 2
    assert raised.value.failed_points == [] and "KeyError" in raised.value.traceback


def test_a_plan_whose_replicas_raise_says_why_once_and_exits_1(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "simulate_replica", raising(lambda plan, _: plan.spare_nodes == 1))
    r = cli_in_process(["plan", str(tiny), "--vary", "cluster.spare_nodes=0,1", "--deadline-days",
                        "10", "--executor", "serial", "--no-progress", "--out",
                        str(tmp_path / "out")])  # fmt: skip
    assert r.returncode == 1 and r.stdout == ""
    assert "every replica of point 1 (cluster.spare_nodes=1)" in r.stderr
    assert r.stderr.count("KeyError: 'leave'") == 1, r.stderr
    assert "internal error" not in r.stderr and "WARNING" not in r.stderr
