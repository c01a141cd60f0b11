"""funcgrad.numpy's differences, integrals, products and interpolation (numpy/calculus.py)
against NumPy, with derivatives (check_grads, float64), vmap against a loop and jit against
eager (tests/transform_checks.py)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.numpy as fnp

R = np.random.default_rng(0)
V5 = R.normal(size=5).astype(np.float32)
M34 = R.normal(size=(3, 4)).astype(np.float32)


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
       n=st.integers(0, 3), seed=st.integers(0, 99))
def test_diff_matches_numpy(shape, n, seed):
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    axis = seed % len(shape) - len(shape) * (seed % 2)
    close(fnp.diff(x, n, axis=axis), np.diff(x, n, axis=axis), 1e-5, 1e-5)


def test_diff_prepend_append_bool_and_errors():
    close(fnp.diff(V5, 2, prepend=0.5, append=V5[:2]), np.diff(V5, 2, prepend=0.5,
                                                                append=V5[:2]))
    close(fnp.diff(M34, axis=0, prepend=M34[:1]), np.diff(M34, axis=0, prepend=M34[:1]))
    b = np.array([True, True, False, True])
    close(fnp.diff(b), np.diff(b))
    with pytest.raises(ValueError, match="non-negative"):
        fnp.diff(V5, -1)
    with pytest.raises(ValueError, match="at least one dimension"):
        fnp.diff(1.0)


def test_diff_and_ediff1d_transforms():
    check_all(lambda x: fnp.diff(x, 2, prepend=0.0), (M34,),
              np.diff(M34, 2, prepend=0.0), grad=(0,), order=2)
    check_all(lambda x: fnp.ediff1d(x, to_begin=[1.0, 2.0], to_end=x[0, :1]), (M34,),
              np.ediff1d(M34, to_begin=[1.0, 2.0], to_end=M34.ravel()[:1]), grad=(0,))


def test_gradient_uniform_coordinates_and_axes():
    x = np.array([0.0, 0.5, 2.0, 3.0], np.float32)
    close(fnp.gradient(V5), np.gradient(V5))
    close(fnp.gradient(M34, 2.0, x), np.gradient(M34, 2.0, x), 1e-5, 1e-5)
    close(fnp.gradient(M34, axis=1), np.gradient(M34, axis=1))
    check_all(lambda f, x: fnp.gradient(f, x, axis=-1), (M34, x),
              np.gradient(M34, x, axis=-1), grad=(0, 1), atol=1e-5)
    with pytest.raises(ValueError, match="edge_order"):
        fnp.gradient(V5, edge_order=2)


def test_trapezoid():
    x = np.sort(R.uniform(size=4)).astype(np.float32)
    close(fnp.trapezoid(M34, x), np.trapezoid(M34, x))
    close(fnp.trapezoid(M34, dx=0.5, axis=0), np.trapezoid(M34, dx=0.5, axis=0))
    check_all(fnp.trapezoid, (M34, M34 * 2 + 1), np.trapezoid(M34, M34 * 2 + 1), grad=(0, 1))


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors")
@pytest.mark.parametrize("na,nb", [(3, 3), (2, 3), (3, 2), (2, 2)])
def test_cross_matches_numpy(na, nb):
    a = R.normal(size=(4, na)).astype(np.float32)
    b = R.normal(size=(nb,)).astype(np.float32)
    want = np.cross(a, b)
    close(fnp.cross(a, b), want, 1e-5, 1e-5)
    check_all(fnp.cross, (a, b), want, grad=(0, 1))


def test_cross_axes():
    a, b = R.normal(size=(3, 5)), R.normal(size=(5, 3))
    close(fnp.cross(a, b, axisa=0, axisb=1, axisc=0),
          np.cross(a, b, axisa=0, axisb=1, axisc=0), 1e-5, 1e-5)
    with pytest.raises(ValueError, match="must be 2 or 3"):
        fnp.cross(np.ones(4), np.ones(3))


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("sizes", [(5, 3), (2, 4), (4, 4)])
def test_convolve_correlate_match_numpy(name, mode, sizes):
    a = R.normal(size=sizes[0]).astype(np.float32)
    v = R.normal(size=sizes[1]).astype(np.float32)
    close(getattr(fnp, name)(a, v, mode), getattr(np, name)(a, v, mode), 1e-5, 1e-5)
    ac, vc = a + 1j * a[::-1], v - 0.5j
    close(getattr(fnp, name)(ac, vc, mode), getattr(np, name)(ac, vc, mode), 1e-5, 1e-5)


def test_convolve_transforms_and_errors():
    a, v = V5, np.array([0.5, -1.0, 2.0], np.float32)
    check_all(fnp.convolve, (a, v), np.convolve(a, v), grad=(0, 1), order=2)
    check_all(lambda a, v: fnp.correlate(a, v, "same"), (a, v), np.correlate(a, v, "same"),
              grad=(0, 1))
    assert fnp.convolve(np.array([1, 2]), np.array([1, 1])).dtype == np.float32
    with pytest.raises(ValueError, match="1-dimensional"):
        fnp.convolve(M34, V5)
    with pytest.raises(ValueError, match="mode"):
        fnp.convolve(V5, V5, "middle")


def test_interp_matches_numpy():
    xp = np.array([0.0, 1.0, 2.5, 3.0], np.float32)
    fp = np.array([1.0, 3.0, -1.0, 2.0], np.float32)
    x = np.array([-1.0, 0.0, 0.3, 1.0, 2.0, 2.9, 3.0, 4.0], np.float32)
    close(fnp.interp(x, xp, fp), np.interp(x, xp, fp))
    close(fnp.interp(x, xp, fp, left=-9.0, right=9.0), np.interp(x, xp, fp, -9.0, 9.0))
    close(fnp.interp(x, xp, fp, period=2.0), np.interp(x, xp, fp, period=2.0), 1e-5, 1e-5)
    close(fnp.interp(x, xp, fp + 1j), np.interp(x, xp, fp + 1j))
    inner = np.array([0.2, 1.4, 2.7], np.float32)
    check_all(fnp.interp, (inner, xp, fp), np.interp(inner, xp, fp), grad=(0, 1, 2))


def test_unwrap_matches_numpy():
    p = np.array([0.0, 3.0, 6.5, 1.0, -5.0, 9.0], np.float32)
    close(fnp.unwrap(p), np.unwrap(p), 1e-5, 1e-5)
    close(fnp.unwrap(p, discont=4.0), np.unwrap(p, discont=4.0), 1e-5, 1e-5)
    close(fnp.unwrap(np.array([0, 9, 18, 3]), period=10),
          np.unwrap([0, 9, 18, 3], period=10).astype(np.float32))
    check_all(lambda p: fnp.unwrap(p, axis=0), (M34 * 4,), np.unwrap(M34 * 4, axis=0),
              grad=(0,), atol=1e-5)


def test_functions_trace_under_jit_with_static_shapes():
    f = fg.jit(lambda x: fnp.diff(x) + fnp.gradient(x)[1:])
    close(f(V5), np.diff(V5) + np.gradient(V5)[1:], 1e-5, 1e-5)
