"""trainsim: discrete-event simulation of multi-week LLM pre-training runs.

The public library API lives in the submodules: `sim.scenario` (load and
validate), `sim.perf` (deterministic calculator), `sim.montecarlo` (replicas and
sweeps), `sim.analysis` (summaries, Young/Daly) and `sim.plots` (figures).
"""

__version__ = "0.1.0"
