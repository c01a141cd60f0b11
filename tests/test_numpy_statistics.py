"""funcgrad.numpy's order statistics, covariances, histograms and set operations (issue 28's
long tail: numpy/statistics.py, histograms.py, setops.py) against NumPy (JAX's values where
JAX differs: `nearest` ties, set-operation padding), with derivatives, vmap and jit."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.numpy as fnp

R = np.random.default_rng(3)
A = R.normal(size=(3, 4, 5)).astype(np.float32)


# --- quantiles --------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest",
                                    "inverted_cdf"])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_quantile_matches_numpy(method, axis):
    q = np.array([0.0, 0.3, 0.9, 1.0], np.float32)  # no ties of `nearest` (n = 60, 4, 15)
    for keepdims in (False, True):
        close(fnp.quantile(A, q, axis=axis, method=method, keepdims=keepdims),
              np.quantile(A, q, axis=axis, method=method, keepdims=keepdims), 1e-6, 1e-6)
    close(fnp.percentile(A, 30, axis=axis, method=method),
          np.percentile(A, 30, axis=axis, method=method), 1e-6, 1e-6)


def test_quantile_nearest_rounds_ties_down_as_jax():
    x = np.arange(4.0, dtype=np.float32)  # q=0.5 -> position 1.5, a tie
    assert float(fnp.quantile(x, 0.5, method="nearest")) == 1.0  # JAX; NumPy says 2.0


def test_quantile_nans_and_weights():
    b = A.copy()
    b[0, 0, 0], b[1] = np.nan, np.nan
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        close(fnp.nanquantile(b, [0.2, 0.7], axis=(1, 2)),
              np.nanquantile(b, [0.2, 0.7], axis=(1, 2)))
        close(fnp.nanmedian(b, axis=0), np.nanmedian(b, axis=0))
    close(fnp.nanpercentile(b[0], 40, axis=1), np.nanpercentile(b[0], 40, axis=1))
    assert np.isnan(np.asarray(fnp.quantile(b, 0.5, axis=2))[0, 0])
    w = R.uniform(size=A.shape).astype(np.float32)
    close(fnp.quantile(A, [0.3, 0.8], axis=1, method="inverted_cdf", weights=w),
          np.quantile(A, [0.3, 0.8], axis=1, method="inverted_cdf", weights=w))
    with pytest.raises(ValueError, match="takes no weights"):
        fnp.quantile(A, 0.5, weights=w)
    with pytest.raises(TypeError, match="complex"):
        fnp.quantile(A + 1j, 0.5)


def test_quantile_transforms():
    q = np.array([0.1, 0.55, 0.8], np.float32)
    check_all(lambda a, q: fnp.quantile(a, q, axis=1), (A[0], q),
              np.quantile(A[0], q, axis=1), grad=(0, 1))
    check_all(lambda a: fnp.nanmedian(a, axis=-1, keepdims=True), (A[0],),
              np.nanmedian(A[0], axis=-1, keepdims=True), grad=(0,))


# --- cov / corrcoef ---------------------------------------------------------------------------
X = R.normal(size=(3, 6))
Y = R.normal(size=(2, 6))
FW = R.integers(1, 4, 6)
AW = R.uniform(0.5, 1.5, 6)


@pytest.mark.parametrize("kw", [{}, {"bias": True}, {"ddof": 2}, {"fweights": FW},
                                {"aweights": AW}, {"fweights": FW, "aweights": AW},
                                {"fweights": FW, "aweights": AW, "ddof": 0},
                                {"rowvar": False}])
def test_cov_matches_numpy(kw):
    x, y = (X.T, Y.T) if kw.get("rowvar") is False else (X, Y)
    close(fnp.cov(x, y, **kw), np.cov(x, y, **kw).astype(np.float32), 1e-5, 1e-5)


def test_cov_corrcoef_transforms_and_shapes():
    x = X.astype(np.float32)
    check_all(lambda x: fnp.cov(x, aweights=AW), (x,), np.cov(x, aweights=AW), grad=(0,),
              order=2)
    check_all(fnp.corrcoef, (x,), np.corrcoef(x), grad=(0,), atol=1e-5)
    assert fnp.cov(x[0]).shape == () and float(fnp.corrcoef(x[0])) == 1.0
    z = X + 1j * Y[:1]
    close(fnp.corrcoef(z), np.corrcoef(z).astype(np.complex64), 1e-5, 1e-5)


# --- histograms -------------------------------------------------------------------------------
H = R.normal(size=60).astype(np.float32)


def test_bincount_follows_jax():
    x = R.integers(0, 8, 20)
    close(fnp.bincount(x), np.bincount(x))
    close(fnp.bincount(x, weights=x * 0.5, minlength=12), np.bincount(x, x * 0.5, 12)
          .astype(np.float32))
    close(fnp.bincount(np.array([-3, 1, 7]), length=4), np.array([1, 1, 0, 0]))  # JAX's rule
    f = fg.jit(lambda x, w: fnp.bincount(x, w, length=9))
    close(f(x, x * 1.0), np.bincount(x, x * 1.0, 9).astype(np.float32))
    check_all(lambda w: fnp.bincount(x, w, length=8), (R.normal(size=20).astype(np.float32),),
              grad=(0,))
    with pytest.raises(Exception, match="length"):
        fg.jit(fnp.bincount)(x)


@given(st.lists(st.floats(-3, 6, width=32), min_size=1, max_size=8), st.booleans())
def test_digitize_matches_numpy(vals, right):
    x = np.asarray(vals, np.float32)
    bins = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    close(fnp.digitize(x, bins, right), np.digitize(x, bins, right))
    close(fnp.digitize(x, bins[::-1], right), np.digitize(x, bins[::-1], right))


@pytest.mark.parametrize("kw", [{}, {"bins": 5, "range": (-1, 1)},
                                {"bins": np.array([-2.0, 0.0, 0.5, 3.0])},
                                {"weights": R.uniform(size=60)}, {"density": True, "bins": 6}])
def test_histogram_matches_numpy(kw):
    got, want = fnp.histogram(H, **kw), np.histogram(H, **kw)
    close(got[0], want[0].astype(got[0].dtype), 1e-5, 1e-5)
    close(got[1], want[1].astype(np.float32))
    close(fnp.histogram_bin_edges(np.ones(3), 2), np.histogram_bin_edges(np.ones(3), 2))


@pytest.mark.parametrize("kw", [{}, {"bins": [3, 4, 5]}, {"bins": 3, "density": True},
                                {"bins": 4, "range": [(-1, 1), (-2, 2), (0, 1)]},
                                {"bins": 3, "weights": R.uniform(size=40)}])
def test_histogramdd_matches_numpy(kw):
    s = R.normal(size=(40, 3)).astype(np.float32)
    got, want = fnp.histogramdd(s, **kw), np.histogramdd(s, **kw)
    close(got[0], want[0].astype(np.float32), 1e-5, 1e-5)
    close(got[1], [e.astype(np.float32) for e in want[1]])
    g2, w2 = fnp.histogram2d(s[:, 0], s[:, 1], bins=[3, 4]), np.histogram2d(s[:, 0], s[:, 1],
                                                                             bins=[3, 4])
    close(g2[0], w2[0].astype(np.float32))


def test_histogram_weights_differentiate():
    edges = np.linspace(-2, 2, 6).astype(np.float32)
    check_all(lambda w: fnp.histogram(H, edges, weights=w, density=True)[0],
              (R.uniform(size=60).astype(np.float32),), grad=(0,))


# --- set operations ---------------------------------------------------------------------------
SA, SB = np.array([5, 1, 3, 3, 7]), np.array([3, 4, 5, 9])


def test_set_operations_match_numpy():
    close(fnp.union1d(SA, SB), np.union1d(SA, SB))
    close(fnp.intersect1d(SA, SB), np.intersect1d(SA, SB))
    close(fnp.setdiff1d(SA, SB), np.setdiff1d(SA, SB))
    close(fnp.setxor1d(SA, SB), np.setxor1d(SA, SB))
    close(fnp.intersect1d(SA, SB, return_indices=True),
          np.intersect1d(SA, SB, return_indices=True))
    u1, u2 = np.array([5, 1, 3, 7]), SB
    close(fnp.intersect1d(u1, u2, assume_unique=True, return_indices=True),
          np.intersect1d(u1, u2, assume_unique=True, return_indices=True))
    close(fnp.setxor1d(u1, u2, assume_unique=True), np.setxor1d(u1, u2, assume_unique=True))


def test_set_operations_pad_as_jax_under_jit():
    # JAX's values: union/xor/intersect pad with the smallest result, setdiff with 0, and the
    # padded indices of intersect1d are the arrays' sizes
    f = fg.jit(lambda a, b: (fnp.union1d(a, b, size=10), fnp.intersect1d(a, b, size=4),
                             fnp.setdiff1d(a, b, size=4), fnp.setxor1d(a, b, size=8),
                             fnp.intersect1d(a, b, return_indices=True, size=3,
                                             fill_value=-1)))
    got = f(SA, SB)
    close(got[:4], (np.array([1, 3, 4, 5, 7, 9, 1, 1, 1, 1]), np.array([3, 5, 3, 3]),
                    np.array([1, 7, 0, 0]), np.array([1, 4, 7, 9, 1, 1, 1, 1])))
    close(got[4], (np.array([3, 5, -1]), np.array([2, 0, 5]), np.array([0, 2, 4])))
    close(fnp.intersect1d(np.array([1, 2]), np.array([3, 4]), size=2), np.array([0, 0]))


@given(st.lists(st.integers(-5, 5), max_size=12), st.lists(st.integers(-5, 5), max_size=12),
       st.sampled_from(["auto", "compare_all", "binary_search", "sort"]), st.booleans())
def test_isin_matches_numpy(a, b, method, invert):
    a, b = np.asarray(a, np.int32).reshape(-1, 1)[:, :1], np.asarray(b, np.int32)
    close(fnp.isin(a, b, invert=invert, method=method), np.isin(a, b, invert=invert))


def test_isin_nans_large_and_vmap():
    close(fnp.isin(np.array([1.0, np.nan]), np.array([np.nan, 1.0])), np.array([True, False]))
    big = np.arange(3000)
    close(fnp.isin(big, np.arange(0, 6000, 7)), np.isin(big, np.arange(0, 6000, 7)))
    check_all(fnp.isin, (np.array([[1, 2], [3, 9]]), SB), np.isin([[1, 2], [3, 9]], SB),
              batch=(0,))
