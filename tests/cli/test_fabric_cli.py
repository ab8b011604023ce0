"""`trainsim fabric` what-ifs as a user types them: bad factors and names are refused
with exit 2 (fast, never a hang), a partitioned fabric is reported as such, and the
link table shows the rate a flow really gets."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.conftest import ROOT, cli_in_process

TRAINSIM = str(ROOT / ".venv/bin/trainsim")
FABRIC = str(ROOT / "scenarios/llama70b-1k-fabric.yaml")  # 128 nodes, 32 leaves, 16 spines


def fabric(*args: str, tmp_path, timeout: float = 60) -> subprocess.CompletedProcess:
    """`trainsim fabric FABRIC ARGS`, run outside the repo; a hang fails the test."""
    return subprocess.run(
        [TRAINSIM, "fabric", FABRIC, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=timeout,
    )


def refused(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    return r.stderr


@pytest.mark.parametrize("factor", ["nan", "NaN", "inf", "-1", "0", "0.0", "1.5", "-0.0"])
def test_a_degrade_factor_outside_0_1_is_refused_fast(factor, tmp_path):
    err = refused(fabric("--degrade", f"leaf0-spine0={factor}", tmp_path=tmp_path, timeout=30))
    assert "leaf0-spine0" in err and "(0, 1]" in err
    assert "--fail-switch" in err  # where a failed cable or switch goes instead


def test_an_unknown_link_is_refused_naming_it_and_valid_ones(tmp_path):
    err = refused(fabric("--degrade", "nosuch-link=0.5", tmp_path=tmp_path))
    assert "nosuch-link" in err and "node0.rail0" in err and "leaf0-spine0" in err


def test_an_unknown_switch_is_refused_naming_it_and_valid_ones(tmp_path):
    err = refused(fabric("--fail-switch", "nosuch", tmp_path=tmp_path))
    assert "nosuch" in err and "spine0" in err and "spine15" in err


def test_a_leaf_or_a_nic_cable_cannot_fail_here(tmp_path):
    assert "leaf3" in refused(fabric("--fail-switch", "leaf3", tmp_path=tmp_path))
    assert "node0.rail0" in refused(fabric("--fail-switch", "node0.rail0", tmp_path=tmp_path))


def test_a_cable_fails_by_name(tmp_path):
    # adaptive routing (the default): leaf0's other 31 uplinks carry its few crossing flows
    r = fabric("--fail-switch", "leaf0-spine0", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)["gradient_allreduce"]
    assert g["routing"] == "adaptive" and g["simulated_s"] == g["healthy_simulated_s"]
    # static routing: its flows reroute onto a busy cable
    r = fabric(
        "--fail-switch",
        "leaf0-spine0",
        "--set",
        "network.routing=static",
        "--json",
        tmp_path=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    g = doc["gradient_allreduce"]
    assert g["simulated_s"] > g["healthy_simulated_s"]
    assert all(not b["name"].startswith("leaf0-spine0.") for b in doc["bottlenecks"])


def test_fabric_says_which_routing_it_assumes(tmp_path):
    r = fabric(tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "routing (network.routing)" in r.stdout and "adaptive: flows spread" in r.stdout


def test_a_fabric_cut_in_two_is_reported_as_a_partition(tmp_path):
    spines = [a for s in range(16) for a in ("--fail-switch", f"spine{s}")]
    err = refused(fabric(*spines, tmp_path=tmp_path))
    assert "partitions the fabric" in err and "cannot reach" in err
    assert "spine0..spine15" in err  # what was failed, compactly


def test_the_link_table_shows_the_rate_each_flow_gets(tmp_path):
    # static routes: the flows on the halved cable stay on it (adaptive routing would
    # spread them over leaf0's other uplinks)
    static = ("--set", "network.routing=static")
    healthy = json.loads(fabric("--json", *static, tmp_path=tmp_path).stdout)["bottlenecks"]
    r = fabric("--degrade", "leaf0-spine0=0.5", "--json", *static, tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    links = json.loads(r.stdout)["bottlenecks"]
    line = healthy[0]["share_GB_s"]
    assert links[0]["name"] == "leaf0-spine0.0"
    assert links[0]["share_GB_s"] == pytest.approx(line / 2)  # the halved cable's flow
    assert links[0]["utilisation"] == pytest.approx(1.0)
    shares = [b["share_GB_s"] for b in links]
    assert shares == sorted(shares)  # lowest per-flow rate first
    for b in links:  # every link listed is some flow's bottleneck: full, its rate exact
        assert b["utilisation"] == pytest.approx(1.0)
        assert b["share_GB_s"] * b["flows"] >= b["capacity_GB_s"] * (1 - 1e-9)
        if b["name"].startswith("node"):  # a NIC link listed is one its flows fill
            assert b["share_GB_s"] == pytest.approx(line)
    # the printed table: the NIC links that carry the halved flow are not listed half-empty
    text = fabric("--degrade", "leaf0-spine0=0.5", *static, tmp_path=tmp_path)
    assert text.returncode == 0, text.stderr
    table = text.stdout[text.stdout.index("most loaded links") :]
    rows = [row for row in table.splitlines() if "node" in row or "leaf" in row]
    assert rows and not any("50%" in row for row in rows)
    assert f"{line / 2:.1f}" in rows[0] and "leaf0-spine0.0" in rows[0]


def test_a_sweep_describes_its_first_point_that_can_run(tmp_path):
    # llama7b-128 at 12 nodes: 1,024 sequences over 96 data-parallel replicas do not split
    doc = yaml.safe_load((ROOT / "scenarios/llama7b-128.yaml").read_text())
    doc["sweep"] = {"cluster.nodes": [12, 16]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    r = cli_in_process(["fabric", "s.yaml", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["point"] == 1 and out["params"] == {"cluster.nodes": 16}
    assert out["fat_tree"]["endpoints"] == 16 * 8
    assert "sweep point {'cluster.nodes': 12}: infeasible: model.global_batch_tokens" in r.stderr
    assert "note: the fabric of sweep point 1 (cluster.nodes=16), the first that can run" in (
        r.stderr
    )
    text = cli_in_process(["fabric", "s.yaml"], tmp_path).stdout
    assert "llama7b-128 (sweep point 1: cluster.nodes=16): fabric" in text
