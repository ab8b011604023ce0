"""Scenario files: loading (`load_scenario`, `load_document`) with `--set`/`--param`
overrides and sweep expansion (`sim.model.overrides`), validation into the frozen models
of `sim.model.schema`, and the performance model's verdict on each point's configuration
(`sim.model.perf.configuration_problem`); the resolved scenario written back as YAML.

This is the only place raw dicts exist. Everything downstream receives a
validated `Scenario` (or one of its typed sub-configs). Every problem is raised
as a `ScenarioError` that names the file, the key path and what was expected.
"""

from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sim.model import perf
from sim.model.overrides import (
    assign_key,
    check_distinct_points,
    check_exclusive_sweep,
    check_path,
    check_sweepable,
    keep_set_figures,
    parse_value,
    restart_note,
    restart_tiers,
    split_assignment,
    sweep_replaces_set_kinds,
)
from sim.model.safe_yaml import read_yaml
from sim.model.scenario_set import MAX_POINTS, MAX_PROBLEMS, Point, ScenarioError, ScenarioSet
from sim.model.schema import (
    CONFIGURATION_SECTIONS,
    NOT_STEP_KEYS,
    KeyPathError,
    Scenario,
    echo,
    is_union_tag,
    model_at,
    reference_scenario,
)


def load_scenario(
    path: str | Path,
    overrides: list[str] | None = None,
    params: list[str] | None = None,
) -> ScenarioSet:
    """Read, override, expand and validate a scenario file."""
    return load_document(read_yaml(path), str(path), overrides, params)


def load_document(
    document: dict[str, Any],
    source: str = "<scenario>",
    overrides: list[str] | None = None,
    params: list[str] | None = None,
) -> ScenarioSet:
    raw = copy.deepcopy(document)
    set_keys = []
    for item in overrides or []:
        key, text = split_assignment(source, item, "--set")
        value = parse_value(source, key, text, "--set")
        check_path(source, key, raw, origin="--set")
        assign_key(raw, key, value)
        set_keys.append(key)
    if raw.get("sweep") is not None and not isinstance(raw["sweep"], dict):
        raise ScenarioError(
            source,
            "sweep",
            f"expected a mapping of dotted keys to lists of values, got {echo(raw['sweep'])}",
        )
    sweep = dict(raw.get("sweep") or {})
    for key in sweep:
        if not isinstance(key, str):
            raise ScenarioError(
                source,
                "sweep",
                f"expected dotted keys such as checkpoint.interval_steps, got {echo(key)}",
            )
    given: set[str] = set()
    for item in params or []:
        key, text = split_assignment(source, item, "--param")
        if key in given:
            raise ScenarioError(
                source,
                key,
                "--param is given twice for this key; give all its values in one "
                "--param KEY=V1,V2,...",
            )
        given.add(key)
        values = []
        for piece in text.split(","):
            if not piece.strip():
                raise ScenarioError(
                    source,
                    key,
                    f"--param value {echo(text)} has an empty item; expected KEY=V1,V2,... "
                    "(write null for an explicit null)",
                )
            values.append(parse_value(source, key, piece, "--param", whole=text))
        sweep[key] = values  # replaces the file's list for this key, if it sweeps it
    if sweep:
        raw["sweep"] = sweep
    # a kind --set gives a tier whose kind the sweep sweeps too holds at no point: the
    # file's kind (and figures) stay the sweep's base, so a point of the file's kind keeps them
    notes = sweep_replaces_set_kinds(document, raw, sweep, set_keys)
    # a tier whose kind --set changed starts from the new preset (baked into `resolved`)
    notes += [restart_note(*change) for change in restart_tiers(document, raw, set_keys)]
    _record_mfu_at(document, raw)  # mfu stays measured at the file's configuration
    base = {k: v for k, v in raw.items() if k != "sweep"}
    for key, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(
                source, f"sweep.{key}", f"expected a non-empty list of values, got {echo(values)}"
            )
        check_path(source, key, base, origin="sweep")
        check_sweepable(source, key, values)
    check_exclusive_sweep(source, list(sweep))
    notes += keep_set_figures(base, sweep, set_keys)  # adds to raw["sweep"] (the same dict)
    count = math.prod(len(values) for values in sweep.values())
    if count > MAX_POINTS:
        sizes = " x ".join(str(len(values)) for values in sweep.values())
        raise ScenarioError(
            source,
            "sweep",
            f"{count:,} sweep points ({sizes}) exceed the limit of {MAX_POINTS:,}; "
            "sweep fewer values or fewer keys at once",
        )

    points = []
    keys = list(sweep)
    for index, combo in enumerate(itertools.product(*(sweep[k] for k in keys))):
        doc = copy.deepcopy(base)
        point_params = dict(zip(keys, combo))
        for key, value in point_params.items():
            assign_key(doc, key, value)
        for change in restart_tiers(base, doc, keys):  # a swept kind starts from its preset
            note = restart_note(*change, origin=" (sweep)")
            if note not in notes:
                notes.append(note)
        _record_mfu_at(base, doc)  # ... and not at the point's swept configuration
        scenario = _validate(source, doc, point_params)
        infeasible = _configuration_check(source, scenario, point_params)
        points.append(
            Point(index=index, params=point_params, scenario=scenario, infeasible=infeasible)
        )
    check_distinct_points(source, points)
    if all(p.infeasible for p in points):
        # a single configuration that cannot run, or a sweep none of whose points can
        first = points[0]
        key, _, message = (first.infeasible or "").partition(": ")
        where = f" (at sweep point {echo(first.params)})" if first.params else ""
        more = f"; none of the {len(points)} sweep points can run" if len(points) > 1 else ""
        raise ScenarioError(source, key, message + where + more)
    return ScenarioSet(
        source=source, resolved=raw, points=points, notes=notes, overrides=list(overrides or [])
    )


def _record_mfu_at(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Where `after` (a document with --set applied, or a sweep point) changes configuration
    keys of `before`, `performance.mfu` stays measured at `before`'s configuration: each
    changed key's value in `before` (null: not given) joins `after`'s performance.mfu_at,
    unless mfu_at already names the key (or a key inside or around it): the user's stays."""
    performance = after.get("performance")
    if not isinstance(performance, dict) or performance.get("mfu") is None:
        return
    at = performance.get("mfu_at")
    if at is None:
        at = {}
    if not isinstance(at, dict):
        return  # validation names it
    changes: dict[str, Any] = {}
    for section in CONFIGURATION_SECTIONS:
        _changed_keys(before.get(section), after.get(section), section, changes)
    given = [str(k) for k in at]
    new = {
        key: value
        for key, value in changes.items()
        if key not in NOT_STEP_KEYS
        and not any(key == g or key.startswith(g + ".") or g.startswith(key + ".") for g in given)
    }
    if new:
        performance["mfu_at"] = {**at, **new}


def _changed_keys(before: Any, after: Any, path: str, out: dict[str, Any]) -> None:
    """The dotted keys at which `after` differs from `before`, with `before`'s values."""
    if before == after:
        return
    if isinstance(after, dict) and (before is None or isinstance(before, dict)):
        before = before or {}
        for key in {**before, **after}:
            _changed_keys(before.get(key), after.get(key), f"{path}.{key}", out)
        return
    out[path] = copy.deepcopy(before)


def _configuration_check(
    source: str, scenario: Scenario, point_params: dict[str, Any]
) -> str | None:
    """Why the point cannot run ("key.path: message"), or None: its configuration
    (`perf.configuration_problem`), or, where the step model is calibrated
    (`perf.model_scaling` "model"), an mfu no compute efficiency ≤ 1 reaches at the
    configuration it was measured at (the reference: `performance.mfu_at` applied). The
    reference is judged only by what a step needs: valid configuration sections
    (`schema.Configuration`), `perf.step_problem` and the calibration. A reference, or a
    calibration, that the point shares with the file (its sweep leaves `performance.*`
    alone) is bad input of the whole file: raised, naming the file, not the point."""
    problem = perf.configuration_problem(scenario)
    if problem is not None:
        return f"{problem[0]}: {problem[1]}"
    if perf.model_scaling(scenario) != "model":
        return None  # the MFU is fixed, or built from compute_efficiency: no reference
    # a point that sweeps performance.* has a calibration of its own; the others, the file's
    own = [key for key in point_params if key.split(".")[0] == "performance"]

    def bad(path: str, message: str) -> str:
        if own:
            return f"{path}: {message}"
        shared = " (the file's own: every sweep point is calibrated there)" if point_params else ""
        raise ScenarioError(source, path, message + shared)

    try:
        reference = reference_scenario(scenario)
    except ValidationError as exc:
        path, message = _describe(exc.errors()[0])
        return bad(
            "performance.mfu_at",
            f"the configuration mfu was measured at is not valid: {path}: {message}",
        )
    if reference is not scenario:
        problem = perf.step_problem(reference)
        if problem is not None:
            return bad(
                "performance.mfu_at",
                f"the configuration mfu was measured at cannot run: {problem[0]}: {problem[1]}",
            )
    try:
        perf.calibration(scenario)
    except perf.CalibrationError as exc:
        return bad("performance.mfu", str(exc))
    return None


def _validate(source: str, doc: dict[str, Any], point_params: dict[str, Any]) -> Scenario:
    try:
        return Scenario.model_validate(doc)
    except ValidationError as exc:
        errors = _without_preset_keys(exc.errors())
        problems = [_describe(error) for error in errors[:MAX_PROBLEMS]]
        path = problems[0][0]
        text = "; ".join(f"{p}: {m}" if p and i else m for i, (p, m) in enumerate(problems))
        if len(errors) > MAX_PROBLEMS:
            text += f"; and {len(errors) - MAX_PROBLEMS} more problems"
        if point_params:
            text += f" (at sweep point {echo(point_params)})"
        raise ScenarioError(source, path, text) from None


def _without_preset_keys(errors: list[Any]) -> list[Any]:
    """The errors less the keys a tier of an unknown `kind` misses: its preset would have
    filled them, so the kind is the one mistake to name (not four "required key is
    missing" after it)."""
    unknown = [
        tuple(e["loc"][:-1]) for e in errors if e["loc"] and e["loc"][-1] == "kind"
    ]  # fmt: skip
    return [
        e
        for e in errors
        if not (e["type"] == "missing" and any(tuple(e["loc"][:-1]) == t for t in unknown))
    ]


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    loc = [str(p) for p in error["loc"] if not is_union_tag(p)]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, KeyPathError):
        loc = [*loc, *cause.path.split(".")]
    path = ".".join(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = model_at(loc[:-1])
        allowed = ", ".join(parent.model_fields) if parent else ""
        return path, f"unknown key {echo(loc[-1])}" + (
            f"; expected one of: {allowed}" if allowed else ""
        )
    if kind == "missing":
        return path, "required key is missing"
    message = error["msg"]
    message = message.removeprefix("Value error, ")
    got = error.get("input")
    if kind not in ("value_error",) and not isinstance(got, dict | list):
        message += f" (got {echo(got)})"
    return path, message


def dump_resolved(scenario_set: ScenarioSet) -> str:
    return yaml.safe_dump(scenario_set.resolved, sort_keys=False)
