"""The scenario space searched longer than the suite searches it: the properties of
tests/properties/test_scenario_space.py over many generated scenarios, a fresh random seed
each time (or --seed), each failure shrunk to a minimal scenario.

Usage: .venv/bin/python benchmarks/scenario_space.py [--examples 200] [--seed S]
           [--only scenario,fit,mutation] [--out DIR]

For each property: how many examples ran, and each finding (a distinct error) with the
scenario hypothesis shrank it to, printed as YAML and written to DIR/<property>-<n>.yaml.
Keep a finding as a regression test: an @example(doc=...) of that property in
tests/properties/test_scenario_space.py. Run it before every stop; exit 1 on a finding.

The three crashes issue 36 names were checked against a copy of the repository at the
commit before their fixes (f226aa0): over 100 drawn scenarios, the scenario property found
calc's ZeroDivisionError on one node split by tensor parallelism (8 times) and the
superposed clock's KeyError with node_rate_cv and spares (4 times); the fit property found
the KeyError too, and fit's Weibull ValueError on its @example (a month of a 256-node fleet
with 18 failures). Random draws of that last one are rare: it needs a run of weeks on
hundreds of nodes with a score of failures, which the draws now include.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.properties.space import (  # noqa: E402
    check_fit_round_trip,
    check_mutation,
    check_scenario,
    mutations,
    scenario_documents,
)


def scenario_case(draw) -> tuple[dict, tuple]:
    doc = draw(scenario_documents())
    return doc, (doc,)


def mutation_case(draw) -> tuple[dict, tuple]:
    doc = draw(scenario_documents())
    bad, path, what = draw(mutations(doc))
    return bad, (bad, path, what)


PROPERTIES = {
    "scenario": (scenario_case, check_scenario),
    "fit": (scenario_case, check_fit_round_trip),
    "mutation": (mutation_case, check_mutation),
}


def signature(exc: BaseException) -> str:
    """What tells two findings apart: the exception's type and the first line of its text,
    numbers and temporary paths left out."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    words = [w for w in text.split() if not any(c.isdigit() for c in w) and "/tmp" not in w]
    return f"{type(exc).__name__}: {' '.join(words)[:160]}"


def search(name: str, examples: int, seed: int) -> tuple[int, dict[str, tuple[dict, str]]]:
    """Run one property over `examples` scenarios: (calls made, findings by signature, each
    the last, i.e. shrunk, scenario that raised it and its message)."""
    case, check = PROPERTIES[name]
    calls = 0
    findings: dict[str, tuple[dict, str]] = {}

    @hypothesis_seed(seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        report_multiple_bugs=True,
    )
    @given(st.data())
    def run(data):
        nonlocal calls
        shown, args = case(data.draw)
        calls += 1
        try:
            check(*args)
        except Exception as exc:
            findings[signature(exc)] = (shown, str(exc))
            raise

    try:
        run()
    except BaseException as exc:  # noqa: BLE001 - a finding (or several, as a group)
        if isinstance(exc, KeyboardInterrupt):
            raise
        if not findings:
            findings[signature(exc)] = ({}, str(exc))
    return calls, findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="examples per property")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed [random]")
    parser.add_argument("--only", default="scenario,fit,mutation", help="properties to run")
    parser.add_argument("--out", type=Path, default=None, help="where findings go as YAML")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {seed}, {args.examples} examples per property")
    found = 0
    for name in args.only.split(","):
        start = time.perf_counter()
        calls, findings = search(name, args.examples, seed)
        took = time.perf_counter() - start
        verdict = f"{len(findings)} finding(s)" if findings else "no finding"
        print(f"{name}: {calls} examples run (shrinking included) in {took:.0f} s: {verdict}")
        for i, (sig, (doc, message)) in enumerate(sorted(findings.items())):
            found += 1
            text = yaml.safe_dump(doc, sort_keys=False)
            print(f"--- {name} finding {i}: {sig}\n{message[:1500]}\nscenario:\n{text}")
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{name}-{i}.yaml").write_text(f"# {sig}\n{text}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
