"""Writes fabric.ipynb (kept as code so the notebook diff stays reviewable).

Run: .venv/bin/python notebooks/make_fabric.py
"""

import nbformat as nbf
from nbgen import FIND_ROOT, write

cells = [
    nbf.v4.new_markdown_cell(
        "# What the fabric costs\n\n"
        "MFU and time-to-train of the 70B run when the step time follows from the fabric "
        "(`performance.compute_efficiency`): against link speed (HDR / NDR / XDR), "
        "oversubscription and rank placement, and cluster size. The gradient all-reduce "
        "comes from the SimPy flow model of the fat tree."
    ),
    nbf.v4.new_code_cell(
        "# inline whatever MPLBACKEND the kernel inherited: under Agg plt.show() shows nothing\n"
        "%matplotlib inline\n\n"
        "from pathlib import Path\n\n"
        "import matplotlib.pyplot as plt\n\n"
        "from sim.model import calculator, perf\n"
        "from sim.model.scenario import load_scenario\n"
        "from sim.runs.api import run_scenario\n\n\n"
        + FIND_ROOT
        + "\nFABRIC = ROOT / 'scenarios' / 'llama70b-1k-fabric.yaml'\n\n\n"
        "def scenario(*overrides):\n"
        "    return load_scenario(FABRIC, list(overrides)).base"
    ),
    nbf.v4.new_markdown_cell("## Link speed, and how much overlap hides it"),
    nbf.v4.new_code_cell(
        "links = {'HDR': 200, 'NDR': 400, 'XDR': 800}\n"
        "fig, ax = plt.subplots(figsize=(7, 4), layout='constrained')\n"
        "for overlap in (0.8, 0.4, 0.0):\n"
        "    mfus = [perf.mfu(scenario(f'network.link_Gb_s={g}', f'performance.overlap={overlap}')) for g in links.values()]\n"
        "    ax.plot(list(links), mfus, marker='o', label=f'overlap {overlap}')\n"
        "ax.set(ylabel='MFU', title='MFU against link speed')\n"
        "ax.grid(alpha=0.3)\n"
        "ax.legend()\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "## Oversubscription and placement\n\n"
        "A ring placed leaf by leaf barely crosses the leaf uplinks, so thinning them costs "
        "nothing; ranks scattered across leaves pay for every cut uplink."
    ),
    nbf.v4.new_code_cell(
        "ratios = [1.0, 2.0, 3.0]\n"
        "fig, ax = plt.subplots(figsize=(7, 4), layout='constrained')\n"
        "curves = {}\n"
        "for placement in ('contiguous', 'scattered'):\n"
        "    curves[placement] = [perf.mfu(scenario(f'network.oversubscription={o}', f'network.placement={placement}',\n"
        "                                           'performance.overlap=0')) for o in ratios]\n"
        "    ax.plot(ratios, curves[placement], marker='o', label=placement)\n"
        "ax.set(xlabel='oversubscription (down:up)', ylabel='MFU (overlap 0)')\n"
        "ax.grid(alpha=0.3)\n"
        "ax.legend()\n"
        "assert curves['contiguous'][0] == curves['contiguous'][-1] > curves['scattered'][-1]\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "## Cluster size\n\nThe same 1.4T tokens and global batch on more nodes: each GPU computes "
        "less per step while the gradient all-reduce per rank stays, so MFU falls as the run gets shorter."
    ),
    nbf.v4.new_code_cell(
        "sizes = [64, 128, 256, 512]\n"
        "rows = []\n"
        "for nodes in sizes:\n"
        "    s = scenario(f'cluster.nodes={nodes}')\n"
        "    c = calculator.calculate(s)\n"
        "    rows.append((nodes * 8, c.mfu, c.ideal_days))\n"
        "fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), layout='constrained')\n"
        "gpus = [r[0] for r in rows]\n"
        "for ax, column, label in [(left, 1, 'MFU'), (right, 2, 'ideal time to train (days)')]:\n"
        "    ax.plot(gpus, [r[column] for r in rows], marker='o')\n"
        "    ax.set_xscale('log', base=2)\n"
        "    ax.set(xlabel='GPUs', ylabel=label)\n"
        "    ax.grid(alpha=0.3)\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "## Time to train with failures, HDR against NDR\n\n"
        "Monte Carlo with the fabric's own failures (cables and switches); few replicas keep "
        "the notebook quick."
    ),
    nbf.v4.new_code_cell(
        "sweep = load_scenario(FABRIC, params=['network.link_Gb_s=200,400,800'])\n"
        "outcome = run_scenario(sweep, replicas=40, workers=1, progress=False)\n"
        "ttt = outcome.summary[outcome.summary.metric == 'time_to_train_days']\n"
        "ttt[['network.link_Gb_s', 'mean', 'sem', 'p95']]"
    ),
    nbf.v4.new_code_cell(
        "means = ttt.set_index('network.link_Gb_s')['mean']\n"
        "assert means[200] > means[400] > means[800], means\n"
        "print(f'HDR costs {means[200] - means[400]:.2f} days over NDR on this run')"
    ),
]
write(cells, "fabric.ipynb")
