"""Writes from_your_data.ipynb (kept as code so the notebook diff stays reviewable).

Run: .venv/bin/python notebooks/make_from_your_data.py
"""

import nbformat as nbf
from nbgen import FIND_ROOT, write

cells = [
    nbf.v4.new_markdown_cell(
        "# From your own cluster's data: fit an incident log, forecast a run in flight\n\n"
        "The failure rates in trainsim's scenarios come from someone else's cluster (Llama 3, "
        "Kokolis et al.). This notebook starts from *yours*: an incident log (one row per "
        "failure: when, which node, which class, how long the repair took) becomes failure "
        "classes with confidence intervals, a lifetime law, lemons and repair times "
        "(`trainsim fit`); the fitted classes replace a scenario's own; and a run that has been "
        "going for some days is forecast from its newest checkpoint, its rates updated by what "
        "it has seen (`trainsim forecast`). docs/fitting.md has every formula.\n\n"
        "The log here is `examples/incidents.csv`: 60 days of a 64-node cluster, drawn with "
        "known rates (GPU Xids 3 per 1,000 GPU-days, host failures 1.5 with Weibull shape 0.7, "
        "NCCL hangs 0.6, three lemon nodes failing 6x as often) so that the fit can be judged."
    ),
    nbf.v4.new_code_cell(
        "# inline whatever MPLBACKEND the kernel inherited: under Agg plt.show() shows nothing\n"
        "%matplotlib inline\n\n"
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "import matplotlib.pyplot as plt\n"
        "import pandas as pd\n"
        "import yaml\n\n"
        "from sim.data import fit, logs\n"
        "from sim.data import forecast as forecasting\n"
        "from sim.runs.api import run_scenario\n"
        "from sim.show import palette, plots\n"
        "from sim.show.fit_plots import draw_counts, draw_lifetimes\n\n\n"
        + FIND_ROOT
        + "\nLOG = ROOT / 'examples' / 'incidents.csv'\n"
        "SCENARIO = ROOT / 'scenarios' / 'llama7b-128.yaml'\n"
        "pd.read_csv(LOG).head()"
    ),
    nbf.v4.new_markdown_cell(
        "## 1. Fit the log\n\n"
        "The window is the 60 days the log covers (the first failure is not its start); rates "
        "are per 1,000 GPU-days of the 64 nodes x 8 GPUs, with exact Poisson intervals."
    ),
    nbf.v4.new_code_cell(
        "log = logs.read_log(LOG, nodes=64, gpus_per_node=8,\n"
        "                   start='2026-03-01T00:00:00Z', end='2026-04-30T00:00:00Z')\n"
        "result = fit.fit_log(log, seed=0)\n"
        "for warning in result.warnings:\n"
        "    print('warning:', warning)\n"
        "table = pd.DataFrame(fit.table_rows(result),\n"
        "                     columns=['class', 'parameter', 'value', '95% low', '95% high', 'events'])\n"
        "table.round(3)"
    ),
    nbf.v4.new_markdown_cell(
        "Each class's times between two failures of a node (Kaplan-Meier: the last stretch of "
        "each node is cut off by the window's end; the first, from the window's start, is the "
        "rest of a life already running and is left out) against the fitted exponential and "
        "Weibull. The "
        "host failures bend away from the exponential: many early repeats, then long quiet "
        "stretches (shape < 1), and AIC picks the Weibull; the GPU Xids do not."
    ),
    nbf.v4.new_code_cell(
        "classes = {c.name: c for c in result.classes}\n"
        "fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), layout='constrained')\n"
        "for ax, name in zip(axes, ['host', 'gpu_xid']):\n"
        "    draw_lifetimes(classes[name], ax)\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "Lemons: the per-node failure counts are far more spread than one Poisson rate "
        "allows (the dispersion test), and a two-component mixture finds a few nodes failing "
        "several times as often. Its bootstrap intervals are wide: three lemons in 64 nodes "
        "is little to go on."
    ),
    nbf.v4.new_code_cell(
        "fig, ax = plt.subplots(figsize=(7, 4), layout='constrained')\n"
        "draw_counts(result.lemons, ax)\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "The fragment `trainsim fit` writes (`fitted.yaml`): a `failures:` list that replaces "
        "a scenario's own, and the lemons. On the command line: "
        '`trainsim run SCENARIO --set "failures=$(cat failures.yaml)" '
        "--set cluster.lemon_fraction=...`; here, the same overrides."
    ),
    nbf.v4.new_code_cell(
        "fragment = result.fragment()\n"
        "print(yaml.safe_dump(fragment, sort_keys=False))\n"
        "FITTED = [f\"failures={yaml.safe_dump(fragment['failures'])}\"]\n"
        "FITTED += [f'cluster.{key}={value}' for key, value in fragment.get('cluster', {}).items()]\n"
        "own = run_scenario(SCENARIO, replicas=60, seed=7, workers=1, progress=False).table\n"
        "yours = run_scenario(SCENARIO, overrides=FITTED, replicas=60, seed=7, workers=1,\n"
        "                     progress=False).table\n"
        "pd.DataFrame({'Llama 3 rates (the scenario)': own.time_to_train_days.describe(),\n"
        "              'your cluster (fitted)': yours.time_to_train_days.describe()}).round(2)"
    ),
    nbf.v4.new_markdown_cell(
        "## 2. Forecast a run in flight\n\n"
        "The same 7B job on the fitted cluster has been going for 10 days; its newest durable "
        "checkpoint is at step 200,000 of 476,838. Its own on-call log is below: this run's "
        "nodes have been failing about twice as often as the fit said (here the log is "
        "simulated by trainsim itself, `incidents=True`, with every rate doubled, and cut at "
        "day 10). "
        "Each class's rate gets a gamma prior centred on the scenario's rate, worth a week of "
        "the job's GPU-days, and the conjugate posterior from the run's own failures; each "
        "replica draws its rates from the posterior."
    ),
    nbf.v4.new_code_cell(
        "ELAPSED_DAYS, DONE_STEPS, DEADLINE_DAYS = 10.0, 200_000, 24.0\n"
        "worse = FITTED + [f\"failures.{i}.rate_per_1k_gpu_day={2 * f['rate_per_1k_gpu_day']}\"\n"
        "                  for i, f in enumerate(fragment['failures'])]\n"
        "folder = Path(tempfile.mkdtemp())\n"
        "world = run_scenario(SCENARIO, overrides=worse, replicas=1, seed=99, workers=1,\n"
        "                     progress=False, out=folder, incidents=True)\n"
        "incidents = pd.read_parquet(world.run_dir / 'incidents.parquet')\n"
        "so_far = incidents[incidents.time <= ELAPSED_DAYS * 24][['time', 'node', 'class']]\n"
        "so_far.to_csv(folder / 'this-run.csv', index=False)\n"
        "# the forecast reads the scenario file and --set overrides, as the command does\n"
        "forecast = forecasting.forecast(SCENARIO, ELAPSED_DAYS, DONE_STEPS,\n"
        "                                incidents=folder / 'this-run.csv', deadline_days=DEADLINE_DAYS,\n"
        "                                replicas=60, seed=7, overrides=FITTED)\n"
        "expected = forecasting.expected_failures(forecast.classes)\n"
        "pd.DataFrame([{'class': c.name, 'seen': c.events, 'expected': expected[c.name],\n"
        "               'scenario rate': c.scenario_rate, 'posterior mean': c.posterior.mean,\n"
        "               '95% low': c.posterior.interval()[0], '95% high': c.posterior.interval()[1]}\n"
        "              for c in forecast.classes]).round(3)"
    ),
    nbf.v4.new_markdown_cell(
        "`expected` is what the scenario's rate gives over the run's exposure so far (its "
        "nodes x GPUs x 10 days); the posterior sits between the prior and what the run saw, "
        "the more so the longer the run has gone. Two things the counts do not say on their "
        "own (docs/fitting.md, limits): the counts of the host class, a Weibull of shape < 1 "
        "whose nodes are in service (`age: in_service`), bunch more than Poisson counts, so "
        "the update, which reads them as Poisson, is surer than it should be; and a job that "
        "waited for nodes had fewer of them exposed than "
        "the nodes x days it is credited with, which pulls the update down. The forecast "
        "beside the scenario alone:"
    ),
    nbf.v4.new_code_cell(
        "rows = {'with the run\\'s log': forecast.forecast.summary(),\n"
        "        'scenario alone': forecast.unconditional.summary()}\n"
        "pd.DataFrame({name: {'days to go (mean)': s['remaining_days']['mean'],\n"
        "                     'total days (p50)': s['total_days']['p50'],\n"
        "                     'total days (p95)': s['total_days']['p95'],\n"
        "                     f'P(done by day {DEADLINE_DAYS:g})': s['p_deadline'],\n"
        "                     'cost to go (USD, mean)': s['cost_to_go_usd']['mean']}\n"
        "              for name, s in rows.items()}).round(3)"
    ),
    nbf.v4.new_code_cell(
        "fig, ax = plt.subplots(figsize=(8, 4), layout='constrained')\n"
        "# a replica far out in the tail would squeeze the rest into a few bars: the axis stops\n"
        "# short of it, and an arrow at the right edge counts the replicas beyond\n"
        "plots.draw_histograms(ax, [\n"
        "    ('scenario alone', forecast.unconditional.table.total_days, palette.SERIES[0]),\n"
        "    ('with the run\\'s log', forecast.forecast.table.total_days, palette.SERIES[1]),\n"
        "], start=ELAPSED_DAYS)\n"
        "ax.axvline(DEADLINE_DAYS, color=palette.BEST_OUTLINE, linestyle='--', label='deadline')\n"
        "ax.set_xlabel('total days of the run (10 done + the forecast rest)')\n"
        "ax.set_ylabel('replicas')\n"
        "ax.set_title('A run in flight: its own failures move the forecast')\n"
        "ax.legend(loc='upper right')\n"
        "plt.show()"
    ),
]

if __name__ == "__main__":
    print(write(cells, "from_your_data.ipynb"))
