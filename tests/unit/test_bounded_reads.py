"""A run's summaries and figures read the replica table within bounds: a few columns at a
time, never every column of every row (issue 17's memory target: the main process of a
200,000-replica run within 20% of a 20,000-replica run's peak; benchmarks/bench_memory.py
measures it). The figures' inputs equal what the whole table gives.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from sim.runs import api, montecarlo
from sim.show import plots, run_figures
from sim.show.run_figures import write_run_figures
from tests.conftest import ROOT

SMALL = str(ROOT / "scenarios/llama7b-128.yaml")


@pytest.fixture(scope="module")
def unfinished(tmp_path_factory) -> Path:
    """A two-point sweep's run, every chunk done (chunks of 3 replicas), not finalised."""
    out = tmp_path_factory.mktemp("bounded")
    with (
        mock.patch.object(api, "finalise", side_effect=SystemExit(1)),
        mock.patch.object(montecarlo, "default_chunk_size", lambda n, w: 3),
        pytest.raises(SystemExit),
    ):
        api.run_scenario(SMALL, params=["checkpoint.interval_steps=250,500"], replicas=30,
                         seed=2, workers=1, out=out, progress=False)  # fmt: skip
    (run_dir,) = [p for p in out.glob("*/*") if p.is_dir()]
    return run_dir


def test_the_summaries_and_figures_read_a_few_columns_at_a_time(unfinished, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(unfinished, run_dir)
    reads: list[tuple[str, list[str] | None]] = []
    real_pandas, real_arrow = pd.read_parquet, pq.read_table

    def read_parquet(path, *args, columns=None, **kwargs):
        reads.append((str(path), columns))
        return real_pandas(path, *args, columns=columns, **kwargs)

    def read_table(source, *args, columns=None, **kwargs):
        reads.append((str(source), columns))
        return real_arrow(source, *args, columns=columns, **kwargs)

    from sim.model.scenario import load_scenario
    from sim.runs.manifest import load_manifest
    from sim.runs.results import RunDir

    run = RunDir(run_dir, load_manifest(run_dir / "run.json"))
    run.lock()
    with (
        mock.patch("pandas.read_parquet", read_parquet),
        mock.patch("pyarrow.parquet.read_table", read_table),
    ):
        api.finalise(run, load_scenario(run_dir / "scenario.yaml"), figures=write_run_figures)
    table_reads = [cols for path, cols in reads if path.endswith("/replicas.parquet")]
    assert table_reads, reads
    assert all(cols is not None for cols in table_reads)  # never the whole table
    widths = sorted(len(cols) for cols in table_reads)
    assert widths[-1] <= len(run_figures.DISTRIBUTION_COLUMNS) + 1, widths  # the swept key besides
    whole = pq.read_schema(run_dir / "replicas.parquet").names
    assert len(whole) > 40  # the table itself is wide
    # the merged table: few row groups (a writer holds every row group's metadata)
    assert pq.ParquetFile(run_dir / "replicas.parquet").metadata.num_row_groups == 1  # 60 rows
    assert len(list((run_dir / "figures").glob("*.png"))) >= 5


def test_the_figure_inputs_are_the_whole_table_s(unfinished, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(unfinished, run_dir)
    frames = [pd.read_parquet(p) for p in sorted((run_dir / "parts").glob("p*.parquet"))]
    table = pd.concat(frames, ignore_index=True)
    table.loc[4, "error"] = "ValueError: a replica that raised"  # an error row: left out
    path = tmp_path / "replicas.parquet"
    table.to_parquet(path, index=False)
    keys = ["checkpoint.interval_steps"]
    names = set(table.columns)
    light = table[["point", "finished", "error"]]
    rows, means = run_figures.figure_inputs(path, names, keys, light, "llama7b-128")
    ok = table[table["error"] == ""]
    assert len(rows) == len(ok) == 59
    assert set(rows.columns) == {*run_figures.DISTRIBUTION_COLUMNS, *keys, "scenario"}
    columns = [c for c in plots.TABLE_COLUMNS if c not in ("point", "finished")]
    expected = ok.groupby("point", sort=True)[columns].mean()
    np.testing.assert_allclose(
        means.set_index("point")[columns].to_numpy(float), expected.to_numpy(float), rtol=1e-12
    )
    assert means[keys[0]].tolist() == [250, 500]


def test_the_report_reads_its_figures_within_bounds_and_without_blocking(tmp_path):
    """A FIFO nobody writes and /dev/zero named as figures: left out, said, no hang."""
    import os
    import threading

    from sim.show.report import write_report
    from tests.conftest import cli_in_process

    r = cli_in_process(["run", SMALL, "--replicas", "3", "--workers", "1", "--no-progress",
                        "--out", str(tmp_path / "out")])  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir,) = [p for p in (tmp_path / "out").glob("*/*") if p.is_dir()]
    os.mkfifo(run_dir / "figures" / "a_fifo.png")
    (run_dir / "figures" / "endless.png").symlink_to("/dev/zero")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(write_report(run_dir)), daemon=True)
    worker.start()
    worker.join(60)
    assert done, "the report hung on a figure"
    html = done[0].read_text()
    assert "a_fifo.png: not a regular file" in html and "endless.png: not a regular file" in html
    assert "data:image/png;base64," in html  # the real figures are still there
