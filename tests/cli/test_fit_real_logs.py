"""`trainsim fit` on logs it was not written for: a real public log cut to a window in the
middle of the fleet's life (most nodes never fail in it), and trainsim's own log of a
16k-GPU run. Both crashed the Weibull profile once (its scale searched over a fixed bracket
from a start that ignored the nodes that never failed)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from sim.data.estimates import Lives, _weibull_profile, fit_lifetime
from tests.conftest import ROOT, cli_in_process

LANL = ROOT / "examples" / "lanl-system20.csv"


def test_fit_of_a_real_log_in_the_fleets_middle_years(tmp_path):
    rows = pd.read_csv(LANL)
    late = tmp_path / "from-2004.csv"
    rows[rows["time"] >= "2004-01-01"].to_csv(late, index=False)
    result = cli_in_process(
        ["fit", str(late), "--nodes", "512", "--gpus-per-node", "1", "--start",
         "2004-01-01T00:00:00", "--end", "2005-09-10T00:00:00", "--out", str(tmp_path / "f"),
         "--json"],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    fit = json.loads(result.stdout)
    hardware = next(c for c in fit["classes"] if c["name"] == "hardware")
    life = hardware["lifetime"]
    # the Weibull's likelihood is never below the exponential's (its shape 1)
    assert life["loglik_weibull"] >= life["loglik_exponential"] - 1e-6


def test_fit_of_trainsims_own_16k_gpu_log(tmp_path):
    out = tmp_path / "runs"
    ran = cli_in_process(
        ["run", str(ROOT / "scenarios" / "llama3-405b-16k.yaml"), "--replicas", "2", "--seed",
         "3", "--incidents", "--out", str(out), "--no-progress", "--no-figures"],
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (run,) = (out / "llama3-405b-16k").iterdir()
    result = cli_in_process(
        ["fit", str(run / "incidents.parquet"), "--replica", "0", "--out", str(tmp_path / "f")]
    )
    assert result.returncode == 0, result.stderr


def test_the_profile_at_shape_one_is_the_exponential_likelihood():
    """At shape 1 the Weibull is the exponential (its residual life too): the profile, whose
    scale is maximised numerically when some nodes never failed, equals the exponential's
    closed-form likelihood d·log(d/E) − d, whatever share of the nodes never failed."""
    rng = np.random.default_rng(5)
    for never in (10, 500, 5000):
        whole = rng.exponential(1000.0, 40)
        lives = Lives(
            whole=whole,
            whole_cut=rng.uniform(0, 2000, 20),
            first=rng.uniform(0, 2000, 20),
            first_cut=np.full(never, 2000.0),
        )
        d = len(lives.whole) + len(lives.first)
        exposure = sum(float(np.sum(x)) for x in (lives.whole, lives.whole_cut, lives.first,
                                                   lives.first_cut))  # fmt: skip
        expected = d * math.log(d / exposure) - d
        assert abs(_weibull_profile(1.0, lives)[0] - expected) < 1e-6
        fit = fit_lifetime(lives)
        assert fit.loglik_weibull >= fit.loglik_exponential - 1e-9
