"""Calibration from more than one measured point (`performance.measured`): the compute
efficiency and the overlap fitted to all of them by least squares. Measurements made by
the model itself at known figures are recovered; an inconsistent point leaves residuals
no nearby pair of figures reduces."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sim.model import perf
from sim.model.safe_yaml import read_yaml
from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError
from tests.conftest import ROOT

STRONG = ROOT / "scenarios" / "published" / "megatron-core-gpt3-177b-strong.yaml"
NODES = (12, 72, 576)


def measured_at(efficiency: float, overlap: float) -> dict[int, float]:
    """What the model gives at each size with these figures (compute-efficiency mode)."""
    out = {}
    for nodes in NODES:
        doc = read_yaml(STRONG)
        doc["cluster"]["nodes"] = nodes
        doc["performance"] = {"compute_efficiency": efficiency, "overlap": overlap}
        out[nodes] = perf.mfu(load_document(doc, "measure").base)
    return out


def with_points(mfus: dict[int, float]) -> dict:
    doc = read_yaml(STRONG)
    doc["performance"] = {
        "mfu": mfus[12],
        "measured": [{"mfu": mfus[n], "at": {"cluster.nodes": n}} for n in NODES[1:]],
    }
    return doc


def test_the_figures_behind_three_measurements_are_recovered():
    truth = measured_at(0.62, 0.45)
    s = load_document(with_points(truth), "fit").base
    cal = perf.calibration(s)
    assert cal.compute_efficiency == pytest.approx(0.62, abs=1e-6)
    assert cal.overlap == pytest.approx(0.45, abs=1e-4)
    assert [p.measured_mfu for p in cal.points] == [truth[n] for n in NODES]
    assert max(abs(p.residual) for p in cal.points) < 1e-8
    assert cal.points[2].where == "cluster.nodes=576"
    # the fitted model gives the step everywhere, the file's own size included
    assert not cal.at_reference
    assert perf.mfu(s) == pytest.approx(truth[12], abs=1e-8)
    large = load_document(with_points(truth), "fit", ["cluster.nodes=576"]).base
    assert perf.mfu(large) == pytest.approx(truth[576], abs=1e-8)


def test_an_inconsistent_point_leaves_residuals_no_nearby_figures_reduce():
    mfus = measured_at(0.62, 0.45)
    mfus[72] += 0.01
    s = load_document(with_points(mfus), "fit").base
    cal = perf.calibration(s)
    residuals = np.array([p.residual for p in cal.points])
    assert np.abs(residuals).max() > 1e-3

    def squared(efficiency: float, overlap: float) -> float:
        total = 0.0
        for nodes in NODES:
            point = load_document(with_points(mfus), "fit", [f"cluster.nodes={nodes}"]).base
            parts = replace(perf.step_parts(point), overlap=overlap)
            total += (perf.compose_step(parts, efficiency).mfu - mfus[nodes]) ** 2
        return total

    best = squared(cal.compute_efficiency, cal.overlap)
    assert best == pytest.approx(float(residuals @ residuals), rel=1e-9)
    for de, do in ((1e-3, 0), (-1e-3, 0), (0, 1e-2), (0, -1e-2)):
        assert squared(cal.compute_efficiency + de, cal.overlap + do) >= best


def test_measured_points_need_mfu_and_valid_keys():
    doc = with_points(measured_at(0.62, 0.45))
    doc["performance"]["measured"][0]["at"] = {"cluster.gpus": 4}
    with pytest.raises(ScenarioError) as err:
        load_document(doc, "fit")
    assert "performance.measured" in err.value.path and "cluster.gpus" in err.value.message
    doc = with_points(measured_at(0.62, 0.45))
    doc["performance"]["mfu_scaling"] = "fixed"
    with pytest.raises(ScenarioError) as err:
        load_document(doc, "fit")
    assert err.value.path == "performance.measured"


def test_a_measured_point_that_cannot_run_is_named():
    doc = with_points(measured_at(0.62, 0.45))
    doc["performance"]["measured"][1]["at"] = {"cluster.nodes": 0}
    with pytest.raises(ScenarioError) as err:
        load_document(doc, "fit")
    assert "performance.measured.1: the configuration is not valid: cluster.nodes" in str(err.value)
    assert "\n" not in err.value.message
    doc["performance"]["measured"][1]["at"] = {"cluster.nodes": 13}
    with pytest.raises(ScenarioError) as err:
        load_document(doc, "fit")
    assert "performance.measured.1: the configuration cannot run" in err.value.message
