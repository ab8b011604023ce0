"""`trainsim init` and the worked example that opens docs/scenarios.md: what a user who
starts a scenario of their own gets validates as written, says on every key what unit it
is in and where its value comes from, and never overwrites a file unasked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from sim.model.scenario import load_document, load_scenario
from tests.conftest import ROOT, cli_in_process, flat

SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
DOC = ROOT / "docs/scenarios.md"


def init(tmp_path: Path, *args: str):
    return cli_in_process(["init", *args], tmp_path)


def validate(tmp_path: Path, path: Path):
    return cli_in_process(["validate", str(path)], tmp_path)


def key_lines_without_comment(text: str) -> list[str]:
    """Lines that set a key (not comments, not list items, not section headers) and have no
    comment of their own, nor one on the line above."""
    lines = text.splitlines()
    bare = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "- ")) or stripped.endswith(":"):
            continue
        above = lines[i - 1].strip() if i else ""
        if "  # " not in line and not above.startswith("#"):
            bare.append(line)
    return bare


def test_init_writes_a_scenario_that_validates_as_written(tmp_path):
    r = init(tmp_path, "my-7b")
    assert r.returncode == 0, r.stderr
    path = tmp_path / "my-7b.yaml"
    assert path.is_file() and str(path) in r.stdout
    v = validate(tmp_path, path)
    assert v.returncode == 0 and "ok: " in v.stdout, v.stderr
    assert v.stderr == ""  # no warning either
    text = path.read_text()
    assert key_lines_without_comment(text) == []
    scenario = load_scenario(path).base
    assert scenario.name == "my-7b"
    assert scenario.cluster.nodes * scenario.cluster.gpus_per_node == 128
    assert scenario.storage.checkpoint_tier.kind == "nfs"
    # units and sources are stated, not implied
    for words in ("trainable parameters (count); published: Llama 2 7B",
                  "price per GPU-hour (US dollars)", "assumption", "Llama 3, Table 5",
                  "the nfs preset (docs/references.md) gives write_GB_s: 5"):  # fmt: skip
        assert words in flat(text.replace("#", " ")), words


@pytest.mark.parametrize("like", SHIPPED)
def test_init_like_a_shipped_scenario_keeps_its_values(tmp_path, like):
    r = init(tmp_path, "mine", "--like", like)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "mine.yaml"
    v = validate(tmp_path, path)
    assert v.returncode == 0, v.stderr
    text = path.read_text()
    assert key_lines_without_comment(text) == []
    assert f"as in {like}.yaml" in text
    ours = load_scenario(path).base.model_dump()
    theirs = load_scenario(ROOT / f"scenarios/{like}.yaml").base.model_dump()
    assert ours.pop("name") == "mine"
    theirs.pop("name")
    assert ours == theirs  # every value of the shipped scenario, nothing else changed


def test_init_never_overwrites_unasked(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("mine: precious\n")
    r = init(tmp_path, "mine")
    assert r.returncode == 2 and "--force" in r.stderr and str(path) in r.stderr
    assert path.read_text() == "mine: precious\n"
    r = init(tmp_path, "mine", "--force")
    assert r.returncode == 0, r.stderr
    assert validate(tmp_path, path).returncode == 0


@pytest.mark.parametrize(
    "args, words",
    [
        (["My Model"], ["NAME", "[a-z0-9_-]"]),
        (["x" * 65], ["NAME"]),
        (["mine", "--like", "llama-nonexistent"], ["--like", "llama70b-1k"]),
    ],
)
def test_init_refuses_bad_names(tmp_path, args, words):
    r = init(tmp_path, *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr
    assert list(tmp_path.iterdir()) == []


def worked_example() -> tuple[str, str]:
    """The first YAML block of docs/scenarios.md, and the text before it."""
    text = DOC.read_text()
    match = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert match, "docs/scenarios.md has no YAML block"
    return match.group(1), text[: match.start()]


def test_the_docs_open_with_a_worked_example_that_validates(tmp_path):
    block, before = worked_example()
    # it comes first: before the key reference, under its own heading
    assert "## A worked example: 7B on 128 H100s with NFS checkpoints" in before
    assert "## Key reference" not in before and "## model" not in before
    path = tmp_path / "my-7b.yaml"
    path.write_text(block)
    r = validate(tmp_path, path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    scenario = load_scenario(path).base
    assert scenario.cluster.nodes * scenario.cluster.gpus_per_node == 128
    assert scenario.storage.checkpoint_tier.kind == "nfs" and scenario.model.params == 7e9


def test_init_writes_the_worked_example(tmp_path):
    """`trainsim init` without --like is the docs' example: the same scenario (its
    description aside), so the doc and the command cannot drift apart."""
    block, _ = worked_example()
    assert init(tmp_path, "my-7b").returncode == 0
    written = load_scenario(tmp_path / "my-7b.yaml").base.model_dump()
    documented = load_document(yaml.safe_load(block), "docs").base.model_dump()
    written.pop("description")
    documented.pop("description")
    assert written == documented


def test_the_numbers_the_worked_example_quotes(tmp_path):
    """What the docs say `calc` shows for the example."""
    block, _ = worked_example()
    text = DOC.read_text()
    (tmp_path / "my-7b.yaml").write_text(block)
    r = cli_in_process(["calc", "my-7b.yaml", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    calc = json.loads(r.stdout)["points"][0]
    assert f"step {calc['step_time_s']:.2f} s" in text
    assert f"ideal {calc['ideal_days']:.2f} days" in text
    assert f"a {calc['checkpoint_GB']:.0f} GB checkpoint" in text
    assert f"takes {calc['checkpoint_write_s']:.1f} s to write" in text
    assert f"Daly: {calc['daly_interval_minutes']:.0f} min" in text


# --------------------------------------------------------------------------- issue 27, section 5


@pytest.mark.parametrize("dangling", [False, True])
def test_init_force_never_writes_through_a_link(tmp_path, dangling):
    victim = tmp_path / "run" / "scenario.yaml"
    victim.parent.mkdir()
    if not dangling:
        victim.write_text("name: a run's own\n")
    (tmp_path / "mine.yaml").symlink_to(victim)
    r = init(tmp_path, "mine", "--force")
    assert r.returncode == 2, r.stderr
    assert "symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert victim.exists() != dangling
    if not dangling:
        assert victim.read_text() == "name: a run's own\n"


def test_init_force_in_a_run_directory_never_writes_over_its_scenario(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "scenario.yaml").write_text("name: the run's\n")
    r = init(tmp_path, "scenario", "--force")
    assert r.returncode == 2, r.stderr
    assert "destroy the run" in r.stderr
    assert (tmp_path / "scenario.yaml").read_text() == "name: the run's\n"


def test_init_in_a_deleted_directory_is_bad_input(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    r = cli_in_process(["init", "mine"])
    assert r.returncode == 2, r.stderr
    assert "deleted or moved" in r.stderr and "Traceback" not in r.stderr
