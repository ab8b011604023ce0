"""Pure engine parts: lifetimes against their analytic moments, stretch arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.engine.stretch import Stretch
from sim.model.distributions import Exponential, LogNormal, Weibull


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
    s = Stretch(start_step=200, total_steps=1000, interval_steps=300, step_s=1.0, snapshot_s=10.0)
    # cycles: [200,500] 300 s + 10 s write, [500,800], tail [800,1000] 200 s + 10 s
    assert (s.full_cycles, s.tail_steps, s.checkpoints) == (
        1,
        200,
        3,
    )  # full cycles after the first
    assert s.duration_s == 2 * 310 + 210
    p = s.position(100.0)
    assert (p.checkpoints, p.durable_step, p.window_compute_s, p.aborted_write) == (
        0,
        200,
        100.0,
        False,
    )
    p = s.position(305.0)  # inside the first write
    assert (p.checkpoints, p.durable_step, p.window_compute_s, p.window_snapshot_s) == (
        0,
        200,
        300.0,
        5.0,
    )
    assert p.aborted_write
    p = s.position(620.0 + 50.0)  # tail compute
    assert (p.checkpoints, p.durable_step, p.window_compute_s, p.kept_s) == (2, 800, 50.0, 620.0)
    assert s.position(s.duration_s).durable_step == 1000
    assert s.next_checkpoint(315.0) == 2 and s.durable_s(2) == 620.0
    assert s.next_checkpoint(50.0) == 1 and s.durable_s(1) == 310.0
    assert s.durable_s(3) == s.duration_s


def test_async_stretch_drains_in_the_background():
    # 100 s of compute per interval, 2 s snapshot, 150 s drain: the next snapshot waits 50 s
    s = Stretch(
        start_step=0, total_steps=300, interval_steps=100, step_s=1.0, snapshot_s=2.0, drain_s=150.0
    )
    assert [s.snapshot_end_s(j) for j in (1, 2, 3)] == [102.0, 254.0, 406.0]
    assert s.duration_s == 556.0  # the final checkpoint is durable when its drain ends
    p = s.position(200.0)  # checkpoint 1 draining until 252 s: not durable yet
    assert (p.checkpoints, p.snapshots, p.durable_step) == (0, 1, 0)
    assert (p.last_window_s, p.last_window_compute_s) == (102.0, 100.0)
    p = s.position(253.0)  # durable, waiting for it made the second snapshot start late
    assert (p.checkpoints, p.durable_step, p.kept_s, p.window_snapshot_s) == (1, 100, 102.0, 1.0)


def test_stretch_resumed_part_way_into_an_interval():
    # 120 of 300 steps done before the step time changed, none of the write
    s = Stretch(
        start_step=200,
        total_steps=1000,
        interval_steps=300,
        step_s=2.0,
        snapshot_s=10.0,
        done_steps=120.0,
    )
    assert s.first_s == 180 * 2.0 + 10.0
    assert s.step_at_checkpoint(1) == 500
    p = s.position(100.0)
    assert (p.checkpoints, p.durable_step, p.window_compute_s) == (0, 200, 100.0)
    p = s.position(s.first_s + 5.0)
    assert (p.checkpoints, p.durable_step, p.window_compute_s) == (1, 500, 5.0)
    # part of the write already done
    w = Stretch(
        start_step=200,
        total_steps=1000,
        interval_steps=300,
        step_s=2.0,
        snapshot_s=10.0,
        done_steps=300.0,
        snapped_s=4.0,
    )
    assert w.first_s == 6.0 and w.position(3.0).window_snapshot_s == 3.0


def brute_schedule(s: Stretch, done_steps: float, snapped_s: float):
    """Walk the cycles one by one: snapshot ends S_j and durable times T_j."""
    t, step, drain_end, first = 0.0, s.start_step, s.pending_drain_s, True
    ends, durable = [], []
    while step < s.total_steps:
        boundary = min(step + s.interval_steps, s.total_steps)
        done = done_steps if first else 0.0
        n = boundary - step - done
        overlap = max(0.0, drain_end - t)  # a drain still running when the window starts
        if n * s.slow_step_s <= overlap:
            compute = n * s.slow_step_s
        else:
            compute = overlap + (n - overlap / s.slow_step_s) * s.step_s
        if s.memory_every:  # in-memory checkpoints after multiples of m inside the window
            compute += (
                sum(1 for q in range(1, boundary - step) if q % s.memory_every == 0 and q > done)
                * s.memory_s
            )
        gate = max(t + compute, drain_end)
        t = gate + s.snapshot_s - (snapped_s if first else 0.0)
        drain_end = t + s.drain_s
        ends.append(t)
        durable.append(drain_end)
        step, first = boundary, False
    return ends, durable


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 50),
    extra=st.integers(1, 400),
    interval=st.integers(1, 60),
    step_s=st.floats(0.1, 5.0),
    snapshot_s=st.floats(0.0, 20.0),
    drain_s=st.floats(0.0, 200.0),
    done_frac=st.floats(0.0, 1.0),
    pending=st.floats(0.0, 300.0),
    fraction=st.floats(0.0, 1.05),
)
def test_closed_form_matches_walking_the_cycles(
    start, extra, interval, step_s, snapshot_s, drain_s, done_frac, pending, fraction
):
    first_steps = min(interval, extra)
    done = done_frac * first_steps
    s = Stretch(
        start,
        start + extra,
        interval,
        step_s,
        snapshot_s,
        drain_s,
        done_steps=done,
        pending_drain_s=pending,
        durable_before=max(0, start - interval) if pending else None,
    )
    ends, durable = brute_schedule(s, done, 0.0)
    assert s.checkpoints == len(ends)
    for j in range(1, len(ends) + 1):
        assert s.snapshot_end_s(j) == pytest.approx(ends[j - 1], rel=1e-9, abs=1e-9)
    assert s.duration_s == pytest.approx(durable[-1], rel=1e-9, abs=1e-9)
    e = fraction * s.duration_s
    p = s.position(e)
    k = sum(t <= e for t in durable) if e < s.duration_s else len(durable)
    assert p.checkpoints == k
    if e < s.duration_s:
        w = sum(t <= e for t in ends)
        assert p.snapshots == w
        assert p.kept_s == pytest.approx(ends[k - 1] if k else 0.0)
        assert p.window_s == pytest.approx(e - (ends[w - 1] if w else 0.0))
        assert 0 <= p.window_compute_s + p.window_snapshot_s <= p.window_s + 1e-9
        assert p.pending_durable == (pending > 0 and e >= pending)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.integers(1, 80),
    done_frac=st.floats(0.0, 1.0),
    m=st.integers(1, 15),
    step_s=st.floats(0.1, 3.0),
    memory_s=st.floats(0.01, 2.0),
    fraction=st.floats(0.0, 1.0),
)
def test_progress_through_in_memory_checkpoints(steps, done_frac, m, step_s, memory_s, fraction):
    done = done_frac * steps
    s = Stretch(0, steps, steps, step_s, 1.0, done_steps=done, memory_every=m, memory_s=memory_s)
    # walk: compute to each boundary, then its in-memory snapshot
    t, at, newest, events = 0.0, done, None, []
    for q in range(1, steps):
        if q % m == 0 and q > done:
            events.append((t + (q - at) * step_s, q))
            t += (q - at) * step_s + memory_s
            at = q
    end = t + (steps - at) * step_s
    assert s.work_s(1) == pytest.approx(end)
    probe = fraction * end
    steps_done, compute, newest = s.progress(1, probe)
    completed = [(q, start + memory_s) for start, q in events if start + memory_s <= probe]
    if completed:
        assert newest is not None and newest[0] == completed[-1][0]
        assert newest[1] == pytest.approx(completed[-1][1])
    else:
        assert newest is None
    assert compute == pytest.approx((steps_done - done) * step_s, abs=1e-9)
    assert done - 1e-9 <= steps_done <= steps + 1e-9
