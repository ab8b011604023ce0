"""A figure's caption names the run: the scenario and the keys it overrode, never a
value given with `--set` (failure classes given as a multi-line YAML list were drawn as
every figure's caption, legends cut, with matplotlib warnings), on one short line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml
from matplotlib.figure import Figure

from sim.show import plots
from tests.conftest import TINY, main_in_process

FAILURES = [
    {"name": "gpu", "scope": "gpu", "mtbf_hours": 5.0, "detect_minutes": 3, "repair_hours": 1.0},
    {"name": "host", "scope": "node", "mtbf_hours": 8.0, "detect_minutes": 5, "repair_hours": 2.0},
]
# as `--set "failures=$(cat fitted/failures.yaml)"` gives it: block YAML, several lines
FAILURES_YAML = yaml.safe_dump(FAILURES, sort_keys=False)


def test_a_caption_names_the_keys_not_the_values():
    label = plots.run_label("llama70b-1k", [f"failures={FAILURES_YAML}", "cluster.spare_nodes=4"])
    assert label == "llama70b-1k  --set failures  --set cluster.spare_nodes"


def test_a_caption_of_many_overrides_is_shortened():
    overrides = [f"failures={FAILURES_YAML}"] + [
        f"cluster.lemon_{name}=1" for name in ("fraction", "rate_multiplier", "permanent")
    ]
    label = plots.run_label("llama70b-1k", [*overrides, "checkpoint.interval_steps=500"])
    assert "\n" not in label and len(label) <= plots.CAPTION_CHARS
    assert label.startswith("llama70b-1k  --set failures") and label.endswith("more)")


@pytest.fixture
def kept_figures(monkeypatch) -> dict[str, Figure]:
    """Every figure a command saves, by file name (the PNG is still written)."""
    drawn: dict[str, Figure] = {}
    save = Figure.savefig

    def keep(fig, path, *args, **kwargs):
        drawn[Path(path).name] = fig
        return save(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return drawn


def test_a_run_given_failures_by_a_multiline_set_has_short_captions(capsys, tmp_path, kept_figures):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(json.dumps(TINY))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = main_in_process(
            capsys, "run", str(scenario), "--set", f"failures={FAILURES_YAML}", "--replicas", "8",
            "--workers", "1", "--executor", "serial", "--out", str(tmp_path / "out"),
            "--no-progress",
        )  # fmt: skip
    assert code == 0, err
    assert not [w for w in caught if "matplotlib" in str(w.filename)], caught
    assert {"time_to_train_cdf.png", "wall_time_breakdown.png"} <= set(kept_figures)
    for name, fig in kept_figures.items():
        assert fig.get_suptitle() == "tiny  --set failures", name
        texts = [t.get_text() for legend in fig.legends + [a.get_legend() for a in fig.axes]
                 if legend is not None for t in legend.get_texts()]  # fmt: skip
        assert not any("scope" in text or "mtbf" in text for text in texts), name
    (run_dir,) = (tmp_path / "out" / "tiny").iterdir()
    assert (run_dir / "figures" / "time_to_train_cdf.png").stat().st_size > 0
