"""Holes a hostile pass found in the scenario schema and its loader (issue 35): booleans read
as numbers, a --set that a --param silently replaced, error texts that named internal field
names, and the time a large sweep takes to validate."""

from __future__ import annotations

import typing

import pytest

from sim.model.scenario import load_document
from sim.model.scenario_set import ScenarioError
from sim.model.schema import SWEEPABLE_ROOT, keys_of, submodel
from tests.conftest import TINY, merge

FAILURE = {"name": "g", "scope": "gpu", "mtbf_hours": 1000}


def error_of(doc, overrides=None, params=None) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_document(doc, "x.yaml", overrides, params)
    return info.value


def _admits_number(annotation) -> bool:
    """Written independently of the schema's own helper: whether a field takes numbers."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _admits_number(args[0])
    if origin is typing.Literal:
        return any(type(arg) in (int, float) for arg in args)
    if args and origin is not list and origin is not dict:
        return any(_admits_number(arg) for arg in args)
    return annotation in (int, float)


def numeric_keys(model=SWEEPABLE_ROOT, prefix="") -> list[str]:
    """Every dotted key of the schema that takes a number (list items as index 0)."""
    found = []
    for key, field in keys_of(model).items():
        path = f"{prefix}{key}"
        sub = submodel(field.annotation)
        if sub is not None:
            is_list = "list[" in str(field.annotation)
            found += numeric_keys(sub, f"{path}.0." if is_list else f"{path}.")
        elif _admits_number(field.annotation):
            found.append(path)
    return found


NUMERIC_KEYS = numeric_keys()


def test_the_walk_finds_the_keys_of_the_issue():
    for key in ("model.params", "parallelism.zero_stage", "cluster.node_rate_cv"):
        assert key in NUMERIC_KEYS
    assert len(NUMERIC_KEYS) > 100  # every section's numbers


def document_with(key: str, value) -> dict:
    """TINY with `key` set to `value`, its list items made (one failure class, one
    measured point) so that the key exists."""
    doc = merge(TINY, {"failures": [dict(FAILURE)]})
    doc["performance"]["measured"] = [{"mfu": 0.5}]
    if key.rpartition(".")[2] in ("osts", "ost_GB_s"):  # a Lustre tier given by its OSTs
        tier = key.rpartition(".")[0].split(".")[-1]
        doc["storage"][tier] = {"kind": "lustre", "osts": 4, "capacity_TB": 1}
    node = doc
    parts = key.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if not isinstance(node, dict | list):
            raise AssertionError(key)
    node[parts[-1]] = value
    return doc


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("key", NUMERIC_KEYS)
def test_a_boolean_is_no_number_in_any_numeric_key(key, value):
    error = error_of(document_with(key, value))
    assert error.path == key, (error.path, error.message)
    assert "number" in error.message and str(value).lower() in error.message


@pytest.mark.parametrize(
    "assignment",
    ["model.params=true", "parallelism.zero_stage=true", "cluster.node_rate_cv=false"],
)
def test_the_issues_overrides_are_refused(assignment):
    key = assignment.partition("=")[0]
    error = error_of(TINY, overrides=[assignment])
    assert error.path == key and "number" in error.message
    error = error_of(TINY, params=[assignment.replace("=", "=0.5,")])
    assert error.path == key and "sweep point" in error.message


def test_a_boolean_gpus_per_node_names_that_key_only():
    error = error_of(merge(TINY, {"cluster": {"gpus_per_node": True}}))
    assert error.path == "cluster.gpus_per_node"
    assert "nics_per_node" not in error.message


def test_numbers_and_booleans_still_load_where_documented():
    scenario = load_document(
        merge(TINY, {"checkpoint": {"validate": True}, "cluster": {"node_rate_cv": 0}})
    ).base
    assert scenario.checkpoint.validate_writes is True and scenario.cluster.node_rate_cv == 0


# --------------------------------------------------------------------------- texts


def test_an_unknown_key_lists_the_documented_names():
    error = error_of(merge(TINY, {"checkpoint": {"validate_writes": True}}))
    assert error.path == "checkpoint.validate_writes"
    assert "validate," in error.message + "," and "validate_writes," not in error.message + ","
    assert "interval_steps" in error.message


# --------------------------------------------------------------------------- --set and --param


@pytest.mark.parametrize(
    "overrides, params, key",
    [
        (["checkpoint.interval_steps=5"], ["checkpoint.interval_steps=10,20"], None),
        (["cluster.spare_nodes=3"], ["cluster=[{gpu: H100-SXM, nodes: 2}]"], None),
        (["storage.checkpoint_tier.kind=nfs"], ["storage.checkpoint_tier.kind=lustre,weka"], None),
    ],
)
def test_a_set_key_that_a_param_sweeps_is_refused_naming_both(overrides, params, key):
    error = error_of(TINY, overrides=overrides, params=params)
    set_key = overrides[0].partition("=")[0]
    param_key = params[0].partition("=")[0]
    assert error.path == set_key
    assert "--set" in error.message and "--param" in error.message
    assert param_key in error.message


def test_a_param_inside_a_set_section_still_sweeps_it():
    tier = "{kind: lustre, write_GB_s: 1, read_GB_s: 2, capacity_TB: 1, latency_ms: 0}"
    loaded = load_document(
        TINY,
        overrides=[f"storage.checkpoint_tier={tier}"],
        params=["storage.checkpoint_tier.write_GB_s=1,3"],
    )
    assert [p.scenario.storage.checkpoint_tier.write_GB_s for p in loaded.points] == [1, 3]


# --------------------------------------------------------------------------- a large sweep


def test_a_large_sweep_validates_the_sections_it_leaves_alone_once():
    # 10,000 points took over a minute to validate: a deep copy and a whole validation of
    # the document per point; the sections no swept key touches are now validated once
    # and shared (frozen) by every point (benchmarks/sweep_validation.py times it)
    doc = merge(TINY, {"sweep": {"checkpoint.interval_steps": list(range(1, 101)),
                                 "cluster.spare_nodes": list(range(100))}})  # fmt: skip
    loaded = load_document(doc)
    assert len(loaded.points) == 10_000
    first, point = loaded.points[0].scenario, loaded.points[4_321]
    assert point.params == {"checkpoint.interval_steps": 44, "cluster.spare_nodes": 21}
    # each point is the scenario its document validates to on its own
    alone = merge(TINY, {"checkpoint": {"interval_steps": 44}, "cluster": {"spare_nodes": 21}})
    assert point.scenario == load_document(alone).base
    assert point.scenario.model_fields_set == load_document(alone).base.model_fields_set
    for section in ("model", "storage", "recovery", "simulation"):
        assert getattr(point.scenario, section) is getattr(first, section), section
    assert point.scenario.checkpoint is not first.checkpoint


def test_a_swept_cluster_still_gives_its_network_one_nic_per_gpu():
    loaded = load_document(TINY, params=["cluster.gpus_per_node=1,2,4"])
    assert [p.scenario.network.nics_per_node for p in loaded.points] == [1, 2, 4]


def test_a_swept_kind_still_restarts_its_tier_and_a_swept_configuration_records_mfu_at():
    loaded = load_document(TINY, params=["storage.checkpoint_tier.kind=lustre,nfs"])
    tiers = [p.scenario.storage.checkpoint_tier for p in loaded.points]
    assert tiers[0].write_GB_s == 1.0 and tiers[1].kind == "nfs" and tiers[1].write_GB_s != 1.0
    loaded = load_document(TINY, params=["cluster.nodes=2,4"])
    assert [p.scenario.performance.mfu_at for p in loaded.points] == [{}, {"cluster.nodes": 2}]


def test_an_invalid_base_still_gets_each_points_own_message():
    doc = merge(TINY, {"sweep": {"model.params": [1e9, -1]}})
    del doc["model"]["params"]
    error = error_of(doc)
    assert error.path == "model.params" and "sweep point" in error.message


def test_a_set_key_that_the_files_sweep_gives_says_the_sweep_wins():
    doc = merge(TINY, {"sweep": {"checkpoint.interval_steps": [10, 20]}})
    loaded = load_document(doc, overrides=["checkpoint.interval_steps=5"])
    assert [p.scenario.checkpoint.interval_steps for p in loaded.points] == [10, 20]
    assert loaded.notes == [
        "checkpoint.interval_steps (--set) is replaced at every point by the file's sweep of "
        "checkpoint.interval_steps; --param checkpoint.interval_steps=V1,V2,... replaces the "
        "sweep's values"
    ]
