"""funcgrad.numpy's remaining long-tail names (issue 28): gcd/lcm/ldexp/frexp/modf/spacing/
nextafter/i0, the window functions, the ufunc objects and methods (JAX's values), the host
helpers (files, buffers, printing, einsum_path) and NumPy's other scalar names, against
NumPy, with derivatives, vmap and jit where they apply."""

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.numpy as fnp

R = np.random.default_rng(9)


@given(st.lists(st.integers(-10 ** 6, 10 ** 6), min_size=1, max_size=6),
       st.lists(st.integers(-10 ** 4, 10 ** 4), min_size=1, max_size=6))
def test_gcd_lcm_match_numpy(a, b):
    n = min(len(a), len(b))
    a, b = np.asarray(a[:n], np.int32), np.asarray(b[:n], np.int32)
    close(fnp.gcd(a, b), np.gcd(a, b))
    close(fnp.lcm(a[:n] % 1000, b[:n] % 1000), np.lcm(a[:n] % 1000, b[:n] % 1000))


def test_gcd_transforms():
    a, b = R.integers(-50, 50, (3, 4)).astype(np.int32), R.integers(-50, 50, (3, 4))
    check_all(fnp.gcd, (a, b.astype(np.int32)), np.gcd(a, b), batch=(0, 1))
    assert int(fnp.gcd(12, 18)) == 6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_ldexp_modf_spacing(dtype):
    fg.config.update("enable_x64", dtype == np.float64)
    tiny = np.finfo(dtype).tiny
    x = np.array([8.0, -0.75, 0.0, -0.0, tiny / 8, 3 * tiny, 1e30, np.inf, np.nan, -5.5,
                  1.0], dtype)
    m, e = fnp.frexp(x)
    wm, we = np.frexp(x)
    close(m, wm)
    close(e, we.astype(np.int32))
    close(fnp.ldexp(wm, we), x)
    close(fnp.modf(x), np.modf(x))
    finite = x[np.isfinite(x)]
    close(fnp.spacing(finite), np.spacing(finite))
    close(fnp.nextafter(finite, np.inf), np.nextafter(finite, np.inf))


def test_float_ops_derivatives():
    x = np.array([0.3, -2.5, 7.0, 1e-3], np.float32)
    check_all(lambda x: fnp.frexp(x)[0], (x,), np.frexp(x)[0], grad=(0,))
    check_all(lambda x: fnp.ldexp(x, np.array([1, -3, 2, 10])), (x,),
              np.ldexp(x, [1, -3, 2, 10]), grad=(0,))
    y = x + np.float32(0.25)  # (away from the integers, where the fraction jumps)
    check_all(lambda x: fnp.modf(x)[0], (y,), np.modf(y)[0], grad=(0,))
    check_all(fnp.i0, (x * 3,), np.i0(x * 3), grad=(0,), order=2, rtol=1e-5)


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows_match_numpy(name):
    for m in (0, 1, 2, 5, 8):
        close(getattr(fnp, name)(m), getattr(np, name)(m).astype(np.float32), 1e-6, 1e-6)


def test_kaiser():
    for m in (0, 1, 2, 5, 8):
        close(fnp.kaiser(m, 3.5), np.kaiser(m, 3.5).astype(np.float32), 1e-6, 1e-6)
    check_all(lambda b: fnp.kaiser(6, b), (np.float32(3.0),), np.kaiser(6, 3.0), grad=(0,),
              batch=())


# --- ufuncs -----------------------------------------------------------------------------------
X = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def test_the_methods_of_funcgrad_numpys_ufuncs_follow_jax():
    close(fnp.add.reduce(X, axis=1), X.sum(1))
    close(fnp.add.accumulate(X, axis=1), np.add.accumulate(X, axis=1))
    close(fnp.add.outer(np.arange(2.0), np.arange(3.0)), np.add.outer(np.arange(2.0),
                                                                      np.arange(3.0)))
    close(fnp.add.at(np.zeros(3), np.array([0, 0, 2]), 1.0, inplace=False),
          np.array([2.0, 0.0, 1.0]))
    close(fnp.add.reduceat(np.arange(8.0), np.array([0, 4, 1, 5])),
          np.add.reduceat(np.arange(8.0), [0, 4, 1, 5]))
    close(fnp.subtract.reduce(np.array([10.0, 1.0, 2.0])), np.float64(7.0))
    close(fnp.maximum.accumulate(np.array([1.0, 3.0, 2.0])), np.array([1.0, 3.0, 3.0]))
    close(fnp.logaddexp.reduce(np.array([0.0, 0.0])), np.log(2.0))
    close(fnp.maximum.at(np.zeros(3), np.array([1, 1]), np.array([2.0, 5.0]), inplace=False),
          np.array([0.0, 5.0, 0.0]))
    close(fnp.subtract.at(np.zeros(3), np.array([1, 1]), 2.0, inplace=False),
          np.array([0.0, -4.0, 0.0]))
    close(fnp.bitwise_or.reduce(np.array([1, 2, 4])), np.int32(7))
    assert (fnp.add.identity, fnp.add.nin, fnp.maximum.identity) == (0, 2, None)
    with pytest.raises(ValueError, match="immutable"):
        fnp.add.at(np.zeros(3), np.array([0]), 1.0)


def test_frompyfunc_and_generic_ufunc_methods():
    f = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1, identity=0)
    assert isinstance(f, fnp.ufunc)
    close(f(np.arange(3.0), 2.0), np.arange(3.0) * 2 + 1)
    close(f.reduce(np.arange(1.0, 4.0)), np.float64(10.0))  # ((0*1+1)*2+1)*3+1
    close(f.accumulate(np.arange(1.0, 4.0)), np.array([1.0, 3.0, 10.0]))
    close(f.at(np.ones(3), np.array([1, 1]), 2.0, inplace=False), np.array([1.0, 7.0, 1.0]))
    close(f.outer(np.array([1.0, 2.0]), np.array([3.0])), np.array([[4.0], [7.0]]))
    close(f.reduceat(np.arange(1.0, 5.0), np.array([0, 2])), np.array([3.0, 13.0]))
    g = fnp.ufunc(lambda a, b: a * b + 1, 2, 1)
    check_all(lambda x: g.reduce(x, axis=1), (X / 5,), grad=(0,))
    check_all(lambda x: g.accumulate(x, axis=0), (X / 5,), grad=(0,))
    check_all(lambda x: g.at(x, np.array([0, 2, 0]), 0.5, inplace=False), (X[0],), grad=(0,))


# --- host helpers and scalar names ------------------------------------------------------------
def test_files_buffers_and_printing():
    b = io.BytesIO()
    fnp.save(b, fnp.arange(3.0))
    b.seek(0)
    close(fnp.load(b), np.arange(3.0, dtype=np.float32))
    b = io.BytesIO()
    fnp.savez(b, fnp.arange(3), w=fnp.ones(2))
    b.seek(0)
    z = fnp.load(b)
    close((z["arr_0"], z["w"]), (np.arange(3), np.ones(2)))
    close(fnp.frombuffer(b"\x01\x02", dtype=fnp.uint8), np.array([1, 2], np.uint8))
    close(fnp.frombuffer(np.ones(2).tobytes()), np.ones(2, np.float32))
    close(fnp.fromiter(range(3), dtype=int), np.arange(3))
    close(fnp.fromstring("1 2 3", sep=" "), np.array([1.0, 2.0, 3.0], np.float32))
    assert fnp.array_repr(fnp.ones(2)) == "array([1., 1.], dtype=float32)"
    assert fnp.array_str(fnp.ones(2)) == "[1. 1.]"
    with fnp.printoptions(precision=2):
        assert "1.23" in repr(fnp.array([1.23456])) and fnp.get_printoptions()["precision"] == 2
    assert fnp.iterable([1]) and not fnp.iterable(1)
    with pytest.raises(Exception, match="concrete"):
        fg.jit(fnp.array_str)(fnp.ones(2))


def test_einsum_path_and_scalar_names():
    path, text = fnp.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)),
                                 np.ones((4, 5)))
    assert path[0] == "einsum_path" and "Optimized" in text
    assert fnp.bool == np.bool_ and fnp.zeros(2, fnp.bool).dtype == bool
    assert np.dtype(fnp.double) == np.float64 and np.dtype(fnp.single) == np.float32
    assert np.dtype(fnp.csingle) == np.complex64 and np.dtype(fnp.cdouble) == np.complex128
    assert fnp.object_ is np.object_ and fnp.ComplexWarning is np.exceptions.ComplexWarning
    assert issubclass(fnp.character, fnp.flexible)
