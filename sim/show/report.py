"""A run directory as one self-contained HTML page (`trainsim report RUN_DIR`).

The scenario in words, the calculator, summaries per sweep point, the sweep and plan
results, every figure (embedded as base64 `data:` PNGs), the cost, downtime and failure
splits, and the run's provenance. Inline CSS, no script, no network: the file can be
mailed or attached to a ticket and opens anywhere. Every text is HTML-escaped."""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone
from pathlib import Path

from sim import __version__
from sim.decide import answer
from sim.model.scenario_set import ScenarioError
from sim.runs.files import protect_run_files, write_regular
from sim.show.report_html import escaped, narrow_window_css
from sim.show.report_results import (
    cost_section,
    downtime_section,
    failures_section,
    figures_section,
    plan_section,
    provenance_section,
    summary_section,
    sweep_section,
)
from sim.show.report_run import MAX_POINT_SUMMARIES, RunContents, load, no_table
from sim.show.report_scenario import calculator_section, scenario_section


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of `run_dir` to `out` (default RUN_DIR/report.html) as a new regular
    file (never through a link, never over a run's own files nor into another run's
    directory: a ScenarioError naming --out); return its path."""
    run_dir = Path(run_dir).expanduser()
    path = Path(out).expanduser() if out is not None else run_dir / "report.html"
    protect_run_files(run_dir, path, "--out")
    _refuse_special_file(path)
    contents = load(run_dir)
    text = render(contents)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_regular(path, text.encode("utf-8"))
    except OSError as exc:
        raise ScenarioError(
            "--out",
            str(path),
            f"cannot write the report there ({exc.strerror or exc}); choose a writable path "
            "with --out",
        ) from None
    return path


# what an existing --out may be other than a regular file, in words
_SPECIAL = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


def _refuse_special_file(path: Path) -> None:
    """An --out that exists and is not a regular file (a FIFO: writing into it blocked until
    someone read it, and the rename that writes a report now would replace it) is refused,
    exit 2 naming it, before anything is read."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return  # a new file (or one the write names the problem of)
    kind = _SPECIAL.get(stat.S_IFMT(mode))
    if kind is not None:
        raise ScenarioError(
            "--out",
            str(path),
            f"{kind}, not a regular file: the report is written as a file; give the path of "
            "a regular file or a new one",
        )


# --------------------------------------------------------------------------- the page


def render(run: RunContents) -> str:
    """The report as one HTML document."""
    # the answer first, then the plan or sweep table it comes from, then what was simulated
    sections = [("answer", "Answer", _answer_section(run))]
    if run.plan is not None:
        sections.append(("plan", "Plan", plan_section(run.plan)))
    elif len(run.scenario_set.points) > 1:  # a plan's table has every point already
        sections.append(("sweep", "Sweep", sweep_section(run)))
    sections += [
        ("scenario", "Scenario", scenario_section(run)),
        ("summary", "Summary", summary_section(run)),
        ("figures", "Figures", figures_section(run)),
        ("cost", "Cost breakdown", cost_section(run)),
        ("downtime", "Downtime split", downtime_section(run)),
        ("failures", "Failures by class", failures_section(run)),
        ("calculator", "Calculator", calculator_section(run)),
        ("provenance", "Provenance", provenance_section(run)),
    ]
    name = run.scenario_set.name
    run_id = run.path.resolve().name
    status = str(run.manifest.get("status", "unknown"))
    nav = " · ".join(f'<a href="#{key}">{escaped(title)}</a>' for key, title, _ in sections)
    body = "\n".join(
        f'<section id="{key}">\n<h2>{escaped(title)}</h2>\n{content}\n</section>'
        for key, title, content in sections
    )
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    description = run.scenario_set.base.description
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escaped(f"trainsim report: {name} ({run_id})")}</title>
<style>{CSS}</style>
</head>
<body>
<header>
<h1>{escaped(name)}</h1>
{f"<p class='description'>{escaped(description)}</p>" if description else ""}
<p class="meta">run <code>{escaped(run_id)}</code> · status <span class="status {escaped(status)}">{escaped(status)}</span>
· {run.replicas:,} replica rows{f", {run.errors:,} errors" if run.errors else ""}
· report written {escaped(generated)} by trainsim {escaped(__version__)}</p>
<nav>{nav}</nav>
</header>
<main>
{body}
</main>
</body>
</html>
"""


CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d0d7de; --head: #f6f8fa; --accent: #4c72b0; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  color: var(--ink); margin: 0 auto; max-width: 1150px; padding: 1.5rem 2rem 4rem; background: #fff; }
h1 { margin: 0 0 .25rem; font-size: 1.9rem; }
h2 { margin: 2.2rem 0 .6rem; padding-bottom: .3rem; border-bottom: 2px solid var(--line); font-size: 1.35rem; }
h3 { margin: 1.4rem 0 .4rem; font-size: 1.05rem; }
p { margin: .4rem 0; }
.description { font-size: 1.05rem; }
.meta, .note, figcaption { color: var(--muted); font-size: .9rem; }
nav { margin-top: .8rem; padding: .5rem .8rem; background: var(--head); border-radius: 6px; font-size: .92rem; }
a { color: var(--accent); text-decoration: none; }
code { font: .88em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--head);
  padding: .05em .3em; border-radius: 4px; word-break: break-all; }
.scroll { overflow-x: auto; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: .88rem; }
th, td { border: 1px solid var(--line); padding: .28rem .6rem; vertical-align: top; }
th { background: var(--head); text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
.cards { display: flex; flex-wrap: wrap; gap: 0 2rem; }
.card h3 { margin-top: .8rem; }
tr.total td { font-weight: 600; border-top: 2px solid var(--ink); }
tr.best { background: #eaf5ea; }
tr.infeasible td { color: var(--muted); white-space: normal; }
dl.words { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1.2rem; margin: .5rem 0 1rem; }
dl.words dt { font-weight: 600; }
dl.words dd { margin: 0; }
figure { margin: 1rem 0 2rem; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
.status { padding: 0 .4em; border-radius: 4px; background: var(--head); }
.status.complete { background: #dafbe1; }
.status.interrupted, .status.failed, .status.running { background: #fff1c2; }
.warning { background: #fff8c5; border-left: 4px solid #d4a72c; padding: .4rem .7rem; }
.headline { background: #eef4fb; border: 1px solid #b6cde8; border-left: 6px solid var(--accent);
  border-radius: 6px; padding: .7rem 1.1rem; margin: .6rem 0 1rem; font-size: 1.02rem; }
.headline p { margin: .35rem 0; }
.headline .point { font-weight: 600; }
.headline .best { font-weight: 600; }
""" + narrow_window_css()  # the padding and tables of a narrow window


# --------------------------------------------------------------------------- sections


def _answer_section(run: RunContents) -> str:
    """The headline box: per point the answer lines `trainsim run` ends with (for a plan,
    its choice in a sentence and the chosen point's lines; for a sweep, which point is best
    on time and on cost)."""
    if run.summary is None or run.table is None:
        return no_table(run)
    parts = []
    only = None
    if run.plan is not None and isinstance(run.plan, dict):
        parts.append(f"<p class='point'>{escaped(answer.plan_sentence(run.plan))}</p>")
        shown = run.plan.get("chosen") or answer.plan_closest(run.plan)
        only = [int(shown["point"])] if shown and "point" in shown else []
        rows = None  # the plan's race: not a sweep whose best point is asked for
    else:
        rows = answer.best_rows(run.table) if len(run.scenario_set.feasible) > 1 else None
        ran = sorted(run.replicas_per_point)
        if len(ran) > MAX_POINT_SUMMARIES and rows is not None:
            bests = answer.best_points(rows)
            only = sorted({b.point for b in bests})
    result = answer.run_answer(run.summary, run.scenario_set, rows, only)
    for label, (first, second) in result.points:
        name = f"<span class='point'>{escaped(label)}</span>: " if label else ""
        parts.append(f"<p>{name}{escaped(first)}<br>{escaped(second)}</p>")
    for line in result.best:
        parts.append(f"<p class='best'>{escaped(line[:1].upper() + line[1:])}.</p>")
    if only is not None and run.plan is None:
        parts.append(
            f"<p class='note'>The best points of {len(run.replicas_per_point)}; the sweep "
            "table has every one.</p>"
        )
    if result.legend:
        parts.append(f"<p class='note'>Where {escaped(result.legend)}.</p>")
    return f'<div class="headline">{"".join(parts)}</div>'
