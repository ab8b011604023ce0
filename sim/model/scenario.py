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
    keys_of,
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
        _refuse_set_under_param(source, set_keys, key)
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
    notes += _set_keys_the_file_sweeps(set_keys, [key for key in sweep if key not in given])
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
    shared = _shared_sections(base) if count > 1 else {}
    for index, combo in enumerate(itertools.product(*(sweep[k] for k in keys))):
        point_params = dict(zip(keys, combo))
        doc = _point_document(base, point_params, bool(shared))
        for change in restart_tiers(base, doc, keys):  # a swept kind starts from its preset
            note = restart_note(*change, origin=" (sweep)")
            if note not in notes:
                notes.append(note)
        _record_mfu_at(base, doc)  # ... and not at the point's swept configuration
        scenario = _validate(source, _with_shared(base, doc, shared), point_params)
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


def _shared_sections(base: dict[str, Any]) -> dict[str, Any]:
    """The sections of the sweep's base document validated once (a sweep of 10,000 points
    validated every section of every point): a point whose section is as the base has it
    shares the base's frozen model. Empty when the base alone does not validate (the sweep
    gives a key it needs): every point is then validated whole."""
    try:
        scenario = Scenario.model_validate(copy.deepcopy(base))
    except ValidationError:
        return {}
    names = [
        n for n, v in base.items() if n in Scenario.model_fields and isinstance(v, dict | list)
    ]
    # the network the base's cluster gave it, also where the file has none (one NIC per GPU)
    return {name: getattr(scenario, name) for name in {*names, "network"}}


def _point_document(
    base: dict[str, Any], point_params: dict[str, Any], shallow: bool
) -> dict[str, Any]:
    """A sweep point's document: `base` with the point's values. `shallow`: only the
    sections the point writes to are copied (its swept keys' sections and `performance`,
    where `_record_mfu_at` writes); the others stay `base`'s own objects, to be validated
    once (`_with_shared`)."""
    if not shallow:
        doc = copy.deepcopy(base)
    else:
        doc = dict(base)
        for name in {key.split(".")[0] for key in point_params} | {"performance"}:
            if name in doc:
                doc[name] = copy.deepcopy(base[name])
    for key, value in point_params.items():
        assign_key(doc, key, copy.deepcopy(value) if shallow else value)
    return doc


def _with_shared(
    base: dict[str, Any], doc: dict[str, Any], shared: dict[str, Any]
) -> dict[str, Any]:
    """What a point validates: its sections that are exactly the base's (the same values of
    the same types: 500.0 is not 500 to a strict count, nor true 1) as the base's models,
    the others as written. The cluster and the network go together: the network's default
    NICs per node follow the cluster's GPUs per node (Scenario's before-validator)."""
    if not shared:
        return doc
    written = {
        name for name in doc if name not in shared or not _identical(doc[name], base.get(name))
    }
    if written & {"cluster", "network"}:
        written |= {"cluster", "network"}
    given = {name: value for name, value in doc.items() if name in written}
    for name, value in given.items():
        if value is base.get(name):  # the base's own object: validation gets a copy
            given[name] = copy.deepcopy(value)
    return {**{name: model for name, model in shared.items() if name not in written}, **given}


def _identical(a: Any, b: Any) -> bool:
    """Equal, and of the same types throughout (1 == 1.0 == True to Python, not to the schema)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_identical, a, b))
    return bool(a == b)


def _set_keys_the_file_sweeps(set_keys: list[str], file_keys: list[str]) -> list[str]:
    """The notes for a --set of a key the file's own sweep gives at every point: the sweep's
    value wins (a tier's kind has its own note, `sweep_replaces_set_kinds`)."""
    notes = []
    for key in set_keys:
        for swept in file_keys:
            kind = key == swept and key.endswith(".kind")  # said by sweep_replaces_set_kinds
            if (key == swept or key.startswith(swept + ".")) and not kind:
                notes.append(
                    f"{key} (--set) is replaced at every point by the file's sweep of {swept}; "
                    f"--param {swept}=V1,V2,... replaces the sweep's values"
                )
    return notes


def _refuse_set_under_param(source: str, set_keys: list[str], param_key: str) -> None:
    """A --set of a key that a --param sweeps (the key itself, or a key inside it) would be
    replaced at every point: the command says two things of one key, so it is refused."""
    for key in set_keys:
        if key == param_key or key.startswith(param_key + "."):
            raise ScenarioError(
                source,
                key,
                f"--set {key} and --param {param_key} (plan: --vary) both give it: every sweep "
                f"point takes the swept value, so the --set one would be ignored; give one of "
                "them",
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
        errors = _without_scalar_members(_without_preset_keys(exc.errors()))
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


def _without_scalar_members(errors: list[Any]) -> list[Any]:
    """The errors less a union's scalar member's where a mapping was given: for `cluster.gpu`
    (a catalogue name or a mapping), a mapping with a bad key is described by the mapping's
    error alone, not also by "Input should be a valid string"."""
    scalar = ("str", "int", "float", "bool")
    mapped = {tuple(e["loc"][:i]) for e in errors for i, part in enumerate(e["loc"])
              if is_union_tag(part) and part not in scalar}  # fmt: skip
    return [
        e
        for e in errors
        if not (
            e["loc"]
            and e["loc"][-1] in scalar
            and isinstance(e.get("input"), dict | list)
            and tuple(e["loc"][:-1]) in mapped
        )
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
        allowed = ", ".join(keys_of(parent)) if parent else ""  # as a file writes them
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
