"""Writes checkpoint_intervals.ipynb (kept as code so the notebook diff stays reviewable).

Run: .venv/bin/python notebooks/make_checkpoint_intervals.py
"""

import nbformat as nbf
from nbgen import FIND_ROOT, write

cells = [
    nbf.v4.new_markdown_cell(
        "# Which checkpoint interval?\n\n"
        "Sweeps the reference scenario's checkpoint interval through the library API and "
        "plots expected time-to-train and lost work against it, with Young's and Daly's "
        "intervals marked. Few replicas keep it fast; raise `REPLICAS` for tighter bands."
    ),
    nbf.v4.new_code_cell(
        "# sim.show.plots returns Figure objects that pyplot does not manage: the inline backend\n"
        "# registers the formatter that lets display() render them as images\n"
        "%matplotlib inline\n\n"
        "from pathlib import Path\n\n"
        "from IPython.display import display\n\n"
        "from sim.model import calculator\n"
        "from sim.model.scenario import load_scenario\n"
        "from sim.runs.api import run_scenario\n"
        "from sim.show import plots, run_figures\n\n\n"
        + FIND_ROOT
        + "\nREFERENCE = ROOT / 'scenarios' / 'llama70b-1k.yaml'\n"
        "REPLICAS = 100"
    ),
    nbf.v4.new_markdown_cell("The calculator first: what theory says before any simulation."),
    nbf.v4.new_code_cell(
        "base = load_scenario(REFERENCE).base\n"
        "calc = calculator.calculate(base)\n"
        "print(f'step {calc.step_time_s:.2f} s, checkpoint write {calc.checkpoint_write_s:.1f} s, '\n"
        "      f'job MTBF {calc.aggregate_mtbf_hours:.1f} h')\n"
        "print(f'Young {calc.young_interval_minutes:.1f} min, Daly {calc.daly_interval_minutes:.1f} min')"
    ),
    nbf.v4.new_code_cell(
        "intervals = [100, 250, 450, 1000, 2000, 4000]  # steps\n"
        "scenario_set = load_scenario(REFERENCE, params=['checkpoint.interval_steps=' + ','.join(map(str, intervals))])\n"
        "outcome = run_scenario(scenario_set, replicas=REPLICAS, workers=1, progress=False)\n"
        "summary = outcome.summary\n"
        "ttt = summary[summary.metric == 'time_to_train_days'][['checkpoint.interval_steps', 'mean', 'sem', 'p95']]\n"
        "ttt"
    ),
    nbf.v4.new_code_cell(
        "marks = run_figures.interval_marks(base, 'checkpoint.interval_steps')\n"
        "display(plots.sweep_curve(summary, 'checkpoint.interval_steps', 'time_to_train_days', marks,\n"
        "                          'mean time to train (days)'))"
    ),
    nbf.v4.new_code_cell(
        "display(plots.sweep_curve(summary, 'checkpoint.interval_steps', 'lost_work_hours', marks,\n"
        "                          'mean lost work (hours)'))"
    ),
    nbf.v4.new_markdown_cell(
        "Why there is a minimum: short intervals pay in checkpoint stall (the job waits for "
        "each write), long ones in lost work (a failure rolls back further). Their sum, and "
        "what a run costs, from the same sweep:"
    ),
    nbf.v4.new_code_cell(
        "display(plots.checkpoint_tradeoff(summary, 'checkpoint.interval_steps', marks))\n"
        "hours = summary.pivot(index='checkpoint.interval_steps', columns='metric', values='mean')\n"
        "hours[['checkpoint_stall_hours', 'lost_work_hours', 'cost_usd']].round(2)"
    ),
    nbf.v4.new_markdown_cell(
        "The stall falls and the lost work grows with the interval; the minimum of the time to "
        "train, and of the cost, sits near Young/Daly. The check below keeps the notebook "
        "honest when it runs in the test suite."
    ),
    nbf.v4.new_code_cell(
        "best = ttt.loc[ttt['mean'].idxmin(), 'checkpoint.interval_steps']\n"
        "print('best interval of the sweep:', best, 'steps; Daly:', round(marks['Daly']), 'steps')\n"
        "assert intervals[1] <= best <= intervals[3], best\n"
        "assert hours.checkpoint_stall_hours.is_monotonic_decreasing, 'the stall falls with the interval'\n"
        "assert hours.lost_work_hours.iloc[-1] > hours.lost_work_hours.iloc[0], 'lost work grows with it'\n"
        "cheapest = hours.cost_usd.idxmin()\n"
        "assert intervals[1] <= cheapest <= intervals[3], cheapest"
    ),
]
write(cells, "checkpoint_intervals.ipynb")
