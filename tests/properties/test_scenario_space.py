"""Every valid scenario runs: properties over scenarios drawn from the whole schema
(tests/properties/space.py), with a bounded profile (a fixed number of examples, derandomized).
benchmarks/scenario_space.py runs the same properties with many more examples; what it finds
is kept here as an @example, the scenario it shrank to.

- validate accepts the scenario, calc answers with finite numbers, run of a few replicas exits 0
  (or 2 with one message naming a key, never 1), every replica keeps the time identity
  (docs/metrics.md), nothing is negative, counts are whole, and the same seed gives the same
  table serially and with 2 workers;
- run --incidents, then fit of one replica's log, exits 0 and writes a fragment that, put into
  the scenario, validates and runs;
- a valid scenario with one key removed, misspelt, of the wrong type or out of its range is
  refused with exit 2 naming the key.
"""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st

from sim.model.safe_yaml import read_yaml
from tests.conftest import ROOT
from tests.properties.space import (
    check_fit_round_trip,
    check_mutation,
    check_scenario,
    mutations,
    numbers,
    scenario_documents,
)


def bounded(examples: int) -> settings:
    """The suite's profile: a fixed number of examples, the same ones on every run, not
    shrunk (shrinking a failure can take minutes: benchmarks/scenario_space.py shrinks)."""
    return settings(
        max_examples=examples,
        derandomize=True,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def base(**sections) -> dict:
    """A small valid scenario (16 GPUs, 100 steps of 1.5 ms) with sections replaced."""
    doc = {
        "name": "found",
        "model": {"params": 1.0e6, "tokens": 1.0e5, "global_batch_tokens": 1000},
        "cluster": {"gpu": "H100-SXM", "nodes": 2},
        "performance": {"mfu": 0.5},
        "storage": {"checkpoint_tier": {"kind": "lustre"}},
        "checkpoint": {"interval_steps": 10},
        "simulation": {"horizon_days": 1.0},
    }
    for key, value in sections.items():
        doc[key] = {**doc[key], **value} if isinstance(doc.get(key), dict) else value
    return doc


# Found from outside before this generator existed, and found by it since (see the module
# docstring of benchmarks/scenario_space.py for how each was checked).
# calc of one node with tensor parallelism over all its GPUs: ZeroDivisionError in
# compose_at_compute_s
ONE_NODE = base(cluster={"nodes": 1}, parallelism={"tensor": 8})
# fit of a large fleet's log, most of whose nodes never fail: the Weibull profile's scale
# searched in a fixed bracket, ValueError "f(a) and f(b) must have different signs"
# (a month of the shipped 405B scenario on 256 nodes: 18 failures over 2,048 GPUs)
LARGE_FLEET = {
    **numbers(read_yaml(ROOT / "scenarios" / "llama3-405b-16k.yaml")),
    "failures": [{"name": "g", "scope": "gpu", "rate_per_1k_gpu_day": 0.3}],
    "simulation": {"seed": 1, "horizon_days": 3650},
}
LARGE_FLEET["cluster"]["nodes"] = 256
LARGE_FLEET["model"]["tokens"] = 1.0e12
# an exponential node class on nodes unlike each other (node_rate_cv) with a spare: the
# superposed clock's tree mode (more than 8 distinct weights) raised KeyError at a swap
SPREAD_AND_SPARES = base(
    model={"params": 1.0e9, "tokens": 1.0e11, "global_batch_tokens": 1048576},
    cluster={"nodes": 16, "spare_nodes": 2, "node_rate_cv": 1.0},
    checkpoint={"interval_steps": 100},
    failures=[{"name": "c0", "scope": "node", "mtbf_hours": 100}],
    simulation={"horizon_days": 10},
)

# Found by benchmarks/scenario_space.py (open when found):
# calc's cost with failures is NaN (inf x 0) for a job Daly says never finishes, at $0/GPU-hour
NAN_COST = base(
    model={"params": 1.0e9, "tokens": 1.0e9, "global_batch_tokens": 1048576},
    failures=[{"name": "crash", "scope": "job", "mtbf_hours": 0.001}],
    recovery={"restart_minutes": 60},
    cost={"gpu_hour_usd": 0},
)
# a job class at the schema's shortest mtbf_hours on 16 GPUs: fit writes it back as
# rate_per_1k_gpu_day ~1.5e6, past that key's bound (1e6), so validate refuses the fragment
FAST_FAILURES = base(
    model={"params": 1.0e9, "tokens": 2.0e9, "global_batch_tokens": 1048576},
    checkpoint={"interval_steps": 100},
    failures=[{"name": "crash", "scope": "job", "mtbf_hours": 0.001, "detect_minutes": 0.1}],
    recovery={"restart_minutes": 0.1},
)


def show(doc: dict) -> None:
    note("the scenario:\n" + yaml.safe_dump(doc, sort_keys=False))


@bounded(6)
@given(doc=scenario_documents())
@example(doc=ONE_NODE)
@example(doc=SPREAD_AND_SPARES)
@example(doc=NAN_COST)
def test_every_valid_scenario_validates_calculates_and_runs(doc):
    show(doc)
    check_scenario(doc)


@bounded(4)
@given(doc=scenario_documents())
@example(doc=LARGE_FLEET)
@example(doc=FAST_FAILURES)
def test_a_fit_of_a_replicas_log_runs_back(doc):
    show(doc)
    check_fit_round_trip(doc)


@st.composite
def mutated(draw) -> tuple[dict, str, str]:
    return draw(mutations(draw(scenario_documents())))


@bounded(40)
@given(case=mutated())
def test_a_scenario_with_one_bad_key_is_refused_naming_it(case):
    bad, path, what = case
    show(bad)
    check_mutation(bad, path, what)
