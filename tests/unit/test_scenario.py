"""Schema: the documented keys load; bad input is refused with the key path named."""

from __future__ import annotations

import pytest
import yaml

from sim.model.hardware import TIERS
from sim.model.scenario import dump_resolved, load_document, load_scenario
from sim.model.scenario_set import MAX_FILE_BYTES, ScenarioError
from sim.model.schema import MAX_SEED
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
            "greater than or equal to 0.001",
        ),
        ({"performance": {"mfu": 0}}, "performance.mfu", "greater than or equal to 0.01"),
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
            "greater than or equal to 0.001",
        ),
        ({"parallelism": {"tensor": 3}}, "parallelism", "does not divide"),
        ({"repair": {"escalate_prob": 1.5}}, "repair.escalate_prob", "less than or equal to 1"),
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
        ({"stragglers": {"slowdown": 1.5}}, "stragglers.slowdown", "less than 1"),
        (
            {"stragglers": {"slowdown": 0.5, "slowdown_max": 0.2}},
            "stragglers.slowdown_max",
            "at least",
        ),
        (
            {"oncall": {"workday_start_hour": 18, "workday_end_hour": 9}},
            "oncall.workday_end_hour",
            "after",
        ),
        ({"simulation": {"start_weekday": "someday"}}, "simulation.start_weekday", "monday"),
        (
            {"checkpoint": {"interval_steps": 10, "corrupt_prob": 1.0}},
            "checkpoint.corrupt_prob",
            "less than 1",
        ),
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
        ({"maintenance": {"every_days": 0}}, "maintenance.every_days", "greater than 0"),
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
        ("maintenance.every_days=-7", "maintenance.every_days", "greater than 0"),
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


# --------------------------------------------------------------------------- adversarial input


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"model": {"tokens": float("inf")}}, "model.tokens", "finite"),
        ({"model": {"params": float("nan")}}, "model.params", "finite"),
        ({"model": {"params": "inf"}}, "model.params", "finite"),
        ({"model": {"params": 1e16}}, "model.params", "less than or equal to 1000000000000000"),
        ({"model": {"tokens": 1e18}}, "model.tokens", "less than or equal to"),
        ({"model": {"global_batch_tokens": 10**30}}, "model.global_batch_tokens", "10000000000"),
        (
            {"checkpoint": {"interval_steps": None, "interval_minutes": float("inf")}},
            "checkpoint.interval_minutes",
            "finite",
        ),
        (
            {"checkpoint": {"interval_steps": None, "interval_minutes": 1e9}},
            "checkpoint.interval_minutes",
            "less than or equal to",
        ),
        ({"performance": {"mfu": 1e-300}}, "performance.mfu", "0.01"),
        (
            {"storage": {"checkpoint_tier": {"write_GB_s": 1e-300}}},
            "storage.checkpoint_tier.write_GB_s",
            "0.001",
        ),
        (
            {"storage": {"checkpoint_tier": {"read_GB_s": 1e300}}},
            "storage.checkpoint_tier.read_GB_s",
            "10000000",
        ),
        (
            {"failures": [{"name": "g", "scope": "gpu", "rate_per_1k_gpu_day": 1e300}]},
            "failures.0.rate_per_1k_gpu_day",
            "1000000",
        ),
        (
            {"failures": [{"name": "g", "scope": "gpu", "mtbf_hours": 1e-300}]},
            "failures.0.mtbf_hours",
            "0.001",
        ),
        (
            {
                "failures": [
                    {
                        "name": "g",
                        "scope": "gpu",
                        "mtbf_hours": 5,
                        "distribution": "weibull",
                        "weibull_shape": 1e-300,
                    }
                ]
            },
            "failures.0.weibull_shape",
            "greater than or equal to",
        ),
        ({"simulation": {"seed": 2**64}}, "simulation.seed", str(MAX_SEED)),
        ({"simulation": {"seed": MAX_SEED + 1}}, "simulation.seed", str(MAX_SEED)),
        ({"simulation": {"horizon_days": 1e6}}, "simulation.horizon_days", "less than"),
        ({"cluster": {"nodes": 10**7}}, "cluster.nodes", "1000000"),
        ({"name": "a" * 65}, "name", "at most 64 characters"),
        (
            {"failures": [{"name": "c", "scope": "link", "mtbf_hours": 5, "replace": True}]},
            "failures.0.replace",
            "replace: true needs scope gpu, node or switch",
        ),
        (
            {"failures": [{"name": "c", "scope": "storage", "mtbf_hours": 5, "replace": True}]},
            "failures.0.replace",
            "has no node to swap",
        ),
        (
            {"failures": [{"name": "c", "scope": "job", "mtbf_hours": 5, "replace": True}]},
            "failures.0.replace",
            "has no node to swap",
        ),
    ],
)
def test_numbers_are_bounded_and_finite(change, path, words):
    err = error_of(merge(TINY, change))
    assert err.path == path
    assert words in err.message


def test_bounds_admit_the_extremes_tests_and_scenarios_use():
    doc = merge(
        TINY,
        {
            "failures": [
                {"name": "never", "scope": "gpu", "mtbf_hours": 1e15},
                {"name": "often", "scope": "node", "mtbf_hours": 1e-3},
            ],
            "simulation": {"seed": MAX_SEED},
        },
    )
    base = load_document(doc).base
    assert base.simulation.seed == MAX_SEED
    assert [f.replaces_nodes for f in base.failures] == [True, True]


def test_link_and_storage_failures_default_to_no_replacement():
    doc = merge(
        TINY,
        {
            "failures": [
                {"name": "c", "scope": "link", "mtbf_hours": 5},
                {"name": "s", "scope": "storage", "mtbf_hours": 5, "replace": False},
            ]
        },
    )
    assert [f.replaces_nodes for f in load_document(doc).base.failures] == [False, False]


def test_sweep_must_be_a_mapping():
    err = error_of(merge(TINY, {"sweep": ["checkpoint.interval_steps", 5]}))
    assert err.path == "sweep" and "mapping" in err.message


def test_sweep_grid_is_capped_before_expanding():
    values = list(range(1, 101))
    keys = [
        "checkpoint.interval_steps",
        "cluster.spare_nodes",
        "checkpoint.keep_last",
        "recovery.restart_minutes",
    ]
    err = error_of(merge(TINY, {"sweep": dict.fromkeys(keys, values)}))
    assert err.path == "sweep" and "100,000,000 sweep points" in err.message


def test_long_values_are_echoed_short():
    err = error_of(merge(TINY, {"sweep": {"description": [list(range(100_000))]}}))
    assert len(str(err)) < 600


@pytest.mark.parametrize(
    ("param", "path", "words"),
    [
        ("model.params=[1,2", "model.params", "not valid YAML"),
        ('description="abc', "description", "not valid YAML"),
        ("description=!!python/object/apply:os.system [ls]", "description", "constructor"),
        ("checkpoint.interval_steps=", "checkpoint.interval_steps", "empty item"),
        ("checkpoint.interval_steps=500,,1000", "checkpoint.interval_steps", "empty item"),
        ("checkpoint.interval_steps=500, ", "checkpoint.interval_steps", "empty item"),
    ],
)
def test_bad_param_values(param, path, words):
    err = error_of(TINY, params=[param])
    assert err.path == path
    assert words in err.message


def test_param_twice_for_one_key_is_refused_but_may_override_the_files_sweep():
    err = error_of(TINY, params=["checkpoint.interval_steps=5", "checkpoint.interval_steps=10"])
    assert err.path == "checkpoint.interval_steps" and "twice" in err.message
    doc = merge(TINY, {"sweep": {"checkpoint.interval_steps": [5, 10]}})
    loaded = load_document(doc, params=["checkpoint.interval_steps=20,40"])
    assert [p.scenario.checkpoint.interval_steps for p in loaded.points] == [20, 40]


def test_bad_set_value_is_refused():
    err = error_of(TINY, overrides=["cluster={nodes: 1, nodes: 2}"])
    assert err.path == "cluster" and "duplicate key" in err.message


def write(tmp_path, text: str | bytes):
    path = tmp_path / "s.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def tiny_yaml() -> str:
    return yaml.safe_dump(TINY, sort_keys=False)


@pytest.mark.parametrize(
    ("content", "path", "words"),
    [
        ("latin-1", "", "not UTF-8"),
        ("utf-16", "", "UTF-16"),
        ("binary", "", "NUL"),
        ("duplicate", "cluster.nodes", "duplicate key 'nodes'"),
        ("deep", "", "nest"),  # libyaml may say "maximum nesting depth" first
        ("deep-block", "", "nested deeper"),
        ("bomb", "", "expands to more than"),
        ("recursive", "", "recursive"),
        ("huge", "", "larger than"),
    ],
)
def test_bad_files(tmp_path, content, path, words):
    text = tiny_yaml()
    data: str | bytes = {
        "latin-1": lambda: text.replace("tiny", "tin\xe9").encode("latin-1"),
        "utf-16": lambda: text.encode("utf-16"),
        "binary": lambda: bytes(range(256)) * 4,
        "duplicate": lambda: text.replace("  nodes: 2\n", "  nodes: 2\n  nodes: 3\n"),
        "deep": lambda: text + "extra: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "deep-block": lambda: (
            text
            + "extra:\n"
            + "".join("  " * i + f"k{i}:\n" for i in range(100))
            + "  " * 100
            + "v: 1\n"
        ),
        "bomb": lambda: (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"a{i}: &a{i} [{', '.join(['*a' if i == 1 else f'*a{i - 1}'] * 10)}]\n"
                for i in range(1, 9)
            )
            + text
        ),
        "recursive": lambda: text + "extra: &r [1, *r]\n",
        "huge": lambda: text + "extra: '" + "x" * MAX_FILE_BYTES + "'\n",
    }[content]()
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, data))
    assert info.value.path == path
    assert words in info.value.message
    assert len(str(info.value)) < 400


def test_duplicate_top_level_key_names_its_line(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, tiny_yaml() + "name: again\n"))
    assert info.value.path == "name" and "first given at line 1" in info.value.message


def test_a_utf8_bom_and_yaml_merge_keys_still_load(tmp_path):
    assert load_scenario(write(tmp_path, b"\xef\xbb\xbf" + tiny_yaml().encode())).name == "tiny"
    merged = "defaults: &d {rescale_minutes: 3}\n" + tiny_yaml().replace(
        "recovery:\n", "recovery:\n  <<: *d\n"
    )
    doc = yaml.safe_load(merged)
    del doc["defaults"]
    with pytest.raises(ScenarioError) as info:  # the anchor's own key is not a scenario key
        load_scenario(write(tmp_path, merged))
    assert info.value.path == "defaults"
    assert load_document(doc).base.recovery.rescale_minutes == 3


# --------------------------------------------------------------------------- storage tier kinds


def tier_figures(tier) -> dict:
    return {k: getattr(tier, k) for k in ("write_GB_s", "read_GB_s", "capacity_TB", "latency_ms")}


def preset_figures(kind: str) -> dict:
    return {
        k: getattr(TIERS[kind], k) for k in ("write_GB_s", "read_GB_s", "capacity_TB", "latency_ms")
    }


def round_trip(loaded):
    return load_document(yaml.safe_load(dump_resolved(loaded)), "resolved.yaml")


def test_set_kind_starts_the_tier_from_the_new_preset_and_says_what_it_dropped():
    # TINY states all four figures for its lustre tier: nfs must not inherit them
    loaded = load_document(TINY, overrides=["storage.checkpoint_tier.kind=nfs"])
    tier = loaded.base.storage.checkpoint_tier
    assert tier.kind == "nfs" and tier_figures(tier) == preset_figures("nfs")
    assert loaded.notes == [
        "storage.checkpoint_tier.kind=nfs: starts from the nfs preset; dropped the file's "
        "write_GB_s=1, read_GB_s=2, capacity_TB=1, latency_ms=0"
    ]
    # the resolved document is the run: the figures are gone from it, nothing is dropped again
    assert loaded.resolved["storage"]["checkpoint_tier"] == {"kind": "nfs"}
    again = round_trip(loaded)
    assert again.base == loaded.base and again.notes == []


@pytest.mark.parametrize("order", [1, -1])
def test_figures_the_command_sets_win_over_the_new_preset(order):
    overrides = ["storage.checkpoint_tier.kind=weka", "storage.checkpoint_tier.write_GB_s=7"]
    loaded = load_document(TINY, overrides=overrides[::order])
    tier = loaded.base.storage.checkpoint_tier
    assert tier_figures(tier) == {**preset_figures("weka"), "write_GB_s": 7}
    (note,) = loaded.notes
    assert "write_GB_s" not in note and "read_GB_s=2, capacity_TB=1, latency_ms=0" in note
    assert round_trip(loaded).base == loaded.base


def test_the_same_kind_or_no_kind_change_keeps_the_files_figures():
    for overrides in (["storage.checkpoint_tier.kind=lustre"], ["storage.client_GB_s_per_node=9"]):
        loaded = load_document(TINY, overrides=overrides)
        assert tier_figures(loaded.base.storage.checkpoint_tier) == {
            "write_GB_s": 1,
            "read_GB_s": 2,
            "capacity_TB": 1,
            "latency_ms": 0,
        }
        assert loaded.notes == []
    # a file that names no kind has the default one (lustre): lustre is no change either
    doc = merge(TINY, {})
    del doc["storage"]["checkpoint_tier"]["kind"]
    assert load_document(doc, overrides=["storage.checkpoint_tier.kind=lustre"]).notes == []
    assert load_document(doc, overrides=["storage.checkpoint_tier.kind=gpfs"]).notes != []


def test_a_swept_kind_starts_each_point_from_its_preset():
    loaded = load_document(TINY, params=["storage.checkpoint_tier.kind=lustre,nfs,weka"])
    tiers = [p.scenario.storage.checkpoint_tier for p in loaded.points]
    assert tier_figures(tiers[0]) == tier_figures(load_document(TINY).base.storage.checkpoint_tier)
    assert tier_figures(tiers[1]) == preset_figures("nfs")
    assert tier_figures(tiers[2]) == preset_figures("weka")
    assert loaded.notes == [
        f"storage.checkpoint_tier.kind={kind} (sweep): starts from the {kind} preset; "
        "dropped the file's write_GB_s=1, read_GB_s=2, capacity_TB=1, latency_ms=0"
        for kind in ("nfs", "weka")
    ]
    # the file's figures stay in the resolved document (the lustre point needs them), and
    # loading it again applies the same rule: the same points
    assert loaded.resolved["storage"]["checkpoint_tier"]["write_GB_s"] == 1
    again = round_trip(loaded)
    assert [p.scenario for p in again.points] == [p.scenario for p in loaded.points]
    assert again.notes == loaded.notes


def test_a_files_own_sweep_of_kind_and_figures_the_point_sets():
    doc = merge(
        TINY,
        {
            "sweep": {
                "storage.checkpoint_tier.kind": ["nfs", "object"],
                "storage.checkpoint_tier.read_GB_s": [3, 4],
            }
        },
    )
    loaded = load_document(doc)
    for point in loaded.points:
        tier = point.scenario.storage.checkpoint_tier
        kind, read = point.params.values()
        assert tier_figures(tier) == {**preset_figures(kind), "read_GB_s": read}
    assert all("read_GB_s" not in note for note in loaded.notes)


def test_a_figure_set_with_a_swept_kind_holds_at_every_point_and_in_the_resolved_document():
    loaded = load_document(
        TINY,
        overrides=["storage.checkpoint_tier.write_GB_s=7"],
        params=["storage.checkpoint_tier.kind=lustre,nfs"],
    )
    assert [p.scenario.storage.checkpoint_tier.write_GB_s for p in loaded.points] == [7, 7]
    assert loaded.points[1].scenario.storage.checkpoint_tier.read_GB_s == TIERS["nfs"].read_GB_s
    assert loaded.points[0].scenario.storage.checkpoint_tier.read_GB_s == 2  # the file's lustre
    assert loaded.resolved["sweep"]["storage.checkpoint_tier.write_GB_s"] == [7]
    assert loaded.notes[0] == (
        "storage.checkpoint_tier.write_GB_s=7 (--set) holds at every point of the "
        "storage.checkpoint_tier.kind sweep: it is swept with this one value"
    )
    again = round_trip(loaded)
    assert [p.scenario for p in again.points] == [p.scenario for p in loaded.points]
    assert [p.params for p in again.points] == [p.params for p in loaded.points]


def test_a_swept_kind_equal_to_the_files_keeps_its_figures_despite_a_set_kind():
    # the sweep sets the kind at every point, so the --set kind holds at none: the sweep
    # starts from the file's tier, and its point of the file's kind (lustre) keeps the
    # file's figures (docs/scenarios.md), the others start from their preset
    file_figures = tier_figures(load_document(TINY).base.storage.checkpoint_tier)
    # (the file's sweep: a --param of the kind beside a --set of it is refused, as for any key)
    loaded = load_document(
        merge(TINY, {"sweep": {"storage.checkpoint_tier.kind": ["lustre", "weka", "nfs"]}}),
        overrides=["storage.checkpoint_tier.kind=nfs"],
    )
    tiers = [p.scenario.storage.checkpoint_tier for p in loaded.points]
    assert [t.kind for t in tiers] == ["lustre", "weka", "nfs"]
    assert [tier_figures(t) for t in tiers] == [
        file_figures,
        preset_figures("weka"),
        preset_figures("nfs"),
    ]
    assert loaded.notes[0] == (
        "storage.checkpoint_tier.kind=nfs (--set) is replaced at every point by the "
        "storage.checkpoint_tier.kind sweep: a point of the file's kind (lustre) keeps the "
        "file's figures"
    )
    # the resolved document is the file's tier and the sweep: loading it gives the same points
    assert loaded.resolved["storage"]["checkpoint_tier"] == TINY["storage"]["checkpoint_tier"]
    again = round_trip(loaded)
    assert [p.scenario for p in again.points] == [p.scenario for p in loaded.points]
    # a figure --set as well holds at every point, the file's kind included
    figure = load_document(
        merge(TINY, {"sweep": {"storage.checkpoint_tier.kind": ["lustre", "weka"]}}),
        overrides=["storage.checkpoint_tier.kind=nfs", "storage.checkpoint_tier.write_GB_s=7"],
    )
    assert [tier_figures(p.scenario.storage.checkpoint_tier) for p in figure.points] == [
        {**file_figures, "write_GB_s": 7},
        {**preset_figures("weka"), "write_GB_s": 7},
    ]
    again = round_trip(figure)
    assert [p.scenario for p in again.points] == [p.scenario for p in figure.points]


def test_the_backup_tier_kind_starts_from_its_preset_too():
    doc = merge(
        TINY,
        {"storage": {"backup": {"write_GB_s": 1.5, "read_GB_s": 2.5, "latency_ms": 9, "every": 3}}},
    )
    assert load_document(doc).base.storage.backup.kind == "object"  # the default kind
    loaded = load_document(doc, overrides=["storage.backup.kind=gpfs"])
    backup = loaded.base.storage.backup
    assert tier_figures(backup) == preset_figures("gpfs") and backup.every == 3
    assert loaded.notes == [
        "storage.backup.kind=gpfs: starts from the gpfs preset; dropped the file's "
        "write_GB_s=1.5, read_GB_s=2.5, latency_ms=9"
    ]
    swept = load_document(doc, params=["storage.backup.kind=object,nfs"])
    assert swept.points[0].scenario.storage.backup.write_GB_s == 1.5
    assert tier_figures(swept.points[1].scenario.storage.backup) == preset_figures("nfs")


def test_lustre_osts_go_with_the_lustre_kind():
    doc = merge(TINY, {})
    doc["storage"]["checkpoint_tier"] = {
        "kind": "lustre",
        "osts": 4,
        "ost_GB_s": 2,
        "capacity_TB": 1,
    }
    assert load_document(doc).base.storage.checkpoint_tier.write_GB_s == 8
    loaded = load_document(doc, overrides=["storage.checkpoint_tier.kind=gpfs"])
    tier = loaded.base.storage.checkpoint_tier
    assert tier_figures(tier) == preset_figures("gpfs") and tier.osts is None
    assert "osts=4, ost_GB_s=2" in loaded.notes[0]


def test_a_whole_tier_given_anew_drops_nothing_more():
    loaded = load_document(TINY, overrides=["storage.checkpoint_tier={kind: nfs, write_GB_s: 3}"])
    assert tier_figures(loaded.base.storage.checkpoint_tier) == {
        **preset_figures("nfs"),
        "write_GB_s": 3,
    }
    assert loaded.notes == []


def test_a_preset_too_small_for_keep_last_is_refused_with_the_key_path():
    doc = merge(
        TINY,
        {
            "checkpoint": {"state_bytes_per_param": 1000, "keep_last": 600},  # 600 TB kept
            "storage": {"checkpoint_tier": {"capacity_TB": 1000}},
        },
    )
    assert load_document(doc).base.storage.checkpoint_tier.capacity_TB == 1000
    assert TIERS["nfs"].capacity_TB < 600
    err = error_of(doc, overrides=["storage.checkpoint_tier.kind=nfs"])
    assert err.path == "storage.checkpoint_tier.capacity_TB" and "keep_last" in err.message
    assert "600 TB, more than the tier's 500 TB" in err.message
    # a sweep point whose tier cannot hold what it keeps cannot run: it is marked
    # infeasible, the others run
    swept = load_document(doc, params=["storage.checkpoint_tier.kind=lustre,nfs"])
    assert swept.points[0].infeasible is None
    assert swept.points[1].infeasible == (
        "storage.checkpoint_tier.capacity_TB: checkpoint.keep_last=600 checkpoints of 1 TB "
        "need 600 TB, more than the tier's 500 TB"
    )
    # the file's capacity, given again on the command line, wins
    ok = load_document(
        doc,
        overrides=["storage.checkpoint_tier.kind=nfs", "storage.checkpoint_tier.capacity_TB=1000"],
    )
    assert ok.base.storage.checkpoint_tier.capacity_TB == 1000


# --------------------------------------------------------------------------- issue 27, section 5

FAILURE = {"name": "node", "scope": "node", "mtbf_hours": 1000.0}


@pytest.mark.parametrize(
    "change, path",
    [
        ({"checkpoint": {"validate": "true"}}, "checkpoint.validate"),
        ({"checkpoint": {"validate": 1}}, "checkpoint.validate"),
        ({"checkpoint": {"validate": 0.0}}, "checkpoint.validate"),
        ({"failures": [{**FAILURE, "silent": "no"}]}, "failures.0.silent"),
        ({"failures": [{**FAILURE, "while_idle": 1}]}, "failures.0.while_idle"),
        ({"failures": [{**FAILURE, "replace": "yes"}]}, "failures.0.replace"),
    ],
)
def test_booleans_are_true_or_false_only(change, path):
    error = error_of(merge(TINY, change))
    assert error.path == path and "boolean" in error.message


@pytest.mark.parametrize("text", ["yes", "on", "y", "No", "off"])
def test_yaml_1_1_words_are_not_booleans(tmp_path, text):
    doc = yaml.safe_dump(merge(TINY, {"checkpoint": {"validate": "PLACEHOLDER"}}))
    path = tmp_path / "s.yaml"
    path.write_text(doc.replace("'PLACEHOLDER'", text).replace("PLACEHOLDER", text))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.path == "checkpoint.validate"
    assert load_scenario(path, ["checkpoint.validate=true"]).base.checkpoint.validate_writes


def test_a_sweep_whose_values_load_as_one_value_is_refused():
    error = error_of(merge(TINY, {"sweep": {"checkpoint.interval_steps": [100, 1.0e2, 200]}}))
    assert error.path == "checkpoint.interval_steps" and "twice" in error.message
    # the default written out, and left out: one scenario
    error = error_of(merge(TINY, {"sweep": {"cost": [{"gpu_hour_usd": 2.5}, {}]}}))
    assert error.path == "cost" and "load as the same value" in error.message
    assert "points 0 and 1" in error.message


def test_an_unknown_storage_kind_is_one_message():
    tier = {"kind": "wekafs"}
    error = error_of(merge(TINY, {"storage": {"checkpoint_tier": None}}) | {
        "storage": {"checkpoint_tier": tier, "client_GB_s_per_node": 100.0}})  # fmt: skip
    assert error.path == "storage.checkpoint_tier.kind"
    assert "wekafs" in error.message and "missing" not in error.message


@pytest.mark.parametrize("text", ["two\nlines", "a\rb", "a\u2028b"])
def test_a_description_is_one_line(text):
    error = error_of(merge(TINY, {"description": text}))
    assert error.path == "description" and "one line" in error.message
