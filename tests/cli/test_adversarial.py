"""Adversarial input through the CLI: every case in this process (`sim.cli.commands.main`, as the
`trainsim` entry point calls it), and a few through the real command (`python -m sim` in
a subprocess, with a time limit), so that the process's own exit path is exercised too.

Every case must be refused as bad input before anything is simulated: exit code 2,
a short `error:` message naming the key path where there is one, no traceback, no
"internal error", within TIMEOUT_S, and nothing left in the working directory (or
`--out`) but the files the test wrote. The scenarios are copies of
scenarios/llama7b-128.yaml (16 nodes, 128 GPUs) changed by the case.
"""

from __future__ import annotations

import copy
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, cli_in_process

BASE = ROOT / "scenarios/llama7b-128.yaml"
FABRIC = ROOT / "scenarios/llama70b-1k-fabric.yaml"
TIMEOUT_S = 30
OPTIMIZE = ["--out", "results", "--replicas", "2", "--workers", "1", "--no-progress"]
RUN = [*OPTIMIZE, "--no-figures"]


def base_doc() -> dict[str, Any]:
    return yaml.safe_load(BASE.read_text())


def dump(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def changed(**sections: Any) -> str:
    """The base scenario with keys changed: changed(model={"tokens": inf})."""
    doc = base_doc()
    for section, value in sections.items():
        if isinstance(value, dict) and isinstance(doc.get(section), dict):
            doc[section] = {**doc[section], **value}
        else:
            doc[section] = copy.deepcopy(value)
    return dump(doc)


def with_failure(**failure: Any) -> str:
    doc = base_doc()
    doc["failures"].append({"name": "extra", "scope": "gpu", **failure})
    return dump(doc)


def duplicate_nodes() -> str:
    text = dump(base_doc())
    assert "  nodes: 16\n" in text
    return text.replace("  nodes: 16\n", "  nodes: 16\n  nodes: 32\n")


def alias_bomb_in_sweep() -> str:
    """Billion laughs: 10⁹ strings once expanded, inside a sweep list."""
    lines = ["lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        lines.append(f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\n" + dump(base_doc()) + "sweep:\n  description: [*lol9]\n"


def grid_100_to_the_4() -> str:
    doc = base_doc()
    values = list(range(1, 101))
    doc["sweep"] = {
        key: values
        for key in (
            "checkpoint.keep_last",
            "cluster.spare_nodes",
            "recovery.restart_minutes",
            "cost.gpu_hour_usd",
        )
    }
    return dump(doc)


def latin1() -> bytes:
    return dump(base_doc()).replace("description: ", "description: café ").encode("latin-1")


@dataclass
class Case:
    args: list[str]  # "{x}" stands for the file written from files["x"]
    files: dict[str, str | bytes | Callable[[], str | bytes]] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)  # each must appear on stderr
    stdout_words: list[str] = field(default_factory=list)


INF, NAN = float("inf"), float("nan")
PWNED = "description=!!python/object/apply:os.system ['touch pwned']"  # a file would be left

CASES: dict[str, Case] = {
    # ---------------------------------------------------------------- encodings and size
    "latin-1": Case(["validate", "{s}"], {"s": latin1}, ["not UTF-8", "line"]),
    "latin-1 run": Case(["run", "{s}", *RUN], {"s": latin1}, ["not UTF-8"]),
    "utf-16 bom": Case(
        ["validate", "{s}"], {"s": lambda: dump(base_doc()).encode("utf-16")}, ["UTF-16"]
    ),
    "binary": Case(["calc", "{s}"], {"s": bytes(range(256)) * 8}, ["NUL"]),
    "dev zero": Case(["validate", "/dev/zero"], {}, ["/dev/zero", "not a regular file"]),
    "2 MB file": Case(
        ["validate", "{s}"],
        {"s": lambda: dump(base_doc()) + "# " + "x" * 2_000_000 + "\n"},
        ["larger than"],
    ),
    # ---------------------------------------------------------------- numbers
    "tokens inf": Case(
        ["calc", "{s}"], {"s": lambda: changed(model={"tokens": INF})}, ["model.tokens", "finite"]
    ),
    "tokens inf run": Case(
        ["run", "{s}", *RUN], {"s": lambda: changed(model={"tokens": INF})}, ["model.tokens"]
    ),
    "params nan": Case(
        ["validate", "{s}"],
        {"s": lambda: changed(model={"params": NAN})},
        ["model.params", "finite"],
    ),
    "interval_minutes inf": Case(
        ["calc", "{s}"],
        {"s": lambda: changed(checkpoint={"interval_minutes": INF})},
        ["checkpoint.interval_minutes", "finite"],
    ),
    "global_batch_tokens 1e30": Case(
        ["calc", "{s}"],
        {"s": lambda: changed(model={"global_batch_tokens": 10**30})},
        ["model.global_batch_tokens", "10000000000"],
    ),
    "mfu 1e-300": Case(
        ["calc", "{s}"],
        {"s": lambda: changed(performance={"mfu": 1e-300})},
        ["performance.mfu", "0.01"],
    ),
    "write_GB_s 1e-300": Case(
        ["calc", "{s}"],
        {
            "s": lambda: changed(
                storage={
                    "checkpoint_tier": {
                        "kind": "lustre",
                        "write_GB_s": 1e-300,
                        "read_GB_s": 30,
                        "capacity_TB": 200,
                    }
                }
            )
        },
        ["storage.checkpoint_tier.write_GB_s", "0.001"],
    ),
    "rate 1e300": Case(
        ["calc", "{s}"],
        {"s": lambda: with_failure(rate_per_1k_gpu_day=1e300)},
        ["failures.5.rate_per_1k_gpu_day", "1000000"],
    ),
    "mtbf 1e-300": Case(
        ["calc", "{s}"],
        {"s": lambda: with_failure(mtbf_hours=1e-300)},
        ["failures.5.mtbf_hours", "0.001"],
    ),
    "mtbf 1e-300 run": Case(
        ["run", "{s}", *RUN],
        {"s": lambda: with_failure(mtbf_hours=1e-300)},
        ["failures.5.mtbf_hours"],
    ),
    "seed 2**64 in the file": Case(
        ["validate", "{s}"],
        {"s": lambda: changed(simulation={"seed": 2**64})},
        ["simulation.seed", str(2**63 - 1)],
    ),
    "seed 2**63 in the file, run": Case(
        ["run", "{s}", *RUN],
        {"s": lambda: changed(simulation={"seed": 2**63})},
        ["simulation.seed"],
    ),
    "name of 300 characters": Case(
        ["run", "{s}", *RUN], {"s": lambda: changed(name="a" * 300)}, ["name", "64 characters"]
    ),
    "replace on a link failure": Case(
        ["validate", "{s}"],
        {"s": lambda: with_failure(scope="link", mtbf_hours=1000, replace=True)},
        ["failures.5.replace", "no node to swap"],
    ),
    # ---------------------------------------------------------------- --param and --set
    "param unclosed list": Case(
        ["run", "{s}", *RUN, "--param", "model.params=[1,2"],
        {"s": dump(base_doc())},
        ["model.params", "not valid YAML"],
    ),
    "param unclosed quote": Case(
        ["run", "{s}", *RUN, "--param", 'description="abc'],
        {"s": dump(base_doc())},
        ["description", "not valid YAML"],
    ),
    "param python tag": Case(
        ["run", "{s}", *RUN, "--param", PWNED], {"s": dump(base_doc())}, ["description"]
    ),
    "set python tag": Case(
        ["validate", "{s}", "--set", PWNED], {"s": dump(base_doc())}, ["description"]
    ),
    "param empty": Case(
        ["run", "{s}", *RUN, "--param", "checkpoint.interval_steps="],
        {"s": dump(base_doc())},
        ["checkpoint.interval_steps", "empty"],
    ),
    "param empty item": Case(
        ["run", "{s}", *RUN, "--param", "checkpoint.interval_steps=500,,1000"],
        {"s": dump(base_doc())},
        ["checkpoint.interval_steps", "empty"],
    ),
    "param twice": Case(
        ["run", "{s}", *RUN]
        + ["--param", "checkpoint.interval_steps=500", "--param", "checkpoint.interval_steps=1000"],
        {"s": dump(base_doc())},
        ["checkpoint.interval_steps", "twice"],
    ),
    # ---------------------------------------------------------------- YAML structure
    "duplicate key": Case(
        ["validate", "{s}"], {"s": duplicate_nodes}, ["cluster.nodes", "duplicate", "line"]
    ),
    "duplicate key run": Case(
        ["run", "{s}", *RUN], {"s": duplicate_nodes}, ["cluster.nodes", "duplicate"]
    ),
    "sweep as a list": Case(
        ["run", "{s}", *RUN],
        {"s": lambda: changed(sweep=["checkpoint.interval_steps", 500])},
        ["sweep", "mapping"],
    ),
    "nested 10,000 deep": Case(
        ["validate", "{s}"],
        {"s": lambda: dump(base_doc()) + "x: " + "[" * 10_000 + "]" * 10_000 + "\n"},
        ["nest"],
    ),
    "nested 500 deep, block style": Case(
        ["validate", "{s}"],
        {"s": lambda: dump(base_doc()) + "".join("  " * i + f"k{i}:\n" for i in range(500))},
        ["nest"],
    ),
    "alias bomb in a sweep": Case(
        ["run", "{s}", *RUN], {"s": alias_bomb_in_sweep}, ["expands to more than"]
    ),
    "grid of 100**4 points": Case(
        ["run", "{s}", *RUN], {"s": grid_100_to_the_4}, ["sweep", "10,000"]
    ),
    # ---------------------------------------------------------------- refused by the CLI and the calculator
    "--seed 2**64 run": Case(
        ["run", "{s}", *RUN, "--seed", str(2**64)], {"s": dump(base_doc())}, ["--seed"]
    ),
    "--seed 2**63 run": Case(
        ["run", "{s}", *RUN, "--seed", str(2**63)], {"s": dump(base_doc())}, ["--seed"]
    ),
    "--seed 2**64 optimize": Case(
        [
            "optimize",
            "{s}",
            *OPTIMIZE,
            "--seed",
            str(2**64),
            "--param",
            "checkpoint.interval_steps=500,1000",
        ],
        {"s": dump(base_doc())},
        ["--seed"],
    ),
    "validate reports every bad file": Case(
        ["validate", "{good}", "{bad1}", "{bad2}"],
        {
            "good": dump(base_doc()),
            "bad1": lambda: changed(model={"tokens": INF}),
            "bad2": duplicate_nodes,
        },
        ["bad1.yaml", "model.tokens", "bad2.yaml", "cluster.nodes"],
        stdout_words=["ok: good.yaml"],
    ),
    "optimize one candidate": Case(
        ["optimize", "{s}", *OPTIMIZE, "--param", "checkpoint.interval_steps=500"],
        {"s": dump(base_doc())},
        ["--param"],
    ),
    "optimize empty param": Case(
        ["optimize", "{s}", *OPTIMIZE, "--param", "checkpoint.interval_steps="],
        {"s": dump(base_doc())},
        ["checkpoint.interval_steps"],
    ),
    "optimize no value": Case(
        ["optimize", "{s}", *OPTIMIZE, "--param", ""], {"s": dump(base_doc())}, ["--param"]
    ),
    # per-GPU MTBF at the schema's lower bound: the job fails every ~28 ms (128 GPUs),
    # its steps take ~2.8 s
    **{
        f"failures far below the step time ({scope}, {command})": Case(
            [command, "{s}", *(RUN if command == "run" else [])],
            {
                "s": lambda scope=scope: dump(
                    {**base_doc(), "failures": [{"name": "x", "scope": scope, "mtbf_hours": 1e-3}]}
                )
            },
            ["failures.0.mtbf_hours"],
        )
        for scope in ("node", "gpu")
        for command in ("run", "calc", "validate")
    },
    "fabric with every spine failed": Case(
        ["fabric", str(FABRIC), *[f"--fail-switch=spine{i}" for i in range(16)]],
        {},
        ["partition"],
    ),
}

# the cases also run as a real process: files the loader must refuse before parsing, a
# hostile YAML document, an out-of-range seed, and a refusal by the fabric model
SUBPROCESS_CASES = [
    "binary",
    "alias bomb in a sweep",
    "--seed 2**64 run",
    "fabric with every spine failed",
]


def trainsim(
    args: list[str], cwd: Path, timeout_s: float = TIMEOUT_S, memory_bytes: int | None = None
) -> subprocess.CompletedProcess:
    """Run the CLI in its own process group: on timeout the whole group is killed
    (a run's worker processes too), never anything else. `memory_bytes` limits its address
    space, so that a runaway allocation fails the test, not the machine."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("TRAINSIM_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=limit if memory_bytes else None,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"trainsim {' '.join(args)[:200]} did not finish within {timeout_s} s")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def refused_cleanly(name: str, tmp_path: Path, run_cli) -> None:
    case = CASES[name]
    paths = {}
    for key, content in case.files.items():
        data = content() if callable(content) else content
        path = tmp_path / f"{key}.yaml"
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        paths[key] = path.name
    inputs = files_under(tmp_path)
    args = [arg.format(**paths) if arg.startswith("{") else arg for arg in case.args]

    r = run_cli(args, tmp_path)

    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    assert "internal error" not in r.stderr
    for word in case.words:
        assert word in r.stderr, (word, r.stderr[-2000:])
    for word in case.stdout_words:
        assert word in r.stdout, (word, r.stdout[-2000:])
    assert len(r.stderr) < 2000 and all(len(line) < 600 for line in r.stderr.splitlines())
    assert files_under(tmp_path) == inputs  # no results, no partial run directory


@pytest.mark.parametrize("name", sorted(CASES))
def test_adversarial_input_is_refused_cleanly(name, tmp_path):
    refused_cleanly(name, tmp_path, cli_in_process)


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_adversarial_input_is_refused_cleanly_by_the_real_command(name, tmp_path):
    refused_cleanly(name, tmp_path, trainsim)


def test_calc_survives_a_hopeless_but_valid_failure_rate(tmp_path):
    """Every field in range and the job can step (aggregate MTBF 4 s > step 3 s), but a
    60-minute interval against a 4 s MTBF overflows Daly's e^{(τ+δ)/M}: calc must say
    so (inf, or a refusal), never crash."""
    doc = base_doc()
    doc["model"]["tokens"] = 1e11  # ideal ~1 day, inside the 2-day horizon
    doc["failures"] = [{"name": "x", "scope": "node", "mtbf_hours": 0.0178}]  # 16 nodes: 4 s
    doc["simulation"]["horizon_days"] = 2
    (tmp_path / "s.yaml").write_text(dump(doc))
    r = trainsim(["calc", "s.yaml"], tmp_path)
    assert r.returncode in (0, 2), r.stderr[-2000:]
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr + r.stdout
    assert files_under(tmp_path) == {"s.yaml"}
