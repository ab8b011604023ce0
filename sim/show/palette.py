"""The colours of trainsim's figures, defined once: a colour names one thing everywhere.

Every figure (sim.show.plots, sim.show.plan_plots), the report and the notebooks take the colour
of a time bucket or a downtime part from here, so that orange is the slowdown in every
figure and never a cause of downtime. The downtime parts use hues none of the buckets
uses (they split the downtime bar of another figure, and must not be read as one of its
neighbours). Imports nothing, so that anything can use it.
"""

from __future__ import annotations

# the buckets of the time identity (wall = ideal + slowdown + lost_work + checkpoint_stall
# + downtime), and the fleet beyond the job that the cost adds: (label, colour)
BUCKETS = {
    "ideal": ("ideal compute", "#4c72b0"),  # blue
    "slowdown": ("slowdown", "#dd8452"),  # orange
    "lost_work": ("lost work", "#c44e52"),  # red
    "checkpoint_stall": ("checkpoint stall", "#8172b3"),  # purple
    "downtime": ("downtime", "#937860"),  # brown
    "idle_spares": ("spares and pool nodes beyond the job", "#9a9a9a"),  # grey
}

# the parts of downtime (sim.model.columns.DOWNTIME_PARTS): (label, colour), no bucket's hue
DOWNTIME = {
    "detect": ("detection", "#64b5cd"),  # sky
    "node_wait": ("waiting for nodes", "#55a868"),  # green
    "restart": ("restart (launch)", "#d8c56b"),  # sand
    "checkpoint_load": ("checkpoint load", "#da8bc3"),  # pink
    "rescale": ("elastic rescale", "#1b7f6e"),  # teal
    "storage_wait": ("checkpoint tier down", "#e7298a"),  # magenta
    "maintenance": ("maintenance", "#a6d854"),  # lime
    "health_check": ("health checks", "#8dd3c7"),  # mint
    "human_wait": ("waiting for on-call", "#6b6b1f"),  # olive
}

# a part the engine adds later, before it gets a colour here: a neutral, never a bucket's
UNKNOWN = "#c7c7c7"

# the whole of a quantity (wall time, the bill) where it is drawn beside its parts
TOTAL = "#3b3b3b"

# text that says which run a figure is of
CAPTION = "#59636e"

# the best sweep point (a star), the best heatmap cell (an outline)
BEST = "#e8a33d"
BEST_OUTLINE = "#d62728"

# series of a sweep's points (one per point, never a bucket's meaning): tab10, then tab20
SERIES = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
    "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip

# the two runs of `trainsim compare` (A the reference, B the change): no bucket's colours
RUNS = {"A": "#3b3b3b", "B": "#009e73"}

# the statuses of a plan's points (sim.show.plan_plots) and its deadline
PLAN = {
    "infeasible": "#c44e52",
    "dominated": "#8c8c8c",
    "unproven": "#9ccfa8",
    "feasible": "#2e8b57",
    "chosen": "#f2b701",
    "deadline": "#c44e52",
}


def bucket_colour(bucket: str) -> str:
    """The colour of a time bucket (`ideal`, `lost_work`, ...; a `_hours` or a `cost_..._usd`
    column name works too)."""
    return BUCKETS[_bare(bucket)][1]


def bucket_label(bucket: str) -> str:
    return BUCKETS[_bare(bucket)][0]


def downtime_colour(part: str) -> str:
    """The colour of a part of downtime (`node_wait` or `node_wait_hours`)."""
    entry = DOWNTIME.get(_bare(part))
    return entry[1] if entry else UNKNOWN


def downtime_label(part: str) -> str:
    """A part's readable name; one added to the engine later gets its own name spelled out."""
    part = _bare(part)
    entry = DOWNTIME.get(part)
    return entry[0] if entry else part.replace("_", " ")


def metric_colour(metric: str) -> str:
    """A metric's curve: its bucket's colour (lost_work_hours is red as lost work is in
    every breakdown), the total's for the others (time to train, goodput, cost)."""
    bare = _bare(metric)
    return BUCKETS[bare][1] if bare in BUCKETS else TOTAL


def _bare(name: str) -> str:
    return name.removeprefix("cost_").removesuffix("_usd").removesuffix("_hours")
