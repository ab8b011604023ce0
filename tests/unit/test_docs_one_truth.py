"""What the docs say about billing is what the engine does (tests/engine/test_operations.py
checks the engine's bill of a pool node by hand): pool and preemptible nodes are billed
while they serve in the job, in every place the docs and the report say who is billed."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def row(doc: str, key: str) -> str:
    (line,) = [
        x for x in (ROOT / "docs" / doc).read_text().splitlines() if x.startswith(f"| `{key}`")
    ]
    return line


def test_pool_and_preemptible_nodes_are_billed_while_they_serve_everywhere():
    price = row("scenarios.md", "cost.gpu_hour_usd")
    assert "not charged" not in price
    assert re.search(r"pool and preemptible nodes only while they serve", price), price
    for key in ("pool_nodes", "preemptible_nodes"):
        assert "billed only while they serve in the job" in row("scenarios.md", key)
    assert "pool nodes only while they serve" in row("metrics.md", "gpu_hours")
    operations = (ROOT / "docs/operations.md").read_text()
    assert "billed only while they serve" in operations
    for doc in ("scenarios.md", "metrics.md", "operations.md", "architecture.md"):
        text = " ".join((ROOT / "docs" / doc).read_text().split())
        assert not re.search(r"(pool|preemptible)[^.|]*not (charged|billed)", text), doc
