"""tracker.stats.distributions returns what scipy.stats returns, to the bit, edges included,
and the statistics layer no longer imports scipy.stats when a process publishes a summary."""

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from tracker.stats import distributions as d

XS = [-np.inf, -40.0, -3.2, -1e-300, 0.0, 1e-300, 0.5, 1.96, 8.0, 40.0, np.inf, np.nan]
DFS = [-1.0, 0.0, 0.5, 1.0, 2.7, 30.0, 1e6, 1e20, np.inf, np.nan]
QS = [-0.1, 0.0, 1e-300, 0.025, 0.5, 0.975, 1 - 1e-16, 1.0, 1.1, np.nan]


def same(ours, scipy_s) -> bool:
    a, b = float(ours), float(scipy_s)
    return a == b or (np.isnan(a) and np.isnan(b))


@pytest.mark.parametrize("df", DFS)
def test_t_and_chi2_equal_scipy_stats_bit_for_bit(df):
    for x in XS:
        assert same(d.t_cdf(x, df), sps.t.cdf(x, df)), (x, df)
        assert same(d.t_sf(x, df), sps.t.sf(x, df)), (x, df)
        assert same(d.chi2_sf(x, df), sps.chi2.sf(x, df)), (x, df)
    for q in QS:
        assert same(d.t_ppf(q, df), sps.t.ppf(q, df)), (q, df)


def test_normal_equals_scipy_stats_bit_for_bit():
    for x in XS:
        assert same(d.norm_cdf(x), sps.norm.cdf(x)), x
        assert same(d.norm_sf(x), sps.norm.sf(x)), x
    for q in QS:
        assert same(d.norm_ppf(q), sps.norm.ppf(q)), q


def test_arrays_equal_scipy_stats_elementwise():
    rng = np.random.default_rng(7)
    x, df, q = rng.normal(0, 3, 500), rng.uniform(0.2, 80, 500), rng.uniform(0, 1, 500)
    np.testing.assert_array_equal(d.t_sf(x, df), sps.t.sf(x, df))
    np.testing.assert_array_equal(d.t_ppf(q, df), sps.t.ppf(q, df))
    np.testing.assert_array_equal(d.chi2_sf(x ** 2, df), sps.chi2.sf(x ** 2, df))
    np.testing.assert_array_equal(d.norm_ppf(q), sps.norm.ppf(q))


def test_publishing_a_summary_does_not_import_scipy_stats():
    # what a rollup's last step imports (tracker.publish: the report, the statistics)
    code = ("import sys, tracker.publish, tracker.stats; "
            "print('scipy.stats' in sys.modules, 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]  # scipy.optimize: imported where a root is solved
