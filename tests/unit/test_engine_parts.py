"""Pure engine parts: lifetimes against their analytic moments, stretch arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.distributions import Exponential, LogNormal, Weibull
from sim.engine.stretch import Stretch


@pytest.mark.parametrize(
    "dist", [Exponential(10.0), Weibull(10.0, 0.7), Weibull(10.0, 2.0), LogNormal(10.0, 1.0)]
)
def test_sample_mean_matches_analytic_mean(dist):
    n = 200_000
    x = dist.sample(np.random.default_rng(3), n)
    sem = math.sqrt(dist.variance / n)
    assert abs(x.mean() - dist.mean) < 4 * sem
    assert x.var() == pytest.approx(dist.variance, rel=0.1)


def test_stretch_positions():
    s = Stretch(start_step=200, total_steps=1000, interval_steps=300, step_s=1.0, write_s=10.0)
    # cycles: [200,500] 300 s + 10 s write, [500,800], tail [800,1000] 200 s + 10 s
    assert (s.full_cycles, s.tail_steps, s.checkpoints) == (
        1,
        200,
        3,
    )  # full cycles after the first
    assert s.duration_s == 2 * 310 + 210
    p = s.position(100.0)
    assert (p.checkpoints, p.durable_step, p.pending_compute_s, p.aborted_write_s) == (
        0,
        200,
        100.0,
        0.0,
    )
    p = s.position(305.0)  # inside the first write
    assert (p.checkpoints, p.durable_step, p.pending_compute_s, p.aborted_write_s) == (
        0,
        200,
        300.0,
        5.0,
    )
    p = s.position(620.0 + 50.0)  # tail compute
    assert (p.checkpoints, p.durable_step, p.pending_compute_s) == (2, 800, 50.0)
    assert s.position(s.duration_s).durable_step == 1000
    assert s.next_checkpoint(315.0) == 2 and s.checkpoint_due_s(2) == 620.0
    assert s.next_checkpoint(50.0) == 1 and s.checkpoint_due_s(1) == 310.0
    assert s.checkpoint_due_s(3) == s.duration_s


def test_stretch_resumed_part_way_into_an_interval():
    # 120 of 300 steps done before the step time changed, none of the write
    s = Stretch(
        start_step=200,
        total_steps=1000,
        interval_steps=300,
        step_s=2.0,
        write_s=10.0,
        done_steps=120.0,
    )
    assert s.first_s == 180 * 2.0 + 10.0
    assert s.step_at_checkpoint(1) == 500
    p = s.position(100.0)
    assert (p.checkpoints, p.durable_step, p.pending_compute_s) == (0, 200, 100.0)
    p = s.position(s.first_s + 5.0)
    assert (p.checkpoints, p.durable_step, p.pending_compute_s) == (1, 500, 5.0)
    # part of the write already done
    w = Stretch(
        start_step=200,
        total_steps=1000,
        interval_steps=300,
        step_s=2.0,
        write_s=10.0,
        done_steps=300.0,
        written_s=4.0,
    )
    assert w.first_s == 6.0 and w.position(3.0).aborted_write_s == 3.0
