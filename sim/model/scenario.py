"""Scenario files: safe YAML loading, `--set`/`--param` overrides, sweep expansion,
validation into the frozen models of `sim.model.schema`, and the performance model's verdict on
each point's configuration (`sim.model.perf.configuration_problem`).

This is the only place raw dicts exist. Everything downstream receives a
validated `Scenario` (or one of its typed sub-configs). Every problem is raised
as a `ScenarioError` that names the file, the key path and what was expected.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import re
import stat
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from sim.model import perf
from sim.model.hardware import TIERS
from sim.model.schema import (
    CONFIGURATION_SECTIONS,
    MAX_ECHO,
    NOT_STEP_KEYS,
    NOT_SWEEPABLE,
    SWEEPABLE_ROOT,
    BackupConfig,
    KeyPathError,
    Scenario,
    TierConfig,
    echo,
    is_union_tag,
    keys_of,
    model_at,
    reference_scenario,
    remove_key,
    set_key,
    submodel,
)

# Limits on the input itself, so that no file or command line can exhaust memory or
# the stack before validation has a chance to name the problem.
MAX_FILE_BYTES = 1_000_000  # a scenario file; the shipped ones are ~2 kB
MAX_DEPTH = 20  # nesting of mappings and lists, aliases expanded (the schema needs ~6)
MAX_NODES = 100_000  # values in a document once its aliases are expanded
MAX_POINTS = 10_000  # sweep points (the product of the sweep lists' lengths)
MAX_PROBLEMS = 5  # validation problems listed in one message


class ScenarioError(Exception):
    """Bad input: a one-paragraph message naming the file and key path."""

    def __init__(self, source: str, path: str, message: str):
        self.source, self.path, self.message = source, path, message
        shown = path if len(path) <= 2 * MAX_ECHO else path[: 2 * MAX_ECHO - 3] + "..."
        where = f"{source}: {shown}: " if path else f"{source}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class Point:
    """One sweep point: the swept values that produced it and the scenario."""

    index: int
    params: dict[str, Any]
    scenario: Scenario
    # why this configuration cannot run (key path: reason), for a sweep point the model
    # refuses; None when it can run. A single-point scenario is refused outright instead.
    infeasible: str | None = None


@dataclass(frozen=True)
class ScenarioSet:
    """A loaded scenario file: the resolved raw document and its sweep points."""

    source: str
    resolved: dict[str, Any]  # the document as run: overrides applied, sweep kept
    points: list[Point]
    # what loading changed beyond the keys given, for the user (the CLI prints them on
    # stderr): e.g. a tier whose kind an override or sweep changed starts from its preset
    notes: list[str] = field(default_factory=list)
    # the --set assignments as given, in order: what the figures' labels say was overridden
    overrides: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.points[0].scenario.name

    @property
    def base(self) -> Scenario:
        return self.points[0].scenario

    @property
    def swept_keys(self) -> list[str]:
        """Every key of the sweep: the points' params, the tables' columns."""
        return list(self.resolved.get("sweep") or {})

    @property
    def varied_keys(self) -> list[str]:
        """The swept keys with more than one value: the sweep's axes. A key swept with one
        value (a figure --set holds at every point of a kind sweep) is the same at every
        point: a column of the tables, but no axis of a figure, a plan or `optimize`."""
        sweep = self.resolved.get("sweep") or {}
        return [key for key, values in sweep.items() if len(values) > 1]

    @property
    def feasible(self) -> list[Point]:
        """The points that can run (`infeasible` is None): the only ones simulated."""
        return [p for p in self.points if p.infeasible is None]

    @property
    def runnable_base(self) -> Scenario:
        """The first point that can run (the first point when none can): what the
        performance model describes when a sweep has infeasible points."""
        return (self.feasible or self.points)[0].scenario


# --------------------------------------------------------------------------- loading


class _InputLimit(yaml.YAMLError):
    """The YAML is well-formed but refused: too deep, too large, a duplicate key."""

    def __init__(self, message: str, mark: Any = None, path: str = ""):
        super().__init__(message)
        self.message, self.mark, self.path = message, mark, path


if getattr(yaml, "__with_libyaml__", False):
    from yaml.cyaml import CParser

    class _SafeBase(Composer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """`yaml.SafeLoader` with libyaml's scanner and parser (a 1 MB file in seconds, not
        tens of seconds) and PyYAML's composer, which `_Loader` extends."""

        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

else:  # PyYAML built without libyaml
    _SafeBase = yaml.SafeLoader  # type: ignore[misc,assignment]


class _Loader(_SafeBase):
    """A safe loader with limits checked while composing, before anything is built:
    nesting depth (no RecursionError), values once aliases are expanded (no billion
    laughs), no recursive aliases, and no key given twice in one mapping."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._values = 0  # values composed so far, aliases expanded: stops a bomb early
        self._path: list[str] = []
        self._measured: dict[int, tuple[int, int]] = {}  # id(node): (values, height)
        self._keep: list[yaml.Node] = []  # keeps ids in _measured unique

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            if id(node) not in self._measured:
                raise _InputLimit(
                    "an alias refers to a mapping or list that contains it (a recursive structure)",
                    mark,
                )
            self._count(self._measured[id(node)][0], mark)
            return node
        self._count(1, self.peek_event().start_mark)
        if self._depth >= MAX_DEPTH:
            raise _InputLimit(
                f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
            )
        label = (
            str(index.value)
            if isinstance(index, yaml.ScalarNode)
            else str(index)
            if isinstance(index, int)
            else None
        )
        self._depth += 1
        if label is not None:
            self._path.append(label)
        try:
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.MappingNode):
                self._check_duplicates(node)
        finally:
            self._depth -= 1
            if label is not None:
                self._path.pop()
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        sizes = [self._measured[id(child)] for child in children]
        values = 1 + sum(n for n, _ in sizes)
        height = 1 + max((h for _, h in sizes), default=0)
        if height > MAX_DEPTH:
            raise _InputLimit(
                f"nested deeper than {MAX_DEPTH} levels once aliases are expanded",
                node.start_mark,
            )
        self._measured[id(node)] = (values, height)
        self._keep.append(node)
        return node

    def _count(self, values: int, mark: Any) -> None:
        self._values += values
        if self._values > MAX_NODES:
            raise _InputLimit(f"expands to more than {MAX_NODES:,} values (aliases included)", mark)

    def _check_duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                raise _InputLimit(
                    f"duplicate key {echo(key.value)} (first given at line "
                    f"{first.start_mark.line + 1}); give each key once",
                    key.start_mark,
                    ".".join([*self._path, str(key.value)]),
                )


# Booleans are YAML 1.2's true and false only: PyYAML's YAML 1.1 also reads yes, no, on
# and off as booleans (a Norwegian `country: no` turns false); here they stay strings,
# which a boolean key then refuses
_BOOL = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _BOOL]
    for first, resolvers in _SafeBase.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load` with the limits of `_Loader`; raises `yaml.YAMLError`."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _yaml_problem(exc: yaml.YAMLError) -> tuple[str, str]:
    """(key path, one-line description) of a YAML error, value echoes shortened."""
    if isinstance(exc, _InputLimit):
        where = f"line {exc.mark.line + 1}, column {exc.mark.column + 1}: " if exc.mark else ""
        return exc.path, where + exc.message
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if len(problem) > 2 * MAX_ECHO:
        problem = problem[: 2 * MAX_ECHO - 3] + "..."
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return "", f"not valid YAML{where}: {problem}"


def read_yaml(path: str | Path) -> dict[str, Any]:
    source = str(path)
    data = read_regular_file(source, MAX_FILE_BYTES + 1)  # never more: a huge log
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(
            source,
            "",
            f"larger than {MAX_FILE_BYTES:,} bytes; a scenario file is a few kilobytes of YAML",
        )
    text = _decode(source, data)
    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        key, problem = _yaml_problem(exc)
        raise ScenarioError(source, key, problem) from None
    if not isinstance(document, dict):
        raise ScenarioError(
            source, "", "expected a YAML mapping of sections (name, model, cluster, ...)"
        )
    return document


def read_regular_file(source: str, limit: int, what: str = "scenario file") -> bytes:
    """At most `limit` bytes of a regular file, or a ScenarioError naming it. Anything else
    (a FIFO nobody writes to, a device such as /dev/zero, a socket, a directory) is
    refused without blocking: the file is opened non-blocking and checked before a read."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the {what} ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a file"
            )
            raise ScenarioError(
                source, "", f"{kind}, not a regular file; expected the path of a YAML {what}"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as file:
            fd = -1  # the file object closes it
            return file.read(limit)
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read the {what} ({exc.strerror})") from None
    finally:
        if fd >= 0:
            os.close(fd)


def _decode(source: str, data: bytes) -> str:
    """UTF-8 (a UTF-8 byte-order mark is fine); anything else is refused with its position."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ScenarioError(
            source, "", "the file is UTF-16 (it starts with a byte-order mark); save it as UTF-8"
        )
    if b"\x00" in data:
        raise ScenarioError(
            source,
            "",
            "the file contains NUL bytes (a binary file, or UTF-16?); expected UTF-8 YAML text",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ScenarioError(
            source,
            "",
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column} "
            "(latin-1 or another encoding?); save the file as UTF-8",
        ) from None


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
        key, text = _split_assignment(source, item, "--set")
        value = _parse_value(source, key, text, "--set")
        _check_path(source, key, raw, origin="--set")
        _assign(raw, key, value)
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
        key, text = _split_assignment(source, item, "--param")
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
            values.append(_parse_value(source, key, piece, "--param", whole=text))
        sweep[key] = values  # replaces the file's list for this key, if it sweeps it
    if sweep:
        raw["sweep"] = sweep
    # a kind --set gives a tier whose kind the sweep sweeps too holds at no point: the
    # file's kind (and figures) stay the sweep's base, so a point of the file's kind keeps them
    notes = _sweep_replaces_set_kinds(document, raw, sweep, set_keys)
    # a tier whose kind --set changed starts from the new preset (baked into `resolved`)
    notes += [_restart_note(*change) for change in _restart_tiers(document, raw, set_keys)]
    _record_mfu_at(document, raw)  # mfu stays measured at the file's configuration
    base = {k: v for k, v in raw.items() if k != "sweep"}
    for key, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(
                source, f"sweep.{key}", f"expected a non-empty list of values, got {echo(values)}"
            )
        _check_path(source, key, base, origin="sweep")
        _check_sweepable(source, key, values)
    _check_exclusive_sweep(source, list(sweep))
    notes += _keep_set_figures(base, sweep, set_keys)  # adds to raw["sweep"] (the same dict)
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
            _assign(doc, key, value)
        for change in _restart_tiers(base, doc, keys):  # a swept kind starts from its preset
            note = _restart_note(*change, origin=" (sweep)")
            if note not in notes:
                notes.append(note)
        _record_mfu_at(base, doc)  # ... and not at the point's swept configuration
        scenario = _validate(source, doc, point_params)
        infeasible = _configuration_check(source, scenario, point_params)
        points.append(
            Point(index=index, params=point_params, scenario=scenario, infeasible=infeasible)
        )
    _check_distinct_points(source, points)
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


# --------------------------------------------------------------------------- overrides


def _split_assignment(source: str, item: str, flag: str) -> tuple[str, str]:
    if "=" not in item:
        raise ScenarioError(
            source,
            item.strip()[: 2 * MAX_ECHO],
            f"{flag} expects KEY=VALUE, e.g. checkpoint.interval_steps=500",
        )
    key, _, text = item.partition("=")
    return key.strip(), text


def _parse_value(source: str, key: str, text: str, flag: str, whole: str | None = None) -> Any:
    """A command-line value as YAML (same limits as a file; no tags beyond safe ones).
    `whole`: the --param text this comma-separated item came from."""
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        _, problem = _yaml_problem(exc)
        what = f"{flag} value {echo(text)}"
        if whole is not None and whole != text:
            what = f"{flag} item {echo(text)} (items are split at commas)"
        raise ScenarioError(source, key, f"{what}: {problem}") from None


def _check_path(source: str, key: str, raw: dict[str, Any], origin: str) -> None:
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


def _check_sweepable(source: str, key: str, values: list[Any]) -> None:
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


def _check_distinct_points(source: str, points: list[Point]) -> None:
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


def _check_exclusive_sweep(source: str, keys: list[str]) -> None:
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


def _assign(doc: dict[str, Any], key: str, value: Any) -> None:
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


def _restart_tiers(
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


def _restart_note(tier: str, kind: str, dropped: list[tuple[str, Any]], origin: str = "") -> str:
    values = ", ".join(f"{key}={_shown(value)}" for key, value in dropped)
    return f"{tier}.kind={kind}{origin}: starts from the {kind} preset; dropped the file's {values}"


def _sweep_replaces_set_kinds(
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


def _keep_set_figures(
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


def dump_resolved(scenario_set: ScenarioSet) -> str:
    return yaml.safe_dump(scenario_set.resolved, sort_keys=False)
