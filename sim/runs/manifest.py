"""A run's manifest, run.json: its statuses, the run id, the command that calls trainsim
again and the one that resumes a run, reading and checking a manifest within bounds, and
the fingerprint of what the parts were run from.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import shutil
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sim.model.scenario_set import ScenarioError
from sim.model.schema import EXECUTORS
from sim.runs.files import read_bounded

STATUSES = ("running", "complete", "interrupted", "failed")
MAX_MANIFEST_BYTES = 1_000_000  # a run.json is a few kB (a plan's settings, its command)
# the manifest keys the fingerprint covers (with the resolved scenario): what the parts
# were simulated from
FINGERPRINTED = ("seed", "replicas", "points_slice", "target_ci", "plan")


def version() -> str:
    from sim import __version__

    return __version__


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(seed: int) -> str:
    """Timestamp, seed and a random suffix: two runs started in the same second differ."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-seed{seed}-{secrets.token_hex(3)}"


def trainsim_command() -> str:
    """How to call trainsim again from this shell, as a command that runs as printed (quoted
    for a POSIX shell): `trainsim` when that name on PATH is the program running, else its
    full path; in-process (`python -m sim`, a notebook, a test): `trainsim` when on PATH, else
    the venv's script beside the interpreter, else `python -m sim`."""
    on_path = shutil.which("trainsim")
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.stem == "trainsim":
        if on_path and _same_file(Path(on_path), argv0):
            return "trainsim"
        return shlex.quote(str(argv0.absolute()))
    if on_path:
        return "trainsim"
    sibling = Path(sys.executable).parent / "trainsim"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return shlex.quote(str(sibling))
    return f"{shlex.quote(sys.executable)} -m sim"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def resume_command(run_dir: str | Path) -> str:
    """`trainsim run --resume RUN_DIR`, as a command that runs as printed."""
    return f"{trainsim_command()} run --resume {shlex.quote(str(run_dir))}"


def _manifest_problem(manifest: Any, strict: bool) -> tuple[str, str] | None:
    """(key, what is wrong) of a run.json document, or None. `strict`: the keys a resume
    needs must be there; otherwise only those present are checked."""
    if not isinstance(manifest, dict):
        kind = type(manifest).__name__ if manifest is not None else "null"
        return "", f"a JSON {kind}, expected an object (the run's manifest)"

    def integer(value: Any, low: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    checks: list[tuple[str, Callable[[Any], bool], str, bool]] = [
        ("seed", lambda v: integer(v, 0) and v < 2**63, "the run's seed, an integer >= 0", True),
        ("replicas", lambda v: integer(v, 1), "the replicas per point, an integer >= 1", True),
        ("status", lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}", True),
        ("workers", lambda v: integer(v, 1), "the worker count, an integer >= 1", False),
        ("executor", lambda v: v in EXECUTORS, f"one of {', '.join(EXECUTORS)}", False),
        ("resumed", lambda v: isinstance(v, list), "a list (the times the run ended)", False),
        (
            "adaptive",
            lambda v: (
                isinstance(v, dict)
                and all(
                    isinstance(x, dict) and {"replicas", "mean_days", "half_width_days"} <= set(x)
                    for x in v.values()
                )
            ),
            "an object of points, each with replicas, mean_days and half_width_days",
            False,
        ),
        (
            "overrides",
            lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
            "a list of the --set overrides (strings)",
            False,
        ),
        (
            "merged_from",
            lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
            "a list of run directories",
            False,
        ),
        ("incidents", lambda v: isinstance(v, bool), "true or false", False),
        (
            "points_slice",
            lambda v: (
                v is None or (isinstance(v, list) and len(v) == 2 and all(integer(x, 0) for x in v))
            ),
            "[I, J], the slice of sweep points",
            False,
        ),
        (
            "target_ci",
            lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool)),
            "a number",
            False,
        ),
        ("plan", lambda v: isinstance(v, dict), "an object (the plan's settings)", False),
        ("fingerprint", lambda v: isinstance(v, str), "a hex digest", False),
    ]
    for key, good, expected, required in checks:
        if key not in manifest:
            if strict and required:
                return key, f"missing: expected {expected}"
            continue
        if not good(manifest[key]):
            shown = json.dumps(manifest[key], default=str)[:60]
            return key, f"is {shown}: expected {expected}"
    return None


def load_manifest(run_json: Path, strict: bool = True) -> dict[str, Any]:
    """A run.json, read within bounds and checked (see `_manifest_problem`), or a
    ScenarioError naming the file and the key."""
    data = read_bounded(run_json, MAX_MANIFEST_BYTES, "run manifest (run.json)")
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise ScenarioError(
            str(run_json), "", f"not readable JSON ({exc}): expected the run's manifest"
        ) from None
    problem = _manifest_problem(manifest, strict)
    if problem is not None:
        raise ScenarioError(str(run_json), *problem)
    return manifest


def fingerprint(scenario_text: str | bytes, manifest: dict[str, Any]) -> str:
    """A digest of the resolved scenario (its content: comments and layout aside) and of the
    manifest's keys the parts depend on (seed, replicas, slice, adaptive or plan settings)."""
    try:
        document = yaml.safe_load(scenario_text)
    except yaml.YAMLError:
        document = scenario_text if isinstance(scenario_text, str) else scenario_text.hex()
    doc = {"scenario": document, **{k: manifest.get(k) for k in FINGERPRINTED}}
    text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def read_manifest(path: Path, expected: str, prefix: str = "") -> dict[str, Any]:
    """The run.json of a run directory (read within bounds), or a ScenarioError naming the
    directory, saying what is wrong (`prefix` first, e.g. "run A ") and what was
    `expected`."""
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise ScenarioError(str(path), "", f"{prefix}{what}: {expected}")
    run_json = path / "run.json"
    if not run_json.exists() and not run_json.is_symlink():
        raise ScenarioError(str(path), "", f"{prefix}no run.json: {expected}")
    try:
        return load_manifest(run_json, strict=False)
    except ScenarioError as exc:
        raise ScenarioError(str(run_json), exc.path, f"{prefix}{exc.message}; {expected}") from None
