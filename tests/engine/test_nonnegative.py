"""No bucket of the time identity is ever negative, not even by float noise (-1e-14, -0.0)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.model.scenario import load_scenario
from sim.runs.montecarlo import run
from tests.conftest import ROOT

BUCKETS = [
    "ideal_hours",
    "slowdown_hours",
    "lost_work_hours",
    "checkpoint_stall_hours",
    "downtime_hours",
]


@pytest.mark.parametrize(
    ("scenario", "param"),
    [
        ("llama70b-1k.yaml", "checkpoint.interval_steps=250,500,1000,2000"),
        ("llama70b-1k.yaml", "checkpoint.mode=sync,async"),
        ("llama70b-1k-fabric.yaml", "checkpoint.interval_steps=250,1000"),
    ],
)
def test_no_bucket_is_negative(scenario, param):
    loaded = load_scenario(ROOT / "scenarios" / scenario, [], [param])
    table = run(loaded, 100, 42, 1, "serial", progress=False)
    for column in BUCKETS:
        values = table[column].to_numpy()
        assert not np.signbit(values).any(), (column, values.min())
