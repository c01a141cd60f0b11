"""funcgrad.numpy reductions against NumPy: axis None / int / negative / tuple, keepdims,
dtype, where and initial, on hypothesis-drawn shapes (with size-0 and size-1 axes) and
float32/int32/bool inputs, with JAX's result dtypes.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy_strategies import BOOL, F32, I32, assert_matches, axes_for, make_array, shapes

import funcgrad.numpy as fnp
from funcgrad.errors import FuncgradValueError


def _norm_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _reduced_size(shape, axis):
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


@st.composite
def array_and_axis(draw, dtypes=(F32, I32, BOOL), tuple_axes=True):
    shape = draw(shapes)
    dt = draw(st.sampled_from(dtypes))
    axis = draw(axes_for(len(shape), tuple_axes))
    return make_array(draw(st.integers(0, 2**31 - 1)), shape, dt), axis, draw(st.booleans())


_SUM_DT = {F32: F32, I32: I32, BOOL: I32}
_MEAN_DT = {F32: F32, I32: F32, BOOL: F32}


@pytest.mark.parametrize("name", ["sum", "prod", "nansum", "nanprod"])
@given(case=array_and_axis())
def test_sum_prod(name, case):
    x, axis, keepdims = case
    if name.endswith("prod") and x.dtype != BOOL:
        x = np.clip(x, -2, 2)
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert_matches(out, want.astype(_SUM_DT[x.dtype]), _SUM_DT[x.dtype], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["mean", "var", "std", "nanmean"])
@given(case=array_and_axis(), ddof=st.sampled_from([0, 1]))
def test_mean_var_std(name, case, ddof):
    x, axis, keepdims = case
    kw = {} if name in ("mean", "nanmean") else {"ddof": ddof}
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims, **kw)
    with _no_warn():
        want = getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims, **kw)
    assert_matches(out, want, _MEAN_DT[x.dtype], rtol=1e-4, atol=1e-5)


class _no_warn:
    """Silences NumPy's RuntimeWarnings (empty slices, ddof >= n) in reference computations."""

    def __enter__(self):
        import warnings
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin", "ptp"])
@given(case=array_and_axis())
def test_max_min(name, case):
    x, axis, keepdims = case
    if _reduced_size(x.shape, _norm_axis(axis)) == 0 and x.size == 0:
        with pytest.raises(FuncgradValueError, match="zero-size array"):
            getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
        return
    if x.size == 0:
        return
    if name == "ptp" and x.dtype == BOOL:  # NumPy and JAX: no boolean subtract
        with pytest.raises(TypeError, match="subtract"):
            fnp.ptp(fnp.asarray(x), axis=axis)
        return
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    assert_matches(out, getattr(np, name)(x, axis=axis, keepdims=keepdims), x.dtype)


@given(case=array_and_axis(dtypes=(F32, I32)))
def test_max_with_initial_and_where(case):
    x, axis, keepdims = case
    mask = make_array(1, x.shape, BOOL)
    out = fnp.max(fnp.asarray(x), axis=axis, keepdims=keepdims, initial=-10,
                  where=fnp.asarray(mask))
    want = np.max(x, axis=axis, keepdims=keepdims, initial=-10, where=mask)
    assert_matches(out, want, x.dtype)
    out = fnp.sum(fnp.asarray(x), axis=axis, keepdims=keepdims, initial=3,
                  where=fnp.asarray(mask))
    want = np.sum(x, axis=axis, keepdims=keepdims, initial=3, where=mask)
    assert_matches(out, want.astype(x.dtype), x.dtype, rtol=1e-4, atol=1e-4)


@given(case=array_and_axis(dtypes=(F32,)))
def test_mean_with_where(case):
    x, axis, keepdims = case
    mask = make_array(2, x.shape, BOOL)
    out = fnp.mean(fnp.asarray(x), axis=axis, keepdims=keepdims, where=fnp.asarray(mask))
    with _no_warn():
        want = np.mean(x, axis=axis, keepdims=keepdims, where=mask)
    assert_matches(out, want, F32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["all", "any"])
@given(case=array_and_axis())
def test_all_any(name, case):
    x, axis, keepdims = case
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    assert_matches(out, getattr(np, name)(x, axis=axis, keepdims=keepdims), BOOL)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(case=array_and_axis(tuple_axes=False))
def test_argmax_argmin(name, case):
    x, axis, keepdims = case
    n = x.size if axis is None else (x.shape[axis] if x.ndim else 1)
    if n == 0:
        with pytest.raises(FuncgradValueError, match="empty"):
            getattr(fnp, name)(fnp.asarray(x), axis=axis)
        return
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    assert_matches(out, getattr(np, name)(x, axis=axis, keepdims=keepdims).astype(I32), I32)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@given(case=array_and_axis(tuple_axes=False))
def test_cumulative(name, case):
    x, axis, _ = case
    if x.ndim == 0 and axis is not None:
        axis = None
    if x.dtype != BOOL:
        x = np.clip(x, -2, 2)
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis)
    want = getattr(np, name)(x, axis=axis)
    assert_matches(out, want.astype(_SUM_DT[x.dtype]), _SUM_DT[x.dtype], rtol=1e-4, atol=1e-4)


def test_cumulative_sum_include_initial_and_dtype():
    x = fnp.array([[1, 2], [3, 4]])
    assert_matches(fnp.cumulative_sum(x, axis=1, include_initial=True),
                   np.array([[0, 1, 3], [0, 3, 7]]), I32)
    assert_matches(fnp.cumsum(x, dtype=fnp.float32), np.array([1.0, 3, 6, 10]), F32)
    assert_matches(fnp.sum(x, dtype=fnp.float32), np.float32(10), F32)


def test_nan_reductions():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]], np.float32)
    with _no_warn():
        for name in ("nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nansum"):
            for axis in (None, 0, 1):
                assert_matches(getattr(fnp, name)(fnp.asarray(x), axis=axis),
                               getattr(np, name)(x, axis=axis), F32)
        for name in ("nanargmax", "nanargmin"):
            assert_matches(getattr(fnp, name)(fnp.asarray(x[0])),
                           getattr(np, name)(x[0]).astype(I32), I32)


@given(case=array_and_axis(dtypes=(F32, I32)))
def test_median_and_count_nonzero(case):
    x, axis, keepdims = case
    if x.size == 0:  # NumPy's median fails on some empty inputs; funcgrad raises for empty
        return
    with _no_warn():
        want = np.median(x, axis=axis, keepdims=keepdims)
    assert_matches(fnp.median(fnp.asarray(x), axis=axis, keepdims=keepdims), want, F32)
    assert_matches(fnp.count_nonzero(fnp.asarray(x), axis=axis, keepdims=keepdims),
                   np.count_nonzero(x, axis=axis, keepdims=keepdims), I32)


def test_average():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = np.array([1.0, 2.0, 3.0], np.float32)
    assert_matches(fnp.average(fnp.asarray(x)), np.average(x), F32)
    assert_matches(fnp.average(fnp.asarray(x), axis=0, weights=fnp.asarray(w)),
                   np.average(x, axis=0, weights=w), F32)
    avg, wsum = fnp.average(fnp.asarray(x), axis=1, weights=fnp.asarray(x), returned=True)
    navg, nwsum = np.average(x, axis=1, weights=x, returned=True)
    assert_matches(avg, navg, F32)
    assert_matches(wsum, nwsum, F32)


def test_reductions_of_empty_arrays_follow_numpy():
    z = fnp.zeros((0, 3))
    assert_matches(fnp.sum(z, axis=0), np.zeros(3), F32)
    assert_matches(fnp.prod(z), np.float32(1), F32)
    assert_matches(fnp.max(z, axis=1), np.zeros(0), F32)
    assert_matches(fnp.max(z, axis=0, initial=-1.0), -np.ones(3), F32)
    assert bool(fnp.all(z)) and not bool(fnp.any(z))
    with _no_warn():
        assert np.isnan(float(fnp.mean(z)))
