"""The deterministic calculator against hand-computed figures and published theory."""

from __future__ import annotations

import math

import pytest

from sim.model import calculator, checkpoints, perf, reliability
from sim.model.scenario import load_scenario
from tests.conftest import ROOT, tiny


def test_tiny_scenario_figures():
    s = tiny()
    assert perf.step_time_s(s) == 1.0
    assert perf.total_steps(s) == 1000
    assert checkpoints.checkpoint_GB(s) == 10.0
    assert checkpoints.checkpoint_write_s(s) == 10.0
    assert checkpoints.checkpoint_load_s(s) == 5.0


def test_client_bandwidth_caps_the_tier():
    s = tiny(storage={"client_GB_s_per_node": 0.25})  # 2 nodes x 0.25 = 0.5 GB/s < 1 GB/s tier
    assert checkpoints.checkpoint_write_s(s) == pytest.approx(20.0)
    assert checkpoints.checkpoint_write_s(s, nodes=1) == pytest.approx(40.0)


def test_flops_per_token_adds_attention_when_shape_given():
    s = load_scenario(ROOT / "scenarios/llama70b-1k.yaml").base
    assert perf.flops_per_token(s) == 6 * 70e9 + 12 * 80 * 8192 * 4096


def test_reference_step_time_follows_from_mfu():
    s = load_scenario(ROOT / "scenarios/llama70b-1k.yaml").base
    expected = perf.flops_per_token(s) * 4194304 / (1024 * 989.4e12 * 0.45)
    assert perf.step_time_s(s) == pytest.approx(expected, rel=1e-12)
    assert perf.total_steps(s) == math.ceil(1.4e12 / 4194304)
    assert checkpoints.checkpoint_GB(s) == pytest.approx(
        980.0
    )  # 70B x 14 bytes ~ 1 TB (docs/references.md)


def test_rate_per_1k_gpu_day_is_fleet_normalised():
    s = tiny(
        failures=[
            {"name": "g", "scope": "gpu", "rate_per_1k_gpu_day": 1.0},
            {"name": "n", "scope": "node", "rate_per_1k_gpu_day": 1.0},
            {"name": "j", "scope": "job", "rate_per_1k_gpu_day": 1.0},
        ]
    )
    # 4 GPUs at 1 failure per 1,000 GPU-days: 0.004/day from each class, whatever its scope
    for f in s.failures:
        assert reliability.failure_rate_per_hour(f, s) * 24 == pytest.approx(0.004)
    assert reliability.aggregate_mtbf_hours(s) == pytest.approx(24 / 0.012)


def test_young_and_daly():
    assert reliability.young_interval_s(100, 20000) == pytest.approx(2000.0)
    # Daly's correction is small when delta << M and the optimum is M for delta >= 2M
    assert reliability.daly_interval_s(100, 20000) == pytest.approx(
        2000 * (1 + math.sqrt(100 / 40000) / 3 + 100 / 40000 / 9) - 100
    )
    assert reliability.daly_interval_s(50000, 20000) == 20000


def test_daly_expected_wall_without_failures_limit():
    # M -> inf: E[T] -> Ts (1 + delta/tau)
    ts, tau, delta = 1000.0, 100.0, 10.0
    assert reliability.daly_expected_wall_s(ts, tau, delta, 60.0, 1e12) == pytest.approx(
        ts * (1 + delta / tau), rel=1e-6
    )


def test_interval_young_resolves_to_steps():
    s = tiny(
        checkpoint={"interval_steps": None, "interval": "young"},
        failures=[{"name": "j", "scope": "job", "mtbf_hours": 5.0}],
    )
    expected = round(math.sqrt(2 * 10.0 * 5 * 3600) / 1.0)
    assert reliability.interval_steps(s) == expected


def test_calculate_reference():
    c = calculator.calculate(load_scenario(ROOT / "scenarios/llama70b-1k.yaml").base)
    assert 15 < c.ideal_days < 17
    assert c.effective_tflops_per_gpu == pytest.approx(0.45 * 989.4)
    assert c.ideal_gpu_hours == pytest.approx(136 * 8 * c.ideal_days * 24)
    # Llama 3 mix, rescaled: ~0.47 interruptions per 1,000 GPU-days -> ~0.49/day on 1,024 GPUs
    assert 0.45 < c.failures_per_day < 0.52
