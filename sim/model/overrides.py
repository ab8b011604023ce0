"""`--set` and `--param` on a scenario document: each assignment parsed and its key path
checked against the schema, the sweep's keys checked (sweepable, exclusive, distinct
points), and a storage tier whose kind an override or the sweep changes restarted from
its preset, with a note for the user.
"""

from __future__ import annotations

import copy
import json
import typing
from typing import Any

import yaml

from sim.model.hardware import TIERS
from sim.model.safe_yaml import parse_yaml, yaml_problem
from sim.model.scenario_set import Point, ScenarioError
from sim.model.schema import (
    MAX_ECHO,
    NOT_SWEEPABLE,
    SWEEPABLE_ROOT,
    BackupConfig,
    TierConfig,
    echo,
    keys_of,
    remove_key,
    set_key,
    submodel,
)


def split_assignment(source: str, item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise ScenarioError(
            source,
            item.strip()[: 2 * MAX_ECHO],
            f"{flag} expects KEY=VALUE, e.g. checkpoint.interval_steps=500",
        )
    key, _, text = item.partition("=")
    return key.strip(), text


def parse_value(source: str, key: str, text: str, flag: str, whole: str | None = None) -> Any:
    """A command-line value as YAML (same limits as a file; no tags beyond safe ones).
    `whole`: the --param text this comma-separated item came from."""
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        _, problem = yaml_problem(exc)
        what = f"{flag} value {echo(text)}"
        if whole is not None and whole != text:
            what = f"{flag} item {echo(text)} (items are split at commas)"
        raise ScenarioError(source, key, f"{what}: {problem}") from None


def check_path(source: str, key: str, raw: dict[str, Any], origin: str) -> None:
    """A dotted key must name a key of the schema; list items by an existing index."""
    parts = key.split(".")
    model: Any = SWEEPABLE_ROOT
    node: Any = raw
    walked: list[str] = []
    for part in parts:
        walked.append(part)
        here = ".".join(walked)
        if model is None:
            raise ScenarioError(
                source, here, f"{origin} names a key that does not exist in the schema"
            )
        if isinstance(model, list):
            if not part.isdigit():
                raise ScenarioError(source, here, f"{origin}: expected a list index, got {part!r}")
            items = node if isinstance(node, list) else []
            appending = int(part) == len(items) and here == key  # --set failures.N={...} appends
            if int(part) >= len(items) and not appending:
                raise ScenarioError(
                    source,
                    here,
                    f"{origin}: list index {part} is out of range ({len(items)} items)",
                )
            model, node = model[0], (None if appending else items[int(part)])
            continue
        fields = keys_of(model)
        if part not in fields:
            raise ScenarioError(
                source,
                here,
                f"{origin} names a key that does not exist; expected one of: {', '.join(fields)}",
            )
        annotation = fields[part].annotation
        sub = submodel(annotation)
        is_list = typing.get_origin(annotation) is list or any(
            typing.get_origin(a) is list for a in typing.get_args(annotation)
        )
        node = node.get(part) if isinstance(node, dict) else None
        model = [sub] if is_list else sub


def check_sweepable(source: str, key: str, values: list[Any]) -> None:
    """A swept key must be one whose values can differ between points (not the seed, the
    replicas or the executor: every point shares them), and each value is given once."""
    for fixed in NOT_SWEEPABLE:
        if key == fixed or fixed.startswith(key + "."):
            raise ScenarioError(
                source,
                key,
                f"{fixed} cannot be swept (--param, plan --vary or sweep:): every sweep point "
                "runs the same seed, replicas and executor (replica r draws the same random "
                "numbers at every point). Set it once with --set or the command's option "
                "(--seed, --replicas, --executor), or start separate runs",
            )
    seen: dict[str, int] = {}
    for i, value in enumerate(values):
        try:
            token = json.dumps(value, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            token = repr(value)
        if isinstance(value, float) and value.is_integer():
            token = repr(int(value))  # 500 and 500.0 are one value
        if token in seen:
            raise ScenarioError(
                source,
                key,
                f"the sweep gives the value {echo(value)} twice (items {seen[token] + 1} and "
                f"{i + 1}): each value once, or the points would repeat each other",
            )
        seen[token] = i


def check_distinct_points(source: str, points: list[Point]) -> None:
    """Two sweep points that load as the same scenario (values written differently that
    mean one value, e.g. 1e3 and 1000 of a count) are refused, as a value given twice is:
    the points would repeat each other."""
    seen: dict[str, Point] = {}
    for point in points:
        token = point.scenario.model_dump_json()
        first = seen.setdefault(token, point)
        if first is point:
            continue
        key = next((k for k in point.params if point.params[k] != first.params[k]), "sweep")
        raise ScenarioError(
            source,
            key,
            f"the sweep's values {echo(first.params.get(key))} and "
            f"{echo(point.params.get(key))} load as the same value (sweep points "
            f"{first.index} and {point.index} are one scenario): each value once, or the "
            "points would repeat each other",
        )


def check_exclusive_sweep(source: str, keys: list[str]) -> None:
    """Two swept keys of which a scenario gives exactly one (checkpoint.interval_steps and
    checkpoint.interval_minutes, say) are refused: each point could hold only one of them."""
    for i, first in enumerate(keys):
        for second in keys[i + 1 :]:
            a, b = first.split("."), second.split(".")
            if len(a) != len(b) or any(x != y for x, y in zip(a[:-1], b[:-1])):
                continue  # not siblings (failures.0.* and failures.1.* are not exclusive)
            pa = ".".join("*" if p.isdigit() else p for p in a)
            pb = ".".join("*" if p.isdigit() else p for p in b)
            if any(pa in group and pb in group and pa != pb for group in EXCLUSIVE):
                raise ScenarioError(
                    source,
                    second,
                    f"{first} and {second} are exclusive (a scenario gives one of them; "
                    "setting one removes the other), so they cannot be swept together: "
                    "sweep one of them",
                )


# Keys of which a scenario gives exactly one: an override or sweep of one replaces the others.
EXCLUSIVE = [
    ("checkpoint.interval_steps", "checkpoint.interval_minutes", "checkpoint.interval"),
    ("performance.mfu", "performance.compute_efficiency"),
    ("failures.*.mtbf_hours", "failures.*.rate_per_1k_gpu_day"),
]


def assign_key(doc: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted key; setting one of a group of exclusive keys removes its siblings."""
    parts = key.split(".")
    pattern = ".".join("*" if p.isdigit() else p for p in parts)
    for group in EXCLUSIVE:
        if pattern in group and value is not None:
            for sibling in group:
                if sibling != pattern:
                    remove_key(
                        doc, [p if s == "*" else s for p, s in zip(parts, sibling.split("."))]
                    )
    set_key(doc, parts, value)


# The storage tiers a `kind` fills from a preset (sim.model.hardware.TIERS), and the keys that
# describe a tier of one kind: the preset's figures, and a Lustre tier's OSTs.
TIER_MODELS: dict[str, type[TierConfig]] = {
    "storage.checkpoint_tier": TierConfig,
    "storage.backup": BackupConfig,
}
TIER_FIGURES = ("write_GB_s", "read_GB_s", "capacity_TB", "latency_ms", "osts", "ost_GB_s")


def _node_at(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _kind_at(doc: Any, tier: str) -> tuple[dict[str, Any] | None, Any]:
    """The tier's mapping in a raw document (None if it has none) and its kind (the
    model's default where the mapping names none)."""
    node = _node_at(doc, tier)
    if not isinstance(node, dict):
        return None, None
    return node, node.get("kind", TIER_MODELS[tier].model_fields["kind"].default)


def _names(keys: list[str], tier: str) -> bool:
    """Whether one of the dotted keys gives the whole tier (it, or a section holding it)."""
    return any(tier == key or tier.startswith(key + ".") for key in keys)


def restart_tiers(
    before: dict[str, Any], after: dict[str, Any], given: list[str]
) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """A tier whose kind `after` changes from `before` starts from its new preset: the
    figures `before` stated for the old kind are removed from `after`, except those that
    `given` (the keys the same command or sweep point set) names. Returns (tier, new
    kind, the removed (key, value) pairs) for each tier that lost a figure."""
    changes = []
    for tier in TIER_MODELS:
        old, old_kind = _kind_at(before, tier)
        new, new_kind = _kind_at(after, tier)
        if old is None or new is None or new_kind == old_kind or _names(given, tier):
            continue  # no tier before or after, the same kind, or the tier given anew
        if not isinstance(new_kind, str) or new_kind not in TIERS:
            continue  # validation names the unknown kind
        dropped = [
            (key, new.pop(key))
            for key in TIER_FIGURES
            if key in new and key in old and f"{tier}.{key}" not in given
        ]
        if dropped:
            changes.append((tier, new_kind, dropped))
    return changes


def restart_note(tier: str, kind: str, dropped: list[tuple[str, Any]], origin: str = "") -> str:
    values = ", ".join(f"{key}={_shown(value)}" for key, value in dropped)
    return f"{tier}.kind={kind}{origin}: starts from the {kind} preset; dropped the file's {values}"


def sweep_replaces_set_kinds(
    document: dict[str, Any], raw: dict[str, Any], sweep: dict[str, Any], set_keys: list[str]
) -> list[str]:
    """A tier's kind given by --set (`raw`) and swept as well: every point takes the swept
    kind, so the --set one is undone in `raw` (the file's kind, or none, as `document` has
    it). The sweep then starts from the file's tier: a point of the file's kind keeps the
    file's figures, the others start from their preset. Returns the notes saying so."""
    notes = []
    for tier in TIER_MODELS:
        key = f"{tier}.kind"
        if key not in sweep or key not in set_keys or _names(set_keys, tier):
            continue  # not swept, not --set, or the whole tier given anew by --set
        old, old_kind = _kind_at(document, tier)
        new, new_kind = _kind_at(raw, tier)
        if old is None or new is None:
            continue  # the file has no such tier: there are no figures of its to keep
        if "kind" in old:
            new["kind"] = copy.deepcopy(old["kind"])
        else:
            new.pop("kind", None)
        if new_kind != old_kind:
            notes.append(
                f"{key}={_word(new_kind)} (--set) is replaced at every point by the {key} "
                f"sweep: a point of the file's kind ({_word(old_kind)}) keeps the file's figures"
            )
    return notes


def keep_set_figures(
    base: dict[str, Any], sweep: dict[str, list], set_keys: list[str]
) -> list[str]:
    """A figure --set gives for a tier whose kind the sweep changes holds at every point:
    it joins the sweep with its one value, so that the resolved document (where --set is
    no longer told from the file) reproduces the run. Returns the notes saying so."""
    notes = []
    for tier in TIER_MODELS:
        node, kind = _kind_at(base, tier)
        kinds = sweep.get(f"{tier}.kind")
        if node is None or not kinds or all(k == kind for k in kinds):
            continue
        whole = _names(set_keys, tier)  # --set gave the whole tier: all its figures are given
        for key in TIER_FIGURES:
            path = f"{tier}.{key}"
            if key in node and path not in sweep and (whole or path in set_keys):
                sweep[path] = [node[key]]
                notes.append(
                    f"{path}={_shown(node[key])} (--set) holds at every point of the "
                    f"{tier}.kind sweep: it is swept with this one value"
                )
    return notes


def _word(value: Any) -> str:
    """A short string as it is (a kind), anything else as `_shown` writes it."""
    if isinstance(value, str) and len(value) <= MAX_ECHO and value.isprintable():
        return value
    return _shown(value)


def _shown(value: Any) -> str:
    """A number as the user would write it: 100 for 100.0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, int | float) else echo(value)
