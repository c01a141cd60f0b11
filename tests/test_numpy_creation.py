"""funcgrad.numpy creation functions against NumPy: array/asarray conversions (nested
sequences of arrays included), filled arrays and their `_like` forms, ranges, eye/tri,
meshgrid and indices, with JAX's default dtypes.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy_strategies import BOOL, F32, I32, assert_matches, make_array, shapes

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.errors import ConcretizationTypeError


@given(shape=shapes, dt=st.sampled_from([None, np.float32, np.int32, np.bool_]))
def test_filled_arrays(shape, dt):
    want_dt = F32 if dt is None else np.dtype(dt)
    for name in ("zeros", "ones", "empty"):
        out = getattr(fnp, name)(shape, dt)
        assert out.shape == shape and out.dtype == want_dt
        if name != "empty":
            assert_matches(out, getattr(np, name)(shape, want_dt), want_dt)
    assert_matches(fnp.full(shape, 3, dt), np.full(shape, 3, want_dt if dt else I32),
                   want_dt if dt else I32)
    x = fnp.asarray(make_array(0, shape, I32))
    for name, fill in (("zeros_like", 0), ("ones_like", 1), ("empty_like", 0)):
        out = getattr(fnp, name)(x, dtype=dt)
        assert_matches(out, np.full(shape, fill, dt or I32), dt or I32)
    assert_matches(fnp.full_like(x, 2.7), np.full(shape, 2, I32), I32)
    assert_matches(fnp.full_like(x, 7, shape=(2,)), np.full((2,), 7), I32)


def test_full_with_array_fill_value_broadcasts():
    assert_matches(fnp.full((2, 3), fnp.array([1.0, 2.0, 3.0])),
                   np.full((2, 3), [1.0, 2.0, 3.0]), F32)
    assert_matches(fnp.full_like(fnp.zeros((2, 2)), fnp.array(5)), np.full((2, 2), 5.0), F32)


def test_array_and_asarray_conversions():
    assert_matches(fnp.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]), I32)
    assert_matches(fnp.array([1.0, 2]), np.array([1.0, 2.0]), F32)
    assert_matches(fnp.array(np.arange(3.0)), np.arange(3.0), F32)
    assert_matches(fnp.asarray([True, False]), np.array([True, False]), BOOL)
    assert_matches(fnp.array([1, 2], dtype=fnp.float32), np.array([1.0, 2.0]), F32)
    assert_matches(fnp.array(3.0, ndmin=2), np.array(3.0, ndmin=2), F32)
    x = fnp.arange(3)
    assert fnp.asarray(x) is x
    assert_matches(fnp.array([x, x + 1]), np.array([[0, 1, 2], [1, 2, 3]]), I32)
    assert_matches(fnp.array([[x[0], 2.5]]), np.array([[0.0, 2.5]]), F32)
    assert_matches(fnp.float32(3), np.float32(3), F32)
    assert_matches(fnp.int32([1.7, -1.7]), np.array([1, -1]), I32)


def test_array_of_tracers_stacks():
    f = lambda a, b: fnp.array([[a, b], [b, a]]).sum(axis=1)
    jaxpr = fg.make_jaxpr(f)(1.0, 2.0)
    assert "concatenate" in str(jaxpr)
    assert float(fg.grad(lambda a: fnp.array([a, 2 * a]).sum())(1.0)) == 3.0


@given(start=st.integers(-5, 5), stop=st.integers(-5, 10), step=st.sampled_from([1, 2, 3, -1,
                                                                                   -2]))
def test_arange_ints(start, stop, step):
    assert_matches(fnp.arange(start, stop, step), np.arange(start, stop, step), I32)
    assert_matches(fnp.arange(stop), np.arange(stop), I32)


@given(start=st.floats(-5, 5), stop=st.floats(-5, 10), step=st.sampled_from([0.5, 0.3, -0.7,
                                                                               1.0]))
def test_arange_floats(start, stop, step):
    want = np.arange(start, stop, step, dtype=np.float32)
    assert_matches(fnp.arange(start, stop, step), want, F32, rtol=1e-5, atol=1e-5)
    assert_matches(fnp.arange(3, dtype=fnp.float32), np.arange(3.0), F32)


@given(start=st.floats(-5, 5), stop=st.floats(-5, 5), num=st.integers(0, 7),
       endpoint=st.booleans())
def test_linspace(start, stop, num, endpoint):
    want = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float32)
    assert_matches(fnp.linspace(start, stop, num, endpoint=endpoint), want, F32, atol=1e-5)
    want, step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    got, gstep = fnp.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    assert_matches(got, want, F32, atol=1e-5)
    if num > 1:
        np.testing.assert_allclose(float(gstep), step, rtol=1e-5, atol=1e-6)
    assert_matches(fnp.logspace(start / 3, stop / 3, num, endpoint=endpoint),
                   np.logspace(start / 3, stop / 3, num, endpoint=endpoint), F32, rtol=1e-4)


def test_linspace_arrays_and_int_dtype():
    a, b = np.array([0.0, 1.0], np.float32), np.array([1.0, 3.0], np.float32)
    assert_matches(fnp.linspace(fnp.asarray(a), fnp.asarray(b), 5),
                   np.linspace(a, b, 5), F32)
    assert_matches(fnp.linspace(fnp.asarray(a), fnp.asarray(b), 5, axis=1),
                   np.linspace(a, b, 5, axis=1), F32)
    assert_matches(fnp.linspace(-3, 7, 6, dtype=fnp.int32), np.linspace(-3, 7, 6, dtype=int),
                   I32)


@given(n=st.integers(0, 5), m=st.one_of(st.none(), st.integers(0, 5)), k=st.integers(-5, 5),
       dt=st.sampled_from([None, np.int32, np.bool_]))
def test_eye_identity_tri(n, m, k, dt):
    want_dt = F32 if dt is None else np.dtype(dt)
    assert_matches(fnp.eye(n, m, k, dt), np.eye(n, m, k, want_dt), want_dt)
    assert_matches(fnp.tri(n, m, k, dt), np.tri(n, m, k, want_dt), want_dt)
    assert_matches(fnp.identity(n, dt), np.identity(n, want_dt), want_dt)


@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=3),
       indexing=st.sampled_from(["xy", "ij"]), sparse=st.booleans())
def test_meshgrid(sizes, indexing, sparse):
    xs = [np.arange(n, dtype=np.float32) + i for i, n in enumerate(sizes)]
    got = fnp.meshgrid(*[fnp.asarray(x) for x in xs], indexing=indexing, sparse=sparse)
    want = np.meshgrid(*xs, indexing=indexing, sparse=sparse)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_matches(g, w, F32)


def test_indices():
    for g, w in zip(fnp.indices((2, 3)), np.indices((2, 3))):
        assert_matches(g, w, I32)
    for g, w in zip(fnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        assert_matches(g, w, I32)


def test_creation_under_trace_appears_in_ir():
    jaxpr = fg.make_jaxpr(lambda x: x + fnp.arange(3) + fnp.eye(3)[0])(fnp.zeros(3))
    assert "iota" in str(jaxpr)


@pytest.mark.parametrize("fn", [lambda t: fnp.arange(t), lambda t: fnp.zeros(t)])
def test_traced_sizes_are_a_concretization_error(fn):
    with pytest.raises(ConcretizationTypeError, match="static"):
        fg.make_jaxpr(fn)(3)
