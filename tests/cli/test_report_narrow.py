"""The HTML report in a narrow and a wide window: a plan's and a sweep's report laid out by
headless Chromium at 800 and 1,400 pixels have no table wider than the page (a table too
wide for the window stacks into a card a row), and its figures are captioned in words.

The widths are read from the report file as it is, unchanged: the test drives Chromium over
its DevTools pipe (`--remote-debugging-pipe`: JSON messages ending in a NUL byte on file
descriptors 3 and 4), sets the window's width, loads the page and asks for each table's box.
"""

from __future__ import annotations

import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sim.show.report_run import figure_title
from tests.conftest import ROOT, cli_in_process

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed: the report is not laid out"
)
WIDTHS = (800, 1400)


def trainsim(*args: str) -> subprocess.CompletedProcess:
    return cli_in_process(list(args))


def only_run(out: Path) -> Path:
    (run_dir,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run_dir


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """The report of a plan over two keys (its every-point table has long statuses) and of
    a sweep of the checkpoint interval with its figures (a curve per metric)."""
    root = tmp_path_factory.mktemp("narrow")
    r = trainsim("plan", SMALL, "--vary", "cluster.spare_nodes=0,1,2",
                 "--vary", "checkpoint.interval_minutes=30,60", "--deadline-days", "18.5",
                 "--replicas-first", "8", "--replicas-max", "16", "--workers", "1",
                 "--no-progress", "--out", str(root / "plan"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = trainsim("run", SMALL, "--replicas", "8", "--workers", "1", "--no-progress",
                 "--param", "checkpoint.interval_minutes=30,60,120",
                 "--out", str(root / "sweep"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    pages = {}
    for name in ("plan", "sweep"):
        page = root / f"{name}.html"
        r = trainsim("report", str(only_run(root / name)), "--out", str(page))
        assert r.returncode == 0, r.stderr
        pages[name] = page
    return pages


# --------------------------------------------------------------------------- Chromium


class DevTools:
    """Headless Chromium driven over `--remote-debugging-pipe`: it reads commands on its file
    descriptor 3 and writes replies on 4, each a JSON message ending in a NUL byte."""

    def __init__(self, profile: Path):
        to_browser, commands = os.pipe()
        replies, from_browser = os.pipe()

        def as_fds_3_and_4() -> None:  # in the child: above 4 first, so neither is clobbered
            read = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10)
            write = fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
             "--hide-scrollbars", f"--user-data-dir={profile}", "--remote-debugging-pipe",
             "about:blank"],
            preexec_fn=as_fds_3_and_4, pass_fds=(3, 4),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self.commands = os.fdopen(commands, "wb", buffering=0)
        self.replies = os.fdopen(replies, "rb", buffering=0)
        self.pending = b""
        self.last_id = 0

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.commands.write(json.dumps(message).encode() + b"\0")
        while True:  # events and replies to others come first: skip them
            while b"\0" not in self.pending:
                chunk = self.replies.read(1 << 16)
                assert chunk, "chromium closed its DevTools pipe"
                self.pending += chunk
            raw, _, self.pending = self.pending.partition(b"\0")
            reply = json.loads(raw)
            if reply.get("id") == self.last_id:
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]

    def evaluate(self, session: str, expression: str):
        result = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.call("Browser.close")
        finally:
            self.commands.close()
            self.replies.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# Each table's box, its scrolling box's overflow and its tallest row, and the page's widths.
BOXES = """(() => {
  const tables = Array.from(document.querySelectorAll('table')).map(t => {
    const box = t.getBoundingClientRect();
    const rows = Array.from(t.tBodies).flatMap(b => Array.from(b.rows));
    return {section: (t.closest('section') || {}).id || '', left: box.left, right: box.right,
            overflow: t.parentElement.scrollWidth - t.parentElement.clientWidth,
            tallest_row: Math.max(0, ...rows.map(r => r.getBoundingClientRect().height)),
            stacked: getComputedStyle(t).display === 'block'};
  });
  return {width: document.documentElement.clientWidth,
          scroll_width: document.documentElement.scrollWidth, tables};
})()"""


def laid_out(page: Path, profile: Path) -> dict[int, dict]:
    """The page's table boxes in a window of each of WIDTHS pixels."""
    browser = DevTools(profile)
    try:
        boxes = {}
        for width in WIDTHS:
            target = browser.call("Target.createTarget", url="about:blank")["targetId"]
            session = browser.call("Target.attachToTarget", targetId=target, flatten=True)
            session = session["sessionId"]
            browser.call("Emulation.setDeviceMetricsOverride", session, width=width,
                         height=1000, deviceScaleFactor=1, mobile=False)  # fmt: skip
            browser.call("Page.navigate", session, url=page.as_uri())
            deadline = time.monotonic() + 120
            while browser.evaluate(session, "document.readyState") != "complete":
                assert time.monotonic() < deadline, "the report did not load in 2 minutes"
                time.sleep(0.05)
            boxes[width] = browser.evaluate(session, BOXES)
            browser.call("Target.closeTarget", targetId=target)
        return boxes
    finally:
        browser.close()


@needs_chromium
@pytest.mark.parametrize("name", ["plan", "sweep"])
def test_no_table_is_wider_than_the_page_at_800_and_1400_pixels(reports, tmp_path, name):
    """Every table lies within the window, none scrolls sideways, and the page does not:
    at 800 pixels the plan's every-point table and the failure classes stack into cards,
    not squeezed to a word a line (rows hundreds of pixels tall, the status off-screen)."""
    boxes = laid_out(reports[name], tmp_path / "profile")
    for width, page in boxes.items():
        assert page["width"] == width
        assert page["scroll_width"] <= width, (width, page["scroll_width"])
        assert len(page["tables"]) >= 6
        for table in page["tables"]:
            where = (width, table["section"])
            assert table["left"] >= 0 and table["right"] <= width, (where, table)
            assert table["overflow"] <= 1, (where, table)  # no sideways scroll within it
            assert table["tallest_row"] < 160, (where, table)
    at_800 = {t["section"] for t in boxes[800]["tables"] if t["stacked"]}
    assert "scenario" in at_800  # the failure classes: a card each
    if name == "plan":
        assert "plan" in at_800
    assert not any(t["stacked"] for t in boxes[1400]["tables"] if t["section"] == "summary")


# --------------------------------------------------------------------------- captions


def captions(page: Path) -> dict[str, str]:
    """Each figure's caption's words by the figure's file name."""
    found = re.findall(
        r"<figcaption>(.*?) — <code>figures/([^<]+)</code></figcaption>", page.read_text()
    )
    return {file: html.unescape(words) for words, file in found}


def test_the_figures_are_captioned_in_words_not_file_names(reports):
    shown = captions(reports["sweep"])
    assert {"sweep_cost_usd.png", "sweep_goodput.png", "sweep_time_to_train_days.png"} <= set(shown)
    for file, words in shown.items():
        stem = file.removesuffix(".png")
        assert "_" not in words and words.lower() != stem.replace("_", " "), (file, words)
        assert words[0].isupper(), (file, words)
    assert shown["sweep_cost_usd.png"] == "Mean cost across the sweep, with 95% CI"
    assert shown["sweep_goodput.png"] == "Mean goodput across the sweep, with 95% CI"
    assert list(shown)[-4:] == [
        "sweep_time_to_train_days.png",
        "sweep_cost_usd.png",
        "sweep_goodput.png",
        "sweep_lost_work_hours.png",
    ]


@pytest.mark.parametrize(
    "file, words",
    [
        ("heatmap_cost_usd.png", "Mean cost over the two swept keys, the best point outlined"),
        ("heatmap_time_to_train_days.png", "Mean time to train over the two swept keys, the best point outlined"),
        ("sweep_effective_mfu.png", "Mean effective MFU across the sweep, with 95% CI"),
        ("sweep_lost_work_hours.png", "Mean lost work across the sweep, with 95% CI"),
        ("pareto.png", "Plan: time to train against cost, and the Pareto front"),
        ("some_new_figure.png", "Some new figure"),
    ],
)  # fmt: skip
def test_a_figure_caption_comes_from_its_metric_name(file, words):
    assert figure_title(file) == words
