"""`trainsim fabric`'s what-if, piped (COLUMNS 80 and 200): it names what was degraded or
failed, what those links carry in the all-reduce, and why the step moves or not (with
adaptive routing the traffic goes round a degraded leaf-spine bundle; with static routing,
or on a NIC cable, it cannot)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, cli_in_process, flat

FABRIC = str(ROOT / "scenarios/llama70b-1k-fabric.yaml")


def fabric(monkeypatch, width: int, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    r = cli_in_process(["fabric", FABRIC, *args])
    assert r.returncode == 0, r.stderr
    return flat(r.stdout)


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize(
    "what_if", [["--degrade", "leaf0-spine0=0.5"], ["--degrade", "leaf0-spine0=0.05"],
                ["--fail-switch", "spine0"]],
)  # fmt: skip
def test_the_readme_what_if_says_why_nothing_moves(monkeypatch, width, what_if):
    text = fabric(monkeypatch, width, *what_if)
    name = what_if[1].partition("=")[0]
    assert f"what-if: {name}" in text
    assert "it carries:" in text and "adaptive routing" in text
    assert "goes round what was lost" in text
    assert "so nothing moves" in text and "the step 4.798 s" in text
    assert "--degrade node0.rail0=0.5" in text  # what would show an effect


@pytest.mark.parametrize(
    "args, why",
    [
        (["--set", "network.routing=static", "--degrade", "leaf0-spine0=0.5"], "own port"),
        (["--degrade", "node0.rail0=0.5"], "no other way round"),
        (["--set", "network.routing=static", "--fail-switch", "spine0"], "next port"),
    ],
)
def test_a_what_if_that_bites_says_how_much(monkeypatch, args, why):
    text = fabric(monkeypatch, 80, *args)
    assert "so the step moves" in text and why in text
    assert "47.0 → 23.5 GB/s" in text and "180.7 → 361.0 ms" in text
    assert "the step 4.798 → 4.978 s" in text


def test_the_json_has_no_sentences(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = cli_in_process(["fabric", FABRIC, "--degrade", "leaf0-spine0=0.5", "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["step"]["what_if_step_s"] == pytest.approx(doc["step"]["step_s"])


def test_no_what_if_no_explanation(monkeypatch):
    assert "what-if" not in fabric(monkeypatch, 200)
