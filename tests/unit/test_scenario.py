"""Schema: the documented keys load; bad input is refused with the key path named."""

from __future__ import annotations

import pytest
import yaml

from sim.scenario import ScenarioError, load_document, load_scenario
from tests.conftest import ROOT, TINY, merge


def error_of(doc, overrides=None, params=None) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_document(doc, "x.yaml", overrides, params)
    return info.value


def test_every_shipped_scenario_loads():
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        loaded = load_scenario(path)
        assert loaded.base.description, f"{path} has no description line"


def test_defaults_fill_optional_sections():
    scenario = load_document(TINY).base
    assert scenario.recovery.policy == "restart"
    assert scenario.checkpoint.mode == "sync"
    assert scenario.cost.gpu_hour_usd == 2.5


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"model": {"paramz": 3}}, "model.paramz", "unknown key"),
        ({"cluster": {"nodes": "many"}}, "cluster.nodes", "integer"),
        (
            {"storage": {"checkpoint_tier": {"write_GB_s": -1}}},
            "storage.checkpoint_tier.write_GB_s",
            "greater than 0",
        ),
        ({"performance": {"mfu": 0}}, "performance.mfu", "greater than 0"),
        ({"checkpoint": {"interval_minutes": 5}}, "checkpoint", "exactly one of"),
        (
            {"storage": {"checkpoint_tier": {"capacity_TB": 0.01}}},
            "storage.checkpoint_tier.capacity_TB",
            "keep_last",
        ),
        ({"cluster": {"gpu": "H900"}}, "cluster.gpu", "unknown GPU"),
        (
            {"failures": [{"name": "g", "scope": "gpu"}]},
            "failures.0",
            "mtbf_hours or rate_per_1k_gpu_day",
        ),
        (
            {"failures": [{"name": "g", "scope": "gpu", "mtbf_hours": -5}]},
            "failures.0.mtbf_hours",
            "greater than 0",
        ),
        ({"parallelism": {"tensor": 3}}, "parallelism", "does not divide"),
        ({"repair": {"auto_minutes": 120}}, "repair", "not supported yet"),
        (
            {"checkpoint": {"memory_every_steps": 10}, "cluster": {"host_memory_GB": 8.0}},
            "checkpoint.memory_every_steps",
            "peer's copy",
        ),
        (
            {"storage": {"data_tier": "shared"}, "checkpoint": {"memory_every_steps": 10}},
            "storage.data_tier",
            "not supported yet",
        ),
        (
            {"failures": [{"name": "s", "scope": "gpu", "mtbf_hours": 5, "loses_data": True}]},
            "failures.0",
            "loses_data",
        ),
        ({"network": {"switch_radix": 63}}, "network.switch_radix", "even"),
        ({"network": {"nics_per_node": 3}}, "network.nics_per_node", "do not divide"),
        (
            {"performance": {"compute_efficiency": 0.5}},
            "performance",
            "exactly one of mfu or compute_efficiency",
        ),
        ({"stragglers": {"slowdown": 0.3}}, "stragglers", "not supported yet"),
        (
            {"storage": {"checkpoint_tier": {"kind": "nfs", "osts": 8}}},
            "storage.checkpoint_tier",
            "Lustre",
        ),
        (
            {"checkpoint": {"mode": "async"}, "cluster": {"host_memory_GB": 1.0}},
            "checkpoint.mode",
            "host RAM",
        ),
        ({"maintenance": {"every_days": 14}}, "maintenance", "not supported yet"),
    ],
)
def test_bad_input_names_the_key_path(change, path, words):
    err = error_of(merge(TINY, change))
    assert err.source == "x.yaml"
    assert err.path == path
    assert words in err.message


def test_missing_required_key():
    doc = merge(TINY, {})
    del doc["model"]["tokens"]
    err = error_of(doc)
    assert (err.path, err.message) == ("model.tokens", "required key is missing")


def test_set_overrides_any_key_and_list_items():
    loaded = load_document(
        merge(TINY, {"failures": [{"name": "g", "scope": "gpu", "mtbf_hours": 5}]}),
        overrides=[
            "checkpoint.interval_steps=500",
            "failures.0.repair_hours=1",
            "cluster.spare_nodes=3",
        ],
    )
    base = loaded.base
    assert base.checkpoint.interval_steps == 500
    assert base.failures[0].repair_hours == 1
    assert base.cluster.spare_nodes == 3


@pytest.mark.parametrize(
    ("override", "path", "words"),
    [
        ("checkpoint.interval_stepz=5", "checkpoint.interval_stepz", "does not exist"),
        ("failures.3.repair_hours=1", "failures.3", "out of range"),
        ("checkpoint.interval_steps=-5", "checkpoint.interval_steps", "greater than 0"),
        ("maintenance.every_days=7", "maintenance.every_days", "not supported yet"),
        ("checkpoint.interval_steps", "checkpoint.interval_steps", "KEY=VALUE"),
    ],
)
def test_bad_overrides(override, path, words):
    err = error_of(TINY, overrides=[override])
    assert err.path == path
    assert words in err.message


def test_sweep_is_a_cartesian_grid_of_validated_points():
    doc = merge(
        TINY,
        {
            "sweep": {
                "checkpoint.interval_steps": [50, 100],
                "recovery.policy": ["restart", "elastic"],
            }
        },
    )
    loaded = load_document(doc)
    assert len(loaded.points) == 4
    assert [p.params for p in loaded.points][1] == {
        "checkpoint.interval_steps": 50,
        "recovery.policy": "elastic",
    }
    assert loaded.points[1].scenario.recovery.policy == "elastic"
    assert loaded.swept_keys == ["checkpoint.interval_steps", "recovery.policy"]


def test_param_defines_a_sweep_from_the_command_line():
    loaded = load_document(TINY, params=["checkpoint.interval_steps=10,20,40"])
    assert [p.scenario.checkpoint.interval_steps for p in loaded.points] == [10, 20, 40]
    assert loaded.resolved["sweep"] == {"checkpoint.interval_steps": [10, 20, 40]}


def test_bad_sweep_value_names_the_point():
    err = error_of(merge(TINY, {"sweep": {"checkpoint.interval_steps": [10, -1]}}))
    assert err.path == "checkpoint.interval_steps"
    assert "sweep point" in err.message


def test_not_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nmodel: [unclosed\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "not valid YAML" in info.value.message and str(path) in str(info.value)


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("name: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ScenarioError):
        load_scenario(path)


def test_resolved_scenario_round_trips():
    loaded = load_document(TINY, overrides=["checkpoint.interval_steps=25"])
    again = load_document(yaml.safe_load(yaml.safe_dump(loaded.resolved)))
    assert again.base == loaded.base
