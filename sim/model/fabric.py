"""SimPy flow-level model of a collective on the scenario's fat tree.

The fabric is a set of directed links (GPU NVLink egress, NIC ↔ leaf, leaf ↔
spine, spine ↔ core) with capacities in GB/s. Each phase of a collective starts
its flows at once; flows sharing a link share it max-min fairly; when a flow
ends the survivors' rates are recomputed (a SimPy process advances from one
completion to the next), and the phase ends with its slowest flow. Ring steps
repeat the same traffic pattern, so one step is simulated and counted 2(n−1)
times; a tree runs its reduce phase then its broadcast phase.

Routing between leaves is `network.routing`: adaptive (the default) spreads each flow
over all the surviving equal-cost paths, as adaptive routing or ECMP spraying does, in
the fluid limit: a leaf's uplinks (and in three tiers a pod's spine-to-core cables) act
as one pipe of their summed surviving capacity, so a failed spine or cable costs its
share of them. Static is destination-mod-k over the surviving spines and cores, as an
InfiniBand subnet manager computes it (a failed part's flows move onto the next port).
Rank placement (contiguous or scattered across leaves) is an input, and so are degraded
links (a capacity factor in (0, 1]) and failed parts: spine/core switches and
inter-switch cables, which routing avoids.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field

import numpy as np
import simpy

from sim.model import network
from sim.model.network import FatTree, Group, Layout
from sim.model.schema import Scenario


class FabricPartitioned(ValueError):
    """The failed parts leave some flow of the collective without any path.

    A `ValueError`: the what-if (or the set of failed parts) is an input for which
    the collective cannot run at all, not a fault of the model.
    """


@dataclass
class Fabric:
    """Links of one fat tree and the routes between NIC ports."""

    tree: FatTree
    rails: int
    nodes: int
    position: np.ndarray  # job node -> physical node position (placement)
    names: list[str] = field(default_factory=list)  # undirected name, e.g. "leaf3-spine5"
    directions: list[str] = field(default_factory=list)  # "up" / "down" / "egress"
    capacity_GB_s: list[float] = field(default_factory=list)
    # adaptive routing: each spread pipe ("leaf3.uplinks", "pod0.uplinks") and its cables
    members: dict[str, list[str]] = field(default_factory=dict)
    _index: dict[tuple[str, str], int] = field(default_factory=dict)

    def link(self, name: str, direction: str, capacity: float) -> int:
        self._index[(name, direction)] = len(self.names)
        self.names.append(name)
        self.directions.append(direction)
        self.capacity_GB_s.append(capacity)
        return len(self.names) - 1

    def id(self, name: str, direction: str) -> int:
        return self._index[(name, direction)]


def build_fabric(
    scenario: Scenario,
    degrade: dict[str, float] | None = None,
    failed_switches: set[str] | None = None,
    placement_seed: int = 0,
) -> tuple[Fabric, dict]:
    """The scenario's fabric, one link per cable and direction.

    `degrade` maps a cable ("leaf3-spine5.0", "node2.rail1") or a whole bundle
    ("leaf3-spine5": every parallel cable) to a capacity factor in (0, 1].
    `failed_switches` names the failed parts routing goes around: spine and core
    switches ("spine3", "core1") and inter-switch cables, one ("leaf3-spine5.0") or
    a whole bundle ("leaf3-spine5"). A leaf or a NIC cable cannot fail here (its
    nodes leave the job instead). A factor outside (0, 1], an unknown name or a
    part that cannot fail raises ValueError naming it.
    """
    net, cluster = scenario.network, scenario.cluster
    rails = net.nics_per_node
    tree = network.scenario_fat_tree(scenario)
    if net.placement == "scattered":
        position = np.random.default_rng(placement_seed).permutation(cluster.nodes)
    else:
        position = np.arange(cluster.nodes)
    fabric = Fabric(tree, rails, cluster.nodes, position)
    wanted = _checked_factors(degrade)
    failed = set(failed_switches or ())
    used: set[str] = set()  # degrade keys that named a cable or a bundle
    cut: set[str] = set()  # failed parts that named an inter-switch cable or bundle
    bundles: list[str] = []  # inter-switch bundles, in order (for messages)
    line = network.nic_GB_s(net)
    nvlink = network.nvlink_GB_s(cluster.gpu_spec, net)
    half = tree.radix // 2

    def cable(name: str, bundle: str | None = None) -> None:
        f = 1.0
        for key in (bundle, name):
            if key is not None and key in wanted:
                f *= wanted[key]
                used.add(key)
            if bundle is not None and key is not None and key in failed:
                f = 0.0  # an inter-switch cable that failed: routing skips it
                cut.add(key)
        if bundle is not None and (not bundles or bundles[-1] != bundle):
            bundles.append(bundle)
        fabric.link(name, "up", line * f)
        fabric.link(name, "down", line * f)

    for node in range(cluster.nodes):
        for gpu in range(cluster.gpus_per_node):
            fabric.link(f"node{node}.gpu{gpu}.nvlink", "egress", nvlink)
        for rail in range(rails):
            cable(f"node{node}.rail{rail}")
    # leaf uplink port j goes to spine j mod S (of its pod), as parallel cable j div S
    spines_per_group = tree.spines if tree.tiers == 2 else half
    for leaf in range(tree.leaves):
        base = 0 if tree.tiers == 2 else (leaf // tree.leaves_per_pod) * half
        for port in range(tree.leaf_up):
            spine = base + port % spines_per_group
            bundle = f"leaf{leaf}-spine{spine}"
            cable(f"{bundle}.{port // spines_per_group}", bundle)
    routing = {"spines_per_group": spines_per_group, "failed": failed, "cores_per_plane": 0}
    if tree.tiers == 3:
        pods = math.ceil(tree.leaves / tree.leaves_per_pod)
        cores_per_plane = max(1, math.ceil(tree.cores / half))
        routing.update(pods=pods, cores_per_plane=cores_per_plane)
        # spine j of every pod connects to the cores of plane j; uplink port q to core q mod C
        for pod in range(pods):
            for j in range(half):
                spine = pod * half + j
                for port in range(half):
                    core = j * cores_per_plane + port % cores_per_plane
                    bundle = f"spine{spine}-core{core}"
                    cable(f"{bundle}.{port // cores_per_plane}", bundle)
    spines = tree.spines if tree.tiers == 2 else routing["pods"] * half
    unknown = set(wanted) - used
    if unknown:
        raise ValueError(f"unknown link(s) {_quoted(unknown)}; {_link_names(fabric, bundles)}")
    switches = {f"spine{s}" for s in range(spines)} | {f"core{c}" for c in range(tree.cores)}
    bad = failed - switches - cut
    leaves = {n for n in bad if re.fullmatch(r"leaf\d+", n) and int(n[4:]) < tree.leaves}
    nics = {n for n in bad if (n, "up") in fabric._index}
    if leaves or nics:
        raise ValueError(
            f"{_quoted(leaves | nics)} cannot fail in the fabric model: losing a leaf switch "
            "or a NIC cable takes its nodes out of the job rather than rerouting; degrade "
            "a NIC cable with a factor in (0, 1] instead"
        )
    if bad:
        cores = f" and cores core0 … core{tree.cores - 1}" if tree.cores else ""
        raise ValueError(
            f"unknown switch or cable {_quoted(bad)}; what can fail: spines spine0 … "
            f"spine{spines - 1}{cores}, or an inter-switch cable, one "
            f"({bundles[0]}.0) or a whole bundle ({bundles[0]})"
        )
    routing["adaptive"] = net.routing == "adaptive"
    if routing["adaptive"]:
        _spread_pipes(fabric, failed)
    return fabric, routing


ROUTING_WORDS = {
    "adaptive": "adaptive: flows spread over every surviving equal-cost path",
    "static": "static destination-mod-k: a failed part's flows move onto the next port",
}


def _spread_pipes(fabric: Fabric, failed: set[str]) -> None:
    """Adaptive routing's pipes: per leaf, its uplink cables; per pod (three tiers), its
    spines' cables to the cores; each of the summed capacity of the cables whose switches
    are up (failed cables already have none)."""
    half = fabric.tree.radix // 2
    totals: dict[str, float] = {}
    for name, direction, capacity in zip(
        fabric.names, fabric.directions, fabric.capacity_GB_s, strict=True
    ):
        if direction != "up" or "-" not in name:
            continue
        lower, upper = name.split(".")[0].split("-")
        pipe = lower if lower.startswith("leaf") else f"pod{int(lower[5:]) // half}"
        key = f"{pipe}.uplinks"
        fabric.members.setdefault(key, []).append(name)
        alive = not ({lower, upper} & failed)
        totals[key] = totals.get(key, 0.0) + (capacity if alive else 0.0)
    for key, total in totals.items():
        fabric.link(key, "up", total)
        fabric.link(key, "down", total)


def _checked_factors(degrade: dict[str, float] | None) -> dict[str, float]:
    """The capacity factors, each a finite number in (0, 1]; anything else is refused
    (NaN, ±inf, zero, negative, above 1, not a number)."""
    factors = dict(degrade or {})
    bad = [
        f"{name}={value!r}"
        for name, value in factors.items()
        if isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (math.isfinite(value) and 0.0 < value <= 1.0)
    ]
    if bad:
        raise ValueError(
            f"degrade factor {', '.join(sorted(bad))} is not in (0, 1]: a factor scales a "
            "link's capacity (0.5 halves it); a failed cable or switch is given with "
            "--fail-switch instead (e.g. --fail-switch leaf0-spine0.0 for one cable, "
            "leaf0-spine0 for all its parallel cables, spine3 for a switch)"
        )
    return factors


def _link_names(fabric: Fabric, bundles: list[str]) -> str:
    """What link names look like on this fabric, first … last of each kind."""
    last = f"node{fabric.nodes - 1}.rail{fabric.rails - 1}"
    kinds = [f"NIC cables node0.rail0 … {last}"]
    for kind, up in (("leaf", "spine"), ("spine", "core")):
        mine = [b for b in bundles if b.startswith(kind)]
        if mine:
            kinds.append(f"{kind}-{up} bundles {mine[0]} … {mine[-1]}")
    example = f", or one cable of a bundle, e.g. {bundles[0]}.0" if bundles else ""
    return "links here are " + ", ".join(kinds) + example


def _quoted(names) -> str:
    return ", ".join(repr(n) for n in sorted(names, key=_natural))


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _compact(names) -> str:
    """Names with runs of consecutive numbers folded: spine0..spine15, core2, leaf0-spine3.1."""
    runs: dict[str, list[int]] = {}
    parts: list[str] = []
    for name in names:
        m = re.fullmatch(r"([a-z]+)(\d+)", name)
        if m:
            runs.setdefault(m[1], []).append(int(m[2]))
        else:
            parts.append(name)
    parts.sort(key=_natural)
    folded: list[str] = []
    for prefix in sorted(runs):
        numbers_ = sorted(set(runs[prefix]))
        start = prev = numbers_[0]
        for x in [*numbers_[1:], None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            if prev - start >= 2:
                folded.append(f"{prefix}{start}..{prefix}{prev}")
            else:
                folded += [f"{prefix}{i}" for i in range(start, prev + 1)]
            if x is not None:
                start = prev = x
    parts = folded + parts
    if len(parts) > 8:
        parts = [*parts[:8], f"… {len(parts) - 8} more"]
    return ", ".join(parts) or "nothing"


def _leaf(fabric: Fabric, node: int, rail: int) -> int:
    su = int(fabric.position[node]) // fabric.tree.leaf_down
    return su * fabric.rails + rail


def route(fabric: Fabric, routing: dict, src: tuple[int, int], dst: tuple[int, int]) -> list[int]:
    """Links from NIC port (node, rail) to NIC port (node, rail): with adaptive routing
    through the spread pipes (`_spread_route`), else static.

    Static routing as InfiniBand's fat-tree engine does it: the destination's port
    index j in its leaf picks the leaf uplink (spine j mod S, parallel cable
    j div S) on both sides, and the destination leaf's index in its pod picks the
    spine's uplink to a core, so every destination has its own way down and a
    permutation (a ring) is non-blocking on a healthy tree. Failed cables and
    switches are skipped by trying the next port; FabricPartitioned if none is left.
    """
    (sn, sr), (dn, dr) = src, dst
    tree, cap, failed = fabric.tree, fabric.capacity_GB_s, routing["failed"]
    path = [fabric.id(f"node{sn}.rail{sr}", "up")]
    ls, ld = _leaf(fabric, sn, sr), _leaf(fabric, dn, dr)
    if ls != ld and routing.get("adaptive"):
        path += _spread_route(fabric, routing, ls, ld)
    elif ls != ld:
        per = routing["spines_per_group"]
        three = tree.tiers == 3
        pod_s = ls // tree.leaves_per_pod if three else 0
        pod_d = ld // tree.leaves_per_pod if three else 0
        local = int(fabric.position[dn]) % tree.leaf_down
        for attempt in range(tree.leaf_up):
            j = (local + attempt) % tree.leaf_up
            name_s = f"leaf{ls}-spine{pod_s * per + j % per}.{j // per}"
            name_d = f"leaf{ld}-spine{pod_d * per + j % per}.{j // per}"
            if {f"spine{pod_s * per + j % per}", f"spine{pod_d * per + j % per}"} & failed:
                continue
            up, down = fabric.id(name_s, "up"), fabric.id(name_d, "down")
            if cap[up] <= 0 or cap[down] <= 0:
                continue
            if pod_s == pod_d:
                path += [up, down]
                break
            core_hop = _core_hop(
                fabric, routing, pod_s * per + j % per, pod_d * per + j % per, j % per, ld
            )
            if core_hop is not None:
                path += [up, *core_hop, down]
                break
        else:
            raise FabricPartitioned(
                f"the what-if partitions the fabric: leaf{ls} cannot reach leaf{ld} "
                f"(failed: {_compact(failed)})"
            )
    path.append(fabric.id(f"node{dn}.rail{dr}", "down"))
    return path


def _spread_route(fabric: Fabric, routing: dict, ls: int, ld: int) -> list[int]:
    """Adaptive routing from leaf `ls` to leaf `ld`: up the source leaf's pipe (and its
    pod's, to another pod), down the destination's."""
    pipes = [(f"leaf{ls}", "up"), (f"leaf{ld}", "down")]
    tree = fabric.tree
    if tree.tiers == 3:
        pod_s, pod_d = ls // tree.leaves_per_pod, ld // tree.leaves_per_pod
        if pod_s != pod_d:
            pipes[1:1] = [(f"pod{pod_s}", "up"), (f"pod{pod_d}", "down")]
    links = [fabric.id(f"{pipe}.uplinks", direction) for pipe, direction in pipes]
    if any(fabric.capacity_GB_s[i] <= 0 for i in links):
        raise FabricPartitioned(
            f"the what-if partitions the fabric: leaf{ls} cannot reach leaf{ld} "
            f"({', '.join(p for p, _ in pipes)}: no uplink left; failed: "
            f"{_compact(routing['failed'])})"
        )
    return links


def _core_hop(
    fabric: Fabric, routing: dict, s_up: int, s_down: int, plane: int, ld: int
) -> list[int] | None:
    """Spine → core → spine in `plane`, the spine uplink picked by the destination leaf."""
    half = fabric.tree.radix // 2
    cpp = routing["cores_per_plane"]
    cap, failed = fabric.capacity_GB_s, routing["failed"]
    start = ld % fabric.tree.leaves_per_pod
    for attempt in range(half):
        q = (start + attempt) % half
        core = plane * cpp + q % cpp
        if f"core{core}" in failed:
            continue
        up = fabric.id(f"spine{s_up}-core{core}.{q // cpp}", "up")
        down = fabric.id(f"spine{s_down}-core{core}.{q // cpp}", "down")
        if cap[up] > 0 and cap[down] > 0:
            return [up, down]
    return None


# --------------------------------------------------------------------------- traffic


@dataclass
class Phase:
    """Flows that start together: per flow its bytes and its links; repeated `repeat` times."""

    name: str
    bytes_per_flow: list[float] = field(default_factory=list)
    paths: list[list[int]] = field(default_factory=list)
    repeat: int = 1


def _by_node(members: list[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    nodes: dict[int, list[int]] = {}
    for node, gpu in members:
        nodes.setdefault(node, []).append(gpu)
    return list(nodes.items())


def ring_phases(
    fabric: Fabric, routing: dict, groups, size_bytes: float, gpus_per_node: int
) -> list[Phase]:
    """One ring step of every group at once: per channel, NVLink hops inside each node and
    one inter-node hop on the channel's rail; repeated 2(n−1) times."""
    step = Phase("ring step")
    gpus_per_nic = gpus_per_node // fabric.rails
    ranks = len(groups[0])
    for members in groups:
        per_node = _by_node(members)
        k = len(per_node[0][1])
        channels = max(1, math.ceil(k / gpus_per_nic)) if len(per_node) > 1 else k
        chunk = size_bytes / channels / ranks
        for c in range(channels):
            for i, (node, gpus) in enumerate(per_node):
                order = gpus[c % k :] + gpus[: c % k]
                last = len(per_node) == 1
                hops = order if last else order[:-1]
                for gpu in hops:  # NVLink egress of each GPU that forwards inside the node
                    step.bytes_per_flow.append(chunk)
                    step.paths.append([fabric.id(f"node{node}.gpu{gpu}.nvlink", "egress")])
                if not last:
                    nxt = per_node[(i + 1) % len(per_node)][0]
                    rail = order[0] // gpus_per_nic
                    step.bytes_per_flow.append(chunk)
                    step.paths.append(route(fabric, routing, (node, rail), (nxt, rail)))
    step.repeat = 2 * (ranks - 1)
    return [step]


def _btree_parents(n: int) -> list[int]:
    """NCCL's binary tree over ranks 0..n−1 (rank 0 the root): odd ranks are leaves."""
    parents = [-1]
    for rank in range(1, n):
        bit = rank & -rank
        up = (rank ^ bit) | (bit << 1)
        parents.append(up if up < n else rank ^ bit)
    return parents


def _double_binary_tree(nodes: list[int]) -> list[list[tuple[int, int]]]:
    """(child, parent) edges of NCCL's two complementary trees: the second is the first
    shifted by one rank (even n) or mirrored (odd n), so a node is interior in at most one."""
    n = len(nodes)
    parents = _btree_parents(n)
    role = (lambda r: (r + 1) % n) if n % 2 == 0 else (lambda r: n - 1 - r)
    first = [(nodes[r], nodes[p]) for r, p in enumerate(parents) if p >= 0]
    second = [(nodes[role(r)], nodes[role(p)]) for r, p in enumerate(parents) if p >= 0]
    return [first, second]


def tree_phases(
    fabric: Fabric, routing: dict, groups, size_bytes: float, gpus_per_node: int
) -> list[Phase]:
    """NCCL's double binary tree between nodes, per channel: reduce up, then broadcast
    down, S/2 per tree."""
    up, down = Phase("tree reduce"), Phase("tree broadcast")
    gpus_per_nic = gpus_per_node // fabric.rails
    for members in groups:
        per_node = _by_node(members)
        nodes = [n for n, _ in per_node]
        k = len(per_node[0][1])
        channels = max(1, math.ceil(k / gpus_per_nic))
        half = size_bytes / channels / 2
        trees = _double_binary_tree(nodes)
        for c in range(channels):
            rail = per_node[0][1][c % k] // gpus_per_nic
            for edges in trees:
                for child, parent in edges:
                    up.bytes_per_flow.append(half)
                    up.paths.append(route(fabric, routing, (child, rail), (parent, rail)))
                    down.bytes_per_flow.append(half)
                    down.paths.append(route(fabric, routing, (parent, rail), (child, rail)))
    return [up, down]


# --------------------------------------------------------------------------- fluid simulation


def max_min_rates(paths: list[list[int]], active: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates (GB/s) of the active flows by progressive filling."""
    return _progressive_filling(paths, active, capacity)[0]


def _progressive_filling(
    paths: list[list[int]], active: np.ndarray, capacity: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Max-min fair rates of the active flows, and per link the fair share at which it
    filled up: the rate of each flow it limits (inf for a link that never fills).

    Each round raises the open flows to the lowest remaining share of any link they
    cross and freezes every open flow of the links at that share. The link with the
    lowest share has an open flow, so each round freezes at least one flow and there
    are at most as many rounds as active flows; the cap turns a broken invariant into
    an error instead of a hang. Capacities must be finite and ≥ 0 (a NaN share would
    never be the minimum, and no round would freeze anything).
    """
    capacity = np.asarray(capacity, dtype=float)
    bad = ~np.isfinite(capacity) | (capacity < 0)
    if bad.any():
        raise ValueError(
            f"link capacities must be finite and ≥ 0 GB/s; {int(bad.sum())} are not "
            f"(e.g. link {int(np.flatnonzero(bad)[0])}: {capacity[bad][0]})"
        )
    active = np.asarray(active, dtype=bool)
    flow_of = np.repeat(np.arange(len(paths)), [len(p) for p in paths])
    link_of = (
        np.concatenate([np.asarray(p, dtype=np.int64) for p in paths])
        if paths
        else np.zeros(0, np.int64)
    )
    rates = np.zeros(len(paths))
    filled = np.full(capacity.size, np.inf)
    remaining = capacity.copy()
    open_entry = active[flow_of].copy()
    rounds = int(active.sum()) + 1
    for _ in range(rounds):
        if not open_entry.any():
            return rates, filled
        counts = np.bincount(link_of[open_entry], minlength=capacity.size)
        used = counts > 0
        share = np.full(capacity.size, np.inf)
        share[used] = np.maximum(remaining[used], 0.0) / counts[used]
        level = share.min()
        bottleneck = used & (share <= level * (1 + 1e-12))
        hit = np.unique(flow_of[open_entry & bottleneck[link_of]])
        if hit.size == 0:
            raise RuntimeError(f"max-min fair sharing froze no flow at share {level} (a bug)")
        rates[hit] = level
        filled[bottleneck] = level
        frozen_entry = open_entry & np.isin(flow_of, hit)
        remaining -= np.bincount(link_of[frozen_entry], minlength=capacity.size) * level
        open_entry &= ~frozen_entry
    raise RuntimeError(f"max-min fair sharing did not finish in {rounds} rounds (a bug)")


@dataclass(frozen=True)
class LinkLoad:
    """One direction of a link when a phase's flows have just started, under max-min sharing.

    flows: how many flows of the phase cross it.
    share_GB_s: its max-min fair share, the largest rate any of its flows gets; on a
        bottleneck link (limited_flows > 0) that is exactly the rate of every flow it
        limits, while its other flows are held lower by another link.
    utilisation: the sum of its flows' rates over its capacity (1 on a bottleneck).
    limited_flows: how many of its flows get their rate from this link (0: room to spare).
    """

    name: str
    direction: str
    capacity_GB_s: float
    flows: int
    share_GB_s: float
    utilisation: float
    limited_flows: int


@dataclass(frozen=True)
class FabricResult:
    """One collective on the fabric.

    bottlenecks: the links that set some flow's rate in the first phase (all its flows
    started), lowest per-flow rate first, then most flows; at most `top` of them.
    """

    kind: str
    algorithm: str
    size_bytes: float
    ranks: int
    seconds: float
    phase_seconds: dict[str, float]
    bottlenecks: list[LinkLoad]

    @property
    def busbw_GB_s(self) -> float:
        return self.size_bytes / 1e9 / self.seconds * network.bus_factor(self.kind, self.ranks)


def _run_phase(
    env: simpy.Environment, phase: Phase, capacity: np.ndarray, out: dict
) -> simpy.events.Event:
    def process():
        size = np.asarray(phase.bytes_per_flow, dtype=float) / 1e9  # GB
        remaining = size.copy()
        active = remaining > 0
        start = env.now
        first = True
        while active.any():  # each event ends at least one flow
            rates, filled = _progressive_filling(phase.paths, active, capacity)
            if first:
                out["rates"], out["filled"], first = rates.copy(), filled, False
            if np.any(rates[active] <= 0):
                raise RuntimeError(
                    f"{phase.name}: a flow has no bandwidth (a failed link on its only path)"
                )
            times = np.where(active, remaining / np.where(active, rates, 1.0), np.inf)
            dt = times.min()
            yield env.timeout(dt)
            done = times <= dt
            remaining = np.where(active, remaining - rates * dt, remaining)
            remaining[done] = 0.0
            active &= ~done & (remaining > 1e-12 * size)
        out["seconds"] = env.now - start

    return env.process(process())


@dataclass
class Traffic:
    """One all-reduce laid out on the fabric: its phases, algorithm, latency and group."""

    fabric: Fabric
    routing: dict
    phases: list[Phase]
    algorithm: str
    latency_s: float
    group: Group


def traffic(
    scenario: Scenario,
    size_bytes: float,
    groups: str = "data_parallel",
    algorithm: str | None = None,
    degrade: dict[str, float] | None = None,
    failed_switches: set[str] | None = None,
) -> Traffic:
    """Lay out one all-reduce of `size_bytes` per rank on the scenario's fabric."""
    net = scenario.network
    para = scenario.parallelism
    fabric, routing = build_fabric(scenario, degrade, failed_switches)
    data_parallel = groups == "data_parallel"
    layout = Layout(
        scenario.cluster.nodes,
        scenario.cluster.gpus_per_node,
        para.tensor if data_parallel else 1,
        para.pipeline if data_parallel else 1,
        para.context if data_parallel else 1,
    )
    members = layout.dp_groups() if data_parallel else layout.everyone()
    group = (
        layout.dp_group()
        if data_parallel
        else Group(scenario.cluster.nodes, scenario.cluster.gpus_per_node)
    )
    algorithm = algorithm or net.collective
    if algorithm == "auto":
        algorithm = network.collective(
            "all_reduce",
            size_bytes,
            group,
            net,
            scenario.cluster.gpu_spec,
            scenario.cluster.gpus_per_node,
            "auto",
        ).algorithm
    alpha = network.step_latency_s(group, net)
    if algorithm == "tree" and group.nodes > 1:
        phases = tree_phases(fabric, routing, members, size_bytes, scenario.cluster.gpus_per_node)
        latency = network.tree_cost(size_bytes, group.nodes, 1.0, alpha)[0]
    elif algorithm == "nvls" and group.nodes == 1:
        # NVLink SHARP inside the node: the ring's NVLink flows, each byte sped up by the
        # switch's reduction (network.NVLS_SPEEDUP), at NVLS's latency
        phases = ring_phases(fabric, routing, members, size_bytes, scenario.cluster.gpus_per_node)
        for phase in phases:
            phase.bytes_per_flow = [b / network.NVLS_SPEEDUP for b in phase.bytes_per_flow]
        latency = network.nvls_cost(size_bytes, group.ranks, 1.0)[0]
    else:
        algorithm = "ring"
        phases = ring_phases(fabric, routing, members, size_bytes, scenario.cluster.gpus_per_node)
        latency = network.ring_cost("all_reduce", size_bytes, group.ranks, 1.0, alpha)[0]
    return Traffic(fabric, routing, phases, algorithm, latency, group)


def simulate_collective(
    scenario: Scenario,
    size_bytes: float,
    groups: str = "data_parallel",
    algorithm: str | None = None,
    degrade: dict[str, float] | None = None,
    failed_switches: set[str] | None = None,
    top: int = 5,
) -> FabricResult:
    """Time one all-reduce of `size_bytes` per rank on the fabric (all groups at once).

    `groups`: "data_parallel" (every DP group of the job concurrently, the gradient
    all-reduce) or "all" (one collective over every GPU, as nccl-tests runs it).
    """
    laid = traffic(scenario, size_bytes, groups, algorithm, degrade, failed_switches)
    fabric, phases = laid.fabric, laid.phases
    capacity = np.asarray(fabric.capacity_GB_s)
    env = simpy.Environment()
    results: list[dict] = [{} for _ in phases]

    def collective():
        for phase, out in zip(phases, results):
            yield _run_phase(env, phase, capacity, out)

    env.run(until=env.process(collective()))
    phase_seconds = {p.name: out["seconds"] * p.repeat for p, out in zip(phases, results)}
    seconds = laid.latency_s + sum(phase_seconds.values())
    return FabricResult(
        "all_reduce",
        laid.algorithm,
        size_bytes,
        laid.group.ranks,
        seconds,
        phase_seconds,
        _bottlenecks(fabric, phases[0], results[0]["rates"], results[0]["filled"], capacity, top),
    )


def _bottlenecks(
    fabric: Fabric,
    phase: Phase,
    rates: np.ndarray,
    filled: np.ndarray,
    capacity: np.ndarray,
    top: int,
) -> list[LinkLoad]:
    """The links that set some flow's rate, lowest per-flow rate first, then most flows.

    `rates` and `filled` are the max-min solution when all the phase's flows run: a
    link limits a flow when it filled up at that flow's rate.
    """
    flow_of = np.repeat(np.arange(len(phase.paths)), [len(p) for p in phase.paths])
    link_of = np.concatenate([np.asarray(p, dtype=np.int64) for p in phase.paths])
    rate = rates[flow_of]
    counts = np.bincount(link_of, minlength=capacity.size)
    load = np.bincount(link_of, weights=rate, minlength=capacity.size)
    share = np.zeros(capacity.size)
    np.maximum.at(share, link_of, rate)
    limits = np.isfinite(filled[link_of]) & (rate >= filled[link_of] * (1 - 1e-9))
    limited = np.bincount(link_of[limits], minlength=capacity.size)
    links = np.flatnonzero(limited)
    util = load[links] / np.where(capacity[links] > 0, capacity[links], np.inf)
    order = np.lexsort((links, -counts[links], share[links]))
    return [
        LinkLoad(
            fabric.names[links[i]],
            fabric.directions[links[i]],
            float(capacity[links[i]]),
            int(counts[links[i]]),
            float(share[links[i]]),
            float(util[i]),
            int(limited[links[i]]),
        )
        for i in order[:top]
    ]
