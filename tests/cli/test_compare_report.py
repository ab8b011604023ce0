"""`trainsim compare` and `trainsim report` as a user types them (in-process, outputs in
tmp_path): the numbers compare prints are recomputed from the two replica tables, and the
report is checked as a file (every image a data: PNG, every section there, text escaped)
and as a page headless Chromium renders with its images loaded."""

from __future__ import annotations

import base64
import html.parser
import io
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from sim.decide.analysis import student_t_quantile
from sim.model import calculator
from sim.model.columns import COST_COLUMNS, DOWNTIME_COLUMNS
from sim.model.scenario import load_scenario
from tests.conftest import ROOT, cli_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
QUICK = ["--replicas", "20", "--workers", "1", "--no-progress"]
SLOW_STORAGE = ["--set", "storage.checkpoint_tier.write_GB_s=5"]  # 4x the checkpoint stall
PNG = b"\x89PNG\r\n\x1a\n"
# what the report's text must escape (set as the scenario's description)
NASTY = '<b>bold</b> & "quotes" <script>alert(1)</script>'
SECTIONS = {"scenario", "calculator", "summary", "figures", "cost", "downtime", "failures", "provenance"}  # fmt: skip


def trainsim(*args: str) -> subprocess.CompletedProcess:
    """The `trainsim` command in this process: exit code and what it printed."""
    return cli_in_process(list(args))


def new_run(out: Path, *args: str, figures: bool = False) -> Path:
    """A run of the small scenario (figures take most of a small run's time: only on demand)."""
    more = [] if figures else ["--no-figures"]
    r = trainsim("run", SMALL, *QUICK, "--out", str(out), *more, *args)
    assert r.returncode == 0, r.stderr
    (run_dir,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Runs of the 7B scenario, 20 replicas each: A; B with slower checkpoint storage (same
    seed: paired, and the only one with figures); C another seed; U a horizon that about
    half the replicas miss; a sweep of the checkpoint interval (S1) and the same sweep,
    partly other values, on slower storage (S2)."""
    root = tmp_path_factory.mktemp("runs")
    interval = "checkpoint.interval_minutes"
    return {
        "A": new_run(root / "a", "--seed", "1", "--set", f"description={NASTY}"),
        "B": new_run(root / "b", "--seed", "1", *SLOW_STORAGE, figures=True),
        "C": new_run(root / "c", "--seed", "2"),
        "U": new_run(root / "u", "--seed", "1", "--set", "simulation.horizon_days=17.76"),
        "S1": new_run(root / "s1", "--seed", "1", "--param", f"{interval}=30,60,120"),
        "S2": new_run(root / "s2", "--seed", "1", "--param", f"{interval}=60,120,240", *SLOW_STORAGE),
    }  # fmt: skip


def table(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "replicas.parquet")


def compare_json(*args: str) -> dict:
    r = trainsim("compare", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # stdout holds the JSON document and nothing else


def rows_of(text: str) -> dict[str, list[str]]:
    """The cells of each row of the printed table, by metric."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


def is_png(data: bytes) -> bool:
    if not data.startswith(PNG):
        return False
    Image.open(io.BytesIO(data)).verify()
    return True


# --------------------------------------------------------------------------- compare


def test_student_t_quantiles_match_the_tables():
    for df, t in [(1, 12.7062047), (5, 2.5705818), (19, 2.0930241), (30, 2.0422725), (1e9, 1.9599640)]:  # fmt: skip
        assert student_t_quantile(0.975, df) == pytest.approx(t, abs=1e-6)
    assert student_t_quantile(0.025, 19) == pytest.approx(-2.0930241, abs=1e-6)


def test_compare_pairs_replicas_of_one_seed_and_the_numbers_are_the_tables(runs):
    doc = compare_json(str(runs["A"]), str(runs["B"]))
    (pair,) = doc["pairs"]
    assert pair["method"] == "paired" and pair["pairs"] == 20
    a, b = table(runs["A"]).set_index("replica"), table(runs["B"]).set_index("replica")
    for metric in ("time_to_train_days", "checkpoint_stall_hours", "cost_usd"):
        d = (b[metric] - a[metric]).to_numpy()
        half = student_t_quantile(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
        got = pair["metrics"][metric]
        assert got["mean_a"] == pytest.approx(a[metric].mean(), rel=1e-12)
        assert got["mean_b"] == pytest.approx(b[metric].mean(), rel=1e-12)
        assert got["difference"] == pytest.approx(d.mean(), rel=1e-9)
        assert got["ci_low"] == pytest.approx(d.mean() - half, rel=1e-9, abs=1e-12)
        assert got["ci_high"] == pytest.approx(d.mean() + half, rel=1e-9, abs=1e-12)
        assert got["relative"] == pytest.approx(d.mean() / a[metric].mean(), rel=1e-9)
    # slower storage: every checkpoint stalls longer, and the same failures strike both runs
    assert pair["metrics"]["checkpoint_stall_hours"]["better"] == "A"
    assert pair["metrics"]["time_to_train_days"]["better"] == "A"
    assert pair["metrics"]["failures"]["better"] == "same"
    assert pair["metrics"]["finished_fraction"]["difference"] == 0
    # every metric of the table is compared
    assert set(pair["metrics"]) >= {"time_to_train_days", "goodput", "failures_gpu", "cost_usd"}
    assert Path(doc["figure"]) == runs["B"] / f"compare-with-{runs['A'].name}.png"

    # the table says the same
    r = trainsim("compare", str(runs["A"]), str(runs["B"]))
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "paired by replica" in flat and "common random numbers" in flat
    row = rows_of(r.stdout)["time to train"]  # the metric in words (docs/metrics.md)
    ttt = pair["metrics"]["time_to_train_days"]
    assert row[0] == f"{ttt['mean_a']:.1f} days"  # days, and a difference under a day in hours
    hours = float(row[2].removesuffix(" h")) if row[2].endswith(" h") else float(row[2].removesuffix(" min")) / 60  # fmt: skip
    assert hours == pytest.approx(ttt["difference"] * 24, abs=0.051)
    assert row[5].startswith("A") and "n = 20 (pairs of replicas)" in flat
    assert rows_of(r.stdout)["goodput"][5].startswith("A (higher)")
    assert "figure: " in flat  # its path whole, on the next line when it is long

    figure = (runs["B"] / f"compare-with-{runs['A'].name}.png").read_bytes()
    assert is_png(figure)
    width, height = Image.open(io.BytesIO(figure)).size
    assert width > 600 and height > 400


def test_compare_uses_welch_when_the_seeds_differ(runs, tmp_path):
    figure = tmp_path / "figs" / "a-vs-c.png"
    doc = compare_json(str(runs["A"]), str(runs["C"]), "--figure", str(figure))
    (pair,) = doc["pairs"]
    assert pair["method"] == "welch" and pair["pairs"] is None
    assert "seeds differ (A 1, B 2)" in pair["pairing"]
    a, c = table(runs["A"])["lost_work_hours"], table(runs["C"])["lost_work_hours"]
    va, vc = a.var(ddof=1) / a.size, c.var(ddof=1) / c.size
    df = (va + vc) ** 2 / (va**2 / (a.size - 1) + vc**2 / (c.size - 1))
    half = student_t_quantile(0.975, df) * math.sqrt(va + vc)
    got = pair["metrics"]["lost_work_hours"]
    assert got["difference"] == pytest.approx(c.mean() - a.mean(), rel=1e-9)
    assert got["df"] == pytest.approx(df, rel=1e-9)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(
        (c.mean() - a.mean() - half, c.mean() - a.mean() + half), rel=1e-9
    )
    assert is_png(figure.read_bytes())
    assert not list(runs["C"].glob("compare-with-*.png"))  # --figure replaces the default
    r = trainsim("compare", str(runs["A"]), str(runs["C"]), "--no-figure")
    assert r.returncode == 0 and "Welch's t interval" in " ".join(r.stdout.split())
    assert "20 / 20" in r.stdout  # n of A / of B


def test_compare_counts_the_replicas_that_did_not_finish(runs):
    doc = compare_json(str(runs["A"]), str(runs["U"]), "--no-figure")
    (pair,) = doc["pairs"]
    u = table(runs["U"])
    finished = int(u["finished"].sum())
    assert 0 < finished < 20, "the horizon should cut some replicas short"
    assert pair["finished_a"] == 20 and pair["finished_b"] == finished
    ttt = pair["metrics"]["time_to_train_days"]
    assert ttt["n_a"] == ttt["n_b"] == finished  # only replicas finished in both
    a = table(runs["A"]).set_index("replica")["time_to_train_days"]
    b = u.set_index("replica")["time_to_train_days"].dropna()
    assert ttt["difference"] == pytest.approx((b - a.loc[b.index]).mean(), rel=1e-9)
    share = pair["metrics"]["finished_fraction"]
    assert share["difference"] == pytest.approx(finished / 20 - 1, rel=1e-12)
    assert share["better"] == "A"
    note = " ".join(pair["notes"])
    assert f"{20 - finished} of 20 pairs dropped" in note and "the finished share" in note


def test_compare_matches_sweep_points_by_their_values(runs):
    doc = compare_json(str(runs["S1"]), str(runs["S2"]), "--no-figure")
    key = "checkpoint.interval_minutes"
    assert key in doc["matching"]
    matched = sorted((p["params_a"][key], p["params_b"][key]) for p in doc["pairs"])
    assert matched == [(60, 60), (120, 120)]
    assert [u["params"][key] for u in doc["unmatched_a"]] == [30]
    assert [u["params"][key] for u in doc["unmatched_b"]] == [240]
    s1, s2 = table(runs["S1"]), table(runs["S2"])
    for pair in doc["pairs"]:
        assert pair["method"] == "paired"
        a = s1[s1["point"] == pair["point_a"]].set_index("replica")["checkpoint_stall_hours"]
        b = s2[s2["point"] == pair["point_b"]].set_index("replica")["checkpoint_stall_hours"]
        assert pair["metrics"]["checkpoint_stall_hours"]["difference"] == pytest.approx(
            (b - a).mean(), rel=1e-9
        )
    # one point against a sweep: that point against each of its points
    doc = compare_json(str(runs["A"]), str(runs["S1"]), "--no-figure")
    assert len(doc["pairs"]) == 3 and {p["point_a"] for p in doc["pairs"]} == {0}
    # --point-a/--point-b choose one point each
    doc = compare_json(str(runs["S1"]), str(runs["S2"]), "--point-a", "0", "--point-b", "2", "--no-figure")  # fmt: skip
    (pair,) = doc["pairs"]
    assert (pair["params_a"][key], pair["params_b"][key]) == (30, 240)
    r = trainsim("compare", str(runs["S1"]), str(runs["S2"]), "--figure", str(runs["S2"] / "c.png"))
    assert r.returncode == 0, r.stderr
    assert is_png((runs["S2"] / "c.png").read_bytes())


def test_compare_refuses_bad_input_with_exit_2(runs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_table = tmp_path / "no-table"
    no_table.mkdir()
    shutil.copy(runs["A"] / "run.json", no_table / "run.json")
    odd = tmp_path / "odd"
    shutil.copytree(runs["A"], odd)
    table(runs["A"]).drop(columns=["time_to_train_days"]).to_parquet(odd / "replicas.parquet")
    other = new_run(tmp_path / "other", "--replicas", "5", "--param", "cluster.spare_nodes=0,2")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    cases = [
        ([str(tmp_path / "missing"), str(runs["B"])], "missing", "does not exist"),
        ([str(runs["A"]), str(empty)], "empty", "run.json"),
        ([str(runs["A"]), str(no_table)], "no-table", "replicas.parquet"),
        ([str(odd), str(runs["B"])], "odd", "lacks the columns time_to_train_days"),
        ([str(runs["S1"]), str(other)], str(other), "--point-a I --point-b J"),
        ([str(runs["S1"]), str(runs["S2"]), "--point-a", "7"], "--point-a", "no sweep point 7"),
        (
            [str(runs["A"]), str(runs["B"]), "--figure", str(blocked / "x.png")],
            "x.png",
            "--figure",
        ),  # fmt: skip
    ]
    for args, where, what in cases:
        r = trainsim("compare", *args)
        err = " ".join(r.stderr.split())
        assert r.returncode == 2, (args, r.stderr)
        assert where in err and what in err, (args, err)
        assert "Traceback" not in err and r.stdout == ""


def damaged_copies(run: Path, root: Path) -> list[tuple[Path, str]]:
    """Copies of a run whose replica table is not one `trainsim run` writes: not parquet,
    and columns the commands read with strings in them; with what the error must say."""
    cases = []
    garbled = root / "garbled"
    shutil.copytree(run, garbled)
    (garbled / "replicas.parquet").write_bytes(b"not parquet at all")
    cases.append((garbled, "replica table"))
    for column in ("time_to_train_days", "point", "finished"):
        copy = root / f"text-{column}"
        shutil.copytree(run, copy)
        t = table(run)
        t[column] = t[column].astype(str)
        t.to_parquet(copy / "replicas.parquet")
        cases.append((copy, f"{column} are not numbers"))
    return cases


def test_compare_and_report_refuse_a_damaged_table_with_exit_2(runs, tmp_path):
    for damaged, what in damaged_copies(runs["A"], tmp_path):
        for args in (["compare", str(runs["A"]), str(damaged)], ["report", str(damaged)]):
            r = trainsim(
                *args,
                "--no-figure" if args[0] == "compare" else "--out",
                *([] if args[0] == "compare" else [str(tmp_path / "r.html")]),
            )
            err = " ".join(r.stderr.split())
            assert r.returncode == 2, (args, r.stderr)
            assert str(damaged) in err and what in err, (args, err)
            assert "Traceback" not in err


def test_compare_writes_the_figure_in_the_format_of_its_suffix(runs, tmp_path):
    r = trainsim("compare", str(runs["A"]), str(runs["B"]), "--figure", str(tmp_path / "c.svg"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")


# --------------------------------------------------------------------------- report


class Page(html.parser.HTMLParser):
    """What the checks read of a report: images, section ids, links, scripts, text."""

    def __init__(self):
        super().__init__()
        self.images, self.sections, self.external, self.scripts = [], [], [], 0
        self.text: list[str] = []
        self.body: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src") or "")
        if tag == "section":
            self.sections.append(attrs.get("id"))
        if tag == "script":
            self.scripts += 1
        if tag == "body":
            self.body = attrs
        if tag == "link" or any(
            (attrs.get(a) or "").startswith(("http:", "https:", "//")) for a in ("src", "href")
        ):
            self.external.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def test_report_is_one_self_contained_page(runs, tmp_path):
    run = runs["B"]  # compare wrote its figure into B in an earlier test, or here
    if not (run / f"compare-with-{runs['A'].name}.png").exists():
        assert trainsim("compare", str(runs["A"]), str(run)).returncode == 0
    r = trainsim("report", str(run))
    assert r.returncode == 0, r.stderr
    path = run / "report.html"
    assert r.stdout.strip() == f"report: {path}"
    text = path.read_text(encoding="utf-8")
    page = parse(text)
    assert set(page.sections) >= SECTIONS
    assert "sweep" not in page.sections and "plan" not in page.sections
    assert page.external == [] and page.scripts == 0
    pngs = sorted((run / "figures").glob("*.png")) + [run / f"compare-with-{runs['A'].name}.png"]
    assert len(page.images) == len(pngs) >= 4
    for src in page.images:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        assert is_png(base64.b64decode(src[len(prefix) :], validate=True))
    embedded = {base64.b64decode(src.split(",", 1)[1]) for src in page.images}
    assert embedded == {p.read_bytes() for p in pngs}

    words = " ".join(" ".join(page.text).split())
    scenario = load_scenario(run / "scenario.yaml").base
    calc = calculator.calculate(scenario)
    assert f"ideal time to train {calc.ideal_days:.1f} days" in words
    assert f"{calc.checkpoint_write_s:.1f} s / {calc.checkpoint_load_s:.1f} s" in words
    assert "16 nodes × 8 H100-SXM = 128 GPUs" in words and "1 warm spare node" in words
    assert "lustre tier (write 5 GB/s" in words and "every 60 minutes" in words
    rows = table(run)
    for name in ("gpu", "host", "network", "software", "nccl_hang"):  # failures by class
        share = rows[f"failures_{name}"].mean() / rows["failures"].mean()
        assert f"{name} {rows[f'failures_{name}'].mean():.4g} ({share:.1%})" in words
    assert f"{rows['time_to_train_days'].mean():.4g}" in words  # the summary's mean
    assert f"${rows['cost_usd'].mean():,.0f}" in words  # the cost total
    assert "seed 1" in words and "complete" in words  # provenance
    for column in (*COST_COLUMNS, *DOWNTIME_COLUMNS):  # the splits, where the table has them
        assert (f"({column})" in words) == (column in rows), column

    out = tmp_path / "elsewhere" / "r.html"
    assert trainsim("report", str(run), "--out", str(out)).returncode == 0
    assert set(parse(out.read_text()).sections) >= SECTIONS


def test_report_escapes_text_and_shows_sweeps_and_plans(runs, tmp_path):
    r = trainsim("report", str(runs["A"]), "--out", str(tmp_path / "a.html"))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "a.html").read_text()
    assert NASTY not in text and "<script>" not in text
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quotes&quot;" in text
    assert NASTY in " ".join(parse(text).text)  # and it reads as written

    sweep = tmp_path / "sweep"
    shutil.copytree(runs["S1"], sweep)
    assert trainsim("report", str(sweep)).returncode == 0
    page = parse((sweep / "report.html").read_text())
    assert page.sections[:3] == ["answer", "sweep", "scenario"]  # the answer first
    words = " ".join(" ".join(page.text).split())
    for minutes in (30, 60, 120):  # every point has its summary and its sweep row
        assert f"checkpoint.interval_minutes={minutes}" in words
    assert "best on" in words and "time" in words
    assert "ran with --no-figures" in words

    plan = {
        "objective": "cost_usd",
        "deadline_days": 19.5,
        "quantile": 0.9,
        "varied_keys": ["checkpoint.interval_minutes"],
        "chosen": {
            "point": 1,
            "checkpoint.interval_minutes": 60,
            "status": "chosen",
            "replicas": 20,
            "objective_mean": 145553.0,
            "p_meet": 1.0,
            "p_meet_low": 0.84,
            "p_meet_high": 1.0,
        },  # fmt: skip
        "candidates": [
            {
                "point": 1,
                "checkpoint.interval_minutes": 60,
                "replicas": 20,
                "objective_mean": 145553.0,
                "cost_usd_mean": 145553.0,
                "status": "chosen",
            },
            {
                "point": 0,
                "checkpoint.interval_minutes": 30,
                "replicas": 20,
                "objective_mean": 146001.5,
                "cost_usd_mean": 146001.5,
                "status": "<dominated>",
            },
        ],  # fmt: skip
        "pareto": [
            {
                "point": 1,
                "checkpoint.interval_minutes": 60,
                "time_to_train_days_at_quantile": 17.9,
                "cost_usd_mean": 145553.0,
            }
        ],  # fmt: skip
        "rounds": [{"round": 1, "points": 3, "replicas": 20}],
        "stop_reason": "one point is left",
    }
    (sweep / "plan.json").write_text(json.dumps(plan))
    assert trainsim("report", str(sweep)).returncode == 0
    text = (sweep / "report.html").read_text()
    page = parse(text)
    assert page.sections[:3] == ["answer", "plan", "scenario"]  # the plan's table, no sweep's
    words = " ".join(" ".join(page.text).split())
    assert "The plan chose interval_minutes=60" in words
    for heading in ("Every point, best first", "Time–cost Pareto front"):
        assert heading in words
    # costs as money, three significant digits (docs/metrics.md)
    assert "$146k" in words and "$145,553" not in words and "<dominated>" in words
    assert "&lt;dominated&gt;" in text  # an unknown status is shown as it is, escaped
    assert "cost_usd_mean" not in words and "deadline_days" not in words


def test_report_refuses_what_is_not_a_run(tmp_path):
    r = trainsim("report", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "run.json" in r.stderr
    assert "Traceback" not in r.stderr


# --------------------------------------------------------------------------- in a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Counts, once the page has loaded, the images the browser decoded (a test-only copy).
COUNTER = (
    "<script>window.addEventListener('load', () => {"
    "const images = Array.from(document.images);"
    "document.body.dataset.images = images.length;"
    "document.body.dataset.imagesLoaded = images.filter(i => i.complete && i.naturalWidth > 0).length;"
    "});</script>"
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed: the report is not rendered"
)
def test_chromium_renders_the_report_with_its_images(runs, tmp_path):
    run = runs["B"]
    assert trainsim("compare", str(runs["A"]), str(run)).returncode == 0  # B/compare-with-A.png
    report = tmp_path / "report.html"
    assert trainsim("report", str(run), "--out", str(report)).returncode == 0
    expected = len(parse(report.read_text()).images)
    assert expected == len(list((run / "figures").glob("*.png"))) + 1

    counted = tmp_path / "counted.html"
    counted.write_text(report.read_text().replace("</body>", COUNTER + "</body>"))
    r = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", counted.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = parse(r.stdout)
    assert dom.body.get("data-images") == str(expected), r.stdout[:500]
    assert dom.body.get("data-images-loaded") == str(expected)
    assert set(dom.sections) >= SECTIONS

    shot = tmp_path / "report.png"
    r = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,3000", report.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape == (3000, 1200)
    assert pixels.std() > 20  # text, tables and figures, not a blank page
    assert (pixels < 200).mean() > 0.03
    # the figures (in colour) are on the page, not only text
    colour = np.asarray(Image.open(shot).convert("RGB"), dtype=float)
    assert (colour.max(axis=2) - colour.min(axis=2) > 60).mean() > 0.005


def test_compare_of_two_scenarios_lists_resolved_values_alike(tmp_path):
    """A scenario that writes a default or a preset's figure out and one that leaves it to
    the loader run the same job: compare names neither as a difference, and what does
    differ reads in one format on both sides."""
    import yaml

    base = yaml.safe_load(Path(SMALL).read_text())
    explicit = json.loads(json.dumps(base))
    explicit["name"] = "explicit"
    for failure in explicit["failures"]:
        if failure.get("scope") in ("gpu", "node"):
            failure["replace"] = True  # the default
    tier = explicit["storage"]["checkpoint_tier"]
    preset = load_scenario(SMALL).base.storage.checkpoint_tier
    tier["read_GB_s"] = preset.read_GB_s  # the preset's own figure, written out
    explicit["model"]["tokens"] = float(base["model"]["tokens"]) / 2  # one real difference
    paths = []
    for doc in (base, explicit):
        path = tmp_path / f"{doc['name']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        paths.append(path)
    run_dirs = []
    for i, path in enumerate(paths):
        r = trainsim("run", str(path), "--replicas", "4", "--workers", "1", "--no-progress",
                     "--no-figures", "--out", str(tmp_path / f"o{i}"))  # fmt: skip
        assert r.returncode == 0, r.stderr
        (run_dir,) = [p for p in (tmp_path / f"o{i}").glob("*/*") if p.is_dir()]
        run_dirs.append(run_dir)
    r = trainsim("compare", *map(str, run_dirs), "--no-figure", "--json")
    assert r.returncode == 0, r.stderr
    r = trainsim("compare", *map(str, run_dirs), "--no-figure")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "replace" not in text and "read_GB_s" not in text and "None" not in text
    tokens = int(float(base["model"]["tokens"]))
    expected = f"tokens={tokens} vs {tokens // 2}"
    assert expected in text


# Lists, once the page has laid out, the tables wider than their box (a test-only copy).
OVERFLOW = (
    "<script>window.addEventListener('load', () => {"
    "const wide = Array.from(document.querySelectorAll('.scroll'))"
    ".filter(d => d.scrollWidth > d.clientWidth + 1);"
    "document.body.dataset.wide = wide.map(d => (d.closest('section') || {}).id).join(' ');"
    "document.body.dataset.tables = document.querySelectorAll('.scroll').length;"
    "});</script>"
)


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed: the report is not rendered"
)
def test_a_sweep_report_needs_no_sideways_scrolling_at_1400_pixels(tmp_path):
    """Four points of a size sweep (one infeasible): its cost, downtime, failures and
    calculator tables fit a 1,400-pixel window; a calculator row the same at every point
    is shown once."""
    r = trainsim("run", str(ROOT / "scenarios/llama70b-1k.yaml"), "--replicas", "4",
                 "--workers", "1", "--no-progress", "--no-figures",
                 "--param", "cluster.nodes=64,96,128,256", "--out", str(tmp_path / "o"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = [p for p in (tmp_path / "o").glob("*/*") if p.is_dir()]
    report = tmp_path / "report.html"
    assert trainsim("report", str(run_dir), "--out", str(report)).returncode == 0
    text = report.read_text()
    calculator = text[text.index('id="calculator"') :]
    calculator = calculator[: calculator.index("</section>")]
    assert calculator.count("FLOPs per token") == 1  # the same at every point: once
    assert "at every point" in calculator
    # the summary's rows read in one style: the same decimals along a row, as the CLI's
    summary = text[text.index('id="summary"') :]
    summary = summary[: summary.index("</section>")]
    for row in re.findall(r"<tr>(.*?)</tr>", summary):
        cells = re.findall(r'<td class="num"[^>]*>(.*?)</td>', row)[:6]  # mean … p99, not n
        if cells:
            assert len({len(c.rstrip("%").partition(".")[2]) for c in cells}) == 1, cells
    measured = tmp_path / "measured.html"
    measured.write_text(text.replace("</body>", OVERFLOW + "</body>"))
    r = chromium(tmp_path, "--window-size=1400,2000", "--virtual-time-budget=5000",
                 "--dump-dom", measured.as_uri())  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    dom = parse(r.stdout)
    assert int(dom.body.get("data-tables") or 0) >= 6
    assert dom.body.get("data-wide") == "", dom.body.get("data-wide")
