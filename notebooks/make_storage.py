"""Writes storage.ipynb (kept as code so the notebook diff stays reviewable).

Run: .venv/bin/python notebooks/make_storage.py
"""

import nbformat as nbf
from nbgen import FIND_ROOT, write

cells = [
    nbf.v4.new_markdown_cell(
        "# NFS or Lustre? Sync or async? Is an in-memory level worth it?\n\n"
        "The 70B and 405B runs with their checkpoints on a single NFS server, on Lustre with "
        "8, 32 or 128 OSTs, and on 32 OSTs with async checkpoints or an in-memory level. "
        "Every variant uses Daly's interval for its own checkpoint cost, and the same seeds "
        "(common random numbers), so the differences are the storage's, not the dice's."
    ),
    nbf.v4.new_code_cell(
        "# inline whatever MPLBACKEND the kernel inherited: under Agg plt.show() shows nothing\n"
        "%matplotlib inline\n\n"
        "from pathlib import Path\n\n"
        "import matplotlib.pyplot as plt\n"
        "import numpy as np\n"
        "import pandas as pd\n\n"
        "from sim.model import calculator\n"
        "from sim.model.scenario import load_scenario\n"
        "from sim.runs.api import run_scenario\n"
        "from sim.show import palette\n\n\n"
        + FIND_ROOT
        + "\nMODELS = {'70B on 1,024 GPUs': 'llama70b-1k.yaml', '405B on 8,192 GPUs': 'llama405b-8k.yaml'}\n"
        "LUSTRE = 'storage.checkpoint_tier={{kind: lustre, osts: {}}}'\n"
        "VARIANTS = {\n"
        "    'NFS': ['storage.checkpoint_tier={kind: nfs}'],\n"
        "    'Lustre 8 OSTs': [LUSTRE.format(8)],\n"
        "    'Lustre 32 OSTs': [LUSTRE.format(32)],\n"
        "    'Lustre 128 OSTs': [LUSTRE.format(128)],\n"
        "    'Lustre 32 + async': [LUSTRE.format(32), 'checkpoint.mode=async'],\n"
        "    'Lustre 32 + in-memory': [LUSTRE.format(32), 'checkpoint.memory_every_steps=50'],\n"
        "}\n"
        "REPLICAS = {'70B on 1,024 GPUs': 60, '405B on 8,192 GPUs': 20}\n"
        "# the buckets of the time identity beyond the ideal compute (docs/metrics.md)\n"
        "OVERHEADS = ['slowdown', 'lost_work', 'checkpoint_stall', 'downtime']"
    ),
    nbf.v4.new_markdown_cell("What each choice costs per checkpoint, before any failure:"),
    nbf.v4.new_code_cell(
        "rows = []\n"
        "for model, file in MODELS.items():\n"
        "    for variant, overrides in VARIANTS.items():\n"
        "        s = load_scenario(ROOT / 'scenarios' / file, [*overrides, 'checkpoint.interval=daly']).base\n"
        "        c = calculator.calculate(s)\n"
        "        rows.append({'model': model, 'variant': variant, 'write_s': c.checkpoint_write_s,\n"
        "                     'blocks_s': c.checkpoint_blocking_s, 'interval_min': c.interval_minutes})\n"
        "costs = pd.DataFrame(rows)\n"
        "costs.round(2)"
    ),
    nbf.v4.new_code_cell(
        "results = []\n"
        "for model, file in MODELS.items():\n"
        "    for variant, overrides in VARIANTS.items():\n"
        "        outcome = run_scenario(ROOT / 'scenarios' / file, overrides=[*overrides, 'checkpoint.interval=daly'],\n"
        "                               replicas=REPLICAS[model], seed=7, workers=1, progress=False)\n"
        "        t = outcome.table\n"
        "        results.append({'model': model, 'variant': variant,\n"
        "                        'time_to_train_days': t.time_to_train_days.mean(),\n"
        "                        'ideal_days': t.ideal_hours.mean() / 24,\n"
        "                        **{f'{b}_hours': t[f'{b}_hours'].mean() for b in OVERHEADS}})\n"
        "summary = pd.DataFrame(results)\n"
        "summary.round(3)"
    ),
    nbf.v4.new_code_cell(
        "# bars from zero: the hours each choice spends beyond the ideal compute, by bucket\n"
        "# (a time-to-train axis starting near 16 days would make small differences look large)\n"
        "# a bucket that is zero in every run is left out of the bars and the legend, which\n"
        "# names it\n"
        "DRAWN = [b for b in OVERHEADS if (summary[f'{b}_hours'] != 0).any()]\n"
        "ZERO = [palette.BUCKETS[b][0] for b in OVERHEADS if b not in DRAWN]\n"
        "fig, axes = plt.subplots(1, 2, figsize=(13, 4.4), layout='constrained')\n"
        "for ax, model in zip(axes, MODELS):\n"
        "    part = summary[summary.model == model].reset_index(drop=True)\n"
        "    y = np.arange(len(part))\n"
        "    left = np.zeros(len(part))\n"
        "    for bucket in DRAWN:\n"
        "        label, colour = palette.BUCKETS[bucket]\n"
        "        ax.barh(y, part[f'{bucket}_hours'], left=left, color=colour, label=label)\n"
        "        left += part[f'{bucket}_hours'].to_numpy()\n"
        "    for row, (hours, days) in enumerate(zip(left, part.time_to_train_days)):\n"
        "        ax.annotate(f'+{hours:.1f} h = {days:.2f} d', (hours, row), xytext=(4, 0),\n"
        "                    textcoords='offset points', va='center', fontsize=9)\n"
        "    ax.set_yticks(y, part.variant)\n"
        "    ax.invert_yaxis()\n"
        "    ax.set_xlim(0, left.max() * 1.5)\n"
        "    ax.set(title=f'{model} (ideal compute {part.ideal_days.iloc[0]:.2f} days)',\n"
        "           xlabel='mean hours per run beyond the ideal compute')\n"
        "    ax.grid(alpha=0.3, axis='x')\n"
        "fig.suptitle('Hours each storage choice adds to the ideal compute, by where they go '\n"
        "             '(mean per run; beside each bar: hours added, and the mean time to train)')\n"
        "fig.legend(*axes[0].get_legend_handles_labels(), loc='outside lower center', ncols=4, frameon=False,\n"
        "           title=f\"not drawn, zero in every run: {', '.join(ZERO)}\" if ZERO else None,\n"
        "           title_fontsize='small')\n"
        "plt.show()"
    ),
    nbf.v4.new_markdown_cell(
        "A single NFS server makes every checkpoint minutes long, so Daly spaces them out and "
        "failures throw more work away; OSTs buy that back until the write is short against "
        "the interval. Async hides the write behind training; the in-memory level cuts the "
        "work lost to single-node failures (most of the Llama 3 mix)."
    ),
    nbf.v4.new_code_cell(
        "by = summary.set_index(['model', 'variant'])['time_to_train_days']\n"
        "for model in MODELS:\n"
        "    assert by[model, 'NFS'] > by[model, 'Lustre 128 OSTs'], model\n"
        "    assert by[model, 'Lustre 32 + async'] < by[model, 'Lustre 32 OSTs'], model\n"
        "assert all(ax.get_xlim()[0] == 0 for ax in axes), 'the bars start at zero'\n"
        "labels = [t.get_text() for t in fig.legends[0].get_texts()]\n"
        "assert not set(ZERO) & set(labels), 'a bucket zero in every run is not in the legend'"
    ),
]
write(cells, "storage.ipynb")
