"""Monte Carlo plumbing: error rows, stream independence, common random numbers."""

from __future__ import annotations

import pandas as pd

from sim.model.scenario import load_document
from sim.runs import montecarlo
from sim.runs.summaries import summarize
from tests.conftest import TINY, merge

FAILING = merge(
    TINY,
    {
        "failures": [{"name": "node", "scope": "node", "mtbf_hours": 1.0, "repair_hours": 0.5}],
        "cluster": {"spare_nodes": 1},
    },
)


def test_a_replica_that_raises_becomes_an_error_row(monkeypatch, capsys):
    real = montecarlo.simulate_replica

    def flaky(plan, replica, seed, **kwargs):
        if replica == 3:
            raise RuntimeError("boom")
        return real(plan, replica, seed, **kwargs)

    monkeypatch.setattr(montecarlo, "simulate_replica", flaky)
    table = montecarlo.run(load_document(FAILING), replicas=6, workers=1, progress=False)
    assert len(table) == 6
    bad = table[table["error"] != ""]
    assert list(bad["replica"]) == [3] and "RuntimeError: boom" in bad["error"].iloc[0]
    assert "WARNING: 1 of 6 replicas raised" in capsys.readouterr().err
    summary = summarize(table)
    assert summary.set_index("metric").loc["wall_hours", "n"] == 5


def test_replica_streams_do_not_depend_on_how_many_replicas_run():
    scenario_set = load_document(FAILING)
    few = montecarlo.run(scenario_set, replicas=4, workers=1, progress=False)
    many = montecarlo.run(scenario_set, replicas=9, workers=1, progress=False, chunk_size=2)
    pd.testing.assert_frame_equal(few, many.iloc[:4])
    assert few["failures"].sum() > 0


def test_sweep_points_share_random_numbers():
    # the repair time does not matter while spares last: with CRN both points see the same failures
    doc = merge(
        FAILING, {"cluster": {"spare_nodes": 50}, "sweep": {"failures.0.repair_hours": [0.5, 5.0]}}
    )
    table = montecarlo.run(load_document(doc), replicas=5, workers=1, progress=False)
    a, b = (table[table["point"] == p].reset_index(drop=True) for p in (0, 1))
    assert a["failures"].sum() > 0
    assert a["wall_hours"].equals(b["wall_hours"])
