"""Complex numbers end to end: creation and dtypes, elementwise math and reductions against
NumPy, JAX's autodiff conventions (the autodiff cookbook's examples with their published
values, `holomorphic=` in grad/jacfwd/jacrev/hessian and their errors, the real-function
gradient df/dx - i df/dy checked by finite differences), check_grads over a table of complex
functions, batching against a loop, jit against eager, and the Array API's special cases of
exp/expm1/log/log1p/sqrt/tanh at infinities, NaNs and signed zeros."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.test_util import check_grads

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def _z(seed, shape, dtype=C128):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _x64():
    fg.config.update("enable_x64", True)


# --- creation, dtypes, printing -------------------------------------------------------------

def test_creation_and_dtype_policy():
    assert fnp.array(1 + 2j).dtype == C64 and fnp.zeros(3, fnp.complex64).dtype == C64
    assert fnp.asarray(np.ones(2, C128)).dtype == C64  # x64 off narrows, as in JAX
    assert (1j * fnp.ones(2)).dtype == C64  # a weak complex scalar joins float32 -> c64
    assert (fnp.ones(2, fnp.complex64) * np.float64(2)).dtype == C64
    assert fnp.arange(3).astype(fnp.complex64).dtype == C64
    assert repr(fnp.array([1 + 2j])) == "Array([1.+2.j], dtype=complex64)"
    _x64()
    assert fnp.array(1 + 2j).dtype == C128
    assert (fnp.ones(2, fnp.complex64) * fnp.ones(2, fnp.float64)).dtype == C128
    z = fnp.array([3 - 4j])
    assert z.real.dtype == np.float64 and fnp.abs(z).dtype == np.float64
    np.testing.assert_array_equal(z.astype(fnp.float64), [3.0])  # complex -> real: real part


@given(shapes, st.integers(0, 2**31 - 1))
def test_elementwise_and_reductions_match_numpy(shape, seed):
    z = _z(seed, shape, C64)
    w = _z(seed + 1, shape, C64) + 2  # away from zero
    with np.errstate(all="ignore"):
        for name in ("exp", "log", "sqrt", "sin", "cos", "tanh", "arcsinh", "expm1", "log1p",
                     "abs", "angle", "real", "imag", "conj", "sign", "square", "reciprocal"):
            want = getattr(np, name)(z)
            np.testing.assert_allclose(getattr(fnp, name)(z), want, rtol=2e-5, atol=2e-5,
                                       err_msg=name)
        zf, wf = fnp.asarray(z), fnp.asarray(w)
        np.testing.assert_allclose(zf * wf - zf / wf + zf ** 3, z * w - z / w + z ** 3,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(fnp.power(w, z), np.power(w, z), rtol=1e-4, atol=1e-5)
    for name in ("sum", "mean", "prod", "var", "std"):
        got = getattr(fnp, name)(z)
        assert got.dtype == (C64 if name in ("sum", "mean", "prod") else np.float32), name
        if z.size:
            np.testing.assert_allclose(got, getattr(np, name)(z), rtol=1e-4, atol=1e-5,
                                       err_msg=name)
    if z.ndim:
        np.testing.assert_allclose(fnp.cumsum(z, axis=0), np.cumsum(z, axis=0), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_array_equal(fnp.iscomplex(z), np.iscomplex(z))


def test_products_with_complex_operands():
    a, b = _z(1, (3, 4), C64), _z(2, (4, 2), C64)
    np.testing.assert_allclose(fnp.asarray(a) @ b, a @ b, rtol=1e-5)
    np.testing.assert_allclose(fnp.vdot(a, a), np.vdot(a, a), rtol=1e-5)
    np.testing.assert_allclose(fnp.einsum("ij,jk->ki", a, b), np.einsum("ij,jk->ki", a, b),
                               rtol=1e-5)
    np.testing.assert_allclose(fnp.dot(a, b.real), np.dot(a, b.real), rtol=1e-5)


# --- JAX's conventions: the autodiff cookbook ---------------------------------------------------

def test_cookbook_real_valued_function_of_a_complex_input():
    def f(z):
        x, y = fnp.real(z), fnp.imag(z)
        return x ** 2 + y ** 2
    z = 3.0 + 4j
    assert fg.grad(f)(z) == 6 - 8j  # JAX's documented value: df/dx - i df/dy
    assert fg.grad(lambda z: fnp.abs(z) ** 2)(z) == 6 - 8j
    np.testing.assert_allclose(fg.grad(fnp.abs)(z), 0.6 - 0.8j, rtol=1e-6)


def test_cookbook_holomorphic_grad():
    z = 3.0 + 4j
    g = fg.grad(fnp.sin, holomorphic=True)(z)
    assert g.dtype == C64
    np.testing.assert_allclose(g, -27.034946 - 3.8511534j, rtol=1e-6)  # cos(3 + 4j)
    np.testing.assert_allclose(fg.grad(fg.grad(fnp.sin, holomorphic=True), holomorphic=True)(z),
                               -np.sin(z), rtol=1e-5)


def test_cookbook_holomorphic_grad_through_cholesky():
    a = fnp.array([[5.0, 2 + 3j, 5j], [2 - 3j, 7.0, 1 + 7j], [-5j, 1 - 7j, 12.0]])

    def f(x):
        low = fnp.linalg.cholesky(x)
        return fnp.sum((low - fnp.sin(low)) ** 2)
    want = [[-0.7534186 + 0j, -3.0509028 - 10.940545j, 5.9896846 + 3.542303j],
            [-3.0509028 + 10.940545j, -8.904491 + 0j, -5.1351523 - 6.559373j],
            [5.9896846 - 3.542303j, -5.1351523 + 6.559373j, 0.01320427 + 0j]]
    np.testing.assert_allclose(fg.grad(f, holomorphic=True)(a), want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("f,df", [
    (fnp.exp, np.exp), (fnp.log, lambda z: 1 / z), (lambda z: z ** 3, lambda z: 3 * z ** 2),
    (lambda z: 1 / z, lambda z: -1 / z ** 2), (fnp.sqrt, lambda z: 0.5 / np.sqrt(z)),
    (fnp.tanh, lambda z: 1 / np.cosh(z) ** 2),
    (fnp.arccosh, lambda z: 1 / (np.sqrt(z - 1) * np.sqrt(z + 1))),  # the principal branch
    (fnp.expm1, np.exp), (lambda z: fnp.fft.fft(z * fnp.ones(4))[0], lambda z: 4 + 0 * z)])
def test_holomorphic_derivatives_are_the_complex_derivative(f, df):
    _x64()
    for z in (0.7 + 1.3j, -1.2 + 0.4j, 2.0 - 0.5j):
        np.testing.assert_allclose(fg.grad(f, holomorphic=True)(z), df(z), rtol=1e-10)


def test_real_function_gradient_is_dfdx_minus_i_dfdy():
    _x64()

    def f(z):
        return fnp.real(z) * fnp.imag(z) ** 3 + fnp.abs(z) + fnp.angle(z) + fnp.real(
            fnp.exp(z) * fnp.conj(z))
    z, h = 0.8 - 1.1j, 1e-6
    dx = (f(z + h) - f(z - h)) / (2 * h)
    dy = (f(z + 1j * h) - f(z - 1j * h)) / (2 * h)
    np.testing.assert_allclose(fg.grad(f)(z), dx - 1j * dy, rtol=1e-8)
    np.testing.assert_allclose(fg.jacrev(f)(z), dx - 1j * dy, rtol=1e-8)


def test_holomorphic_jacobians_and_hessian():
    _x64()
    z = fnp.asarray(_z(3, (2,)))

    def f(z):
        return fnp.stack([z[0] * z[1], fnp.sin(z[0]), z[1] ** 2])
    want = np.array([[z[1], z[0]], [np.cos(z[0]), 0], [0, 2 * z[1]]])
    np.testing.assert_allclose(fg.jacfwd(f, holomorphic=True)(z), want, rtol=1e-12)
    np.testing.assert_allclose(fg.jacrev(f, holomorphic=True)(z), want, rtol=1e-12)
    h = fg.hessian(lambda z: fnp.sum(z ** 3) + z[0] * z[1], holomorphic=True)(z)
    np.testing.assert_allclose(h, [[6 * z[0], 1], [1, 6 * z[1]]], rtol=1e-12)


def test_transforms_compose_with_complex():
    z = fnp.asarray(_z(4, (3,), C64))
    g = fg.grad(fnp.sin, holomorphic=True)
    want = np.cos(np.asarray(z))
    np.testing.assert_allclose(fg.vmap(g)(z), want, rtol=1e-5)
    np.testing.assert_allclose(fg.jit(fg.vmap(g))(z), want, rtol=1e-5)
    np.testing.assert_allclose(fg.vmap(fg.grad(fg.jit(fnp.sin), holomorphic=True))(z), want,
                               rtol=1e-5)
    out, t = fg.jvp(fnp.exp, (z,), (fnp.ones(3, fnp.complex64),))
    np.testing.assert_allclose(t, np.exp(np.asarray(z)), rtol=1e-5)
    _, f_vjp = fg.vjp(fnp.sin, z)
    np.testing.assert_allclose(f_vjp(fnp.ones(3))[0], want, rtol=1e-5)  # real ct converted


@pytest.mark.parametrize("call,match", [
    (lambda: fg.grad(fnp.sin)(1j), "grad requires real-valued outputs.*pass holomorphic=True"),
    (lambda: fg.grad(fnp.sin, holomorphic=True)(1.0),
     "holomorphic=True requires inputs with complex dtype"),
    (lambda: fg.grad(fnp.abs, holomorphic=True)(1j),
     "holomorphic=True requires outputs with complex dtype"),
    (lambda: fg.jacfwd(fnp.sin)(fnp.ones(2) * 1j), "jacfwd requires real-valued inputs"),
    (lambda: fg.jacrev(fnp.sin)(fnp.ones(2) * 1j), "jacrev requires real-valued outputs"),
    (lambda: fg.jacfwd(fnp.abs, holomorphic=True)(fnp.ones(2) * 1j),
     "jacfwd with holomorphic=True requires outputs with complex dtype"),
    (lambda: fg.jacrev(fnp.sin, holomorphic=True)(fnp.ones(2)),
     "jacrev with holomorphic=True requires inputs with complex dtype"),
    (lambda: fg.vjp(fnp.abs, 1j)[1](1 + 0j), "cotangent must be real"),
])
def test_dtype_errors_say_what_to_do(call, match):
    with pytest.raises(errors.FuncgradTypeError, match=match):
        call()


# --- derivatives, batching, jit over a table of complex functions ------------------------------

A = _z(5, (3, 3))
FUNCS = {
    "abs": fnp.abs, "angle": fnp.angle, "parts": lambda z: fnp.real(z) * fnp.imag(z) * z,
    "conj": lambda z: fnp.conj(z) * z, "exp_log": lambda z: fnp.log(fnp.exp(z) + 2),
    "sqrt": lambda z: fnp.sqrt(z + 3), "trig": lambda z: fnp.sin(z) * fnp.tanh(z),
    "arccosh": fnp.arccosh, "expm1": fnp.expm1, "power": lambda z: (z + 2) ** (z / 4),
    "divide": lambda z: z / (z * z + 2), "reductions": lambda z: fnp.stack(
        [fnp.sum(z), fnp.prod(z), fnp.mean(z), fnp.var(z)]),
    "cumprod": fnp.cumprod, "matmul": lambda z: A @ z, "vdot": lambda z: fnp.vdot(z, A @ z),
    "einsum": lambda z: fnp.einsum("i,ij,j->", z, A, z), "where": lambda z: fnp.where(
        fnp.real(z) > 0, z * z, fnp.conj(z)), "index": lambda z: z[::-1] * z[0],
    "mixed": lambda z: fnp.real(z).astype(z.dtype) * 1j + fnp.abs(z) ** 2,
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_check_grads_complex(name):
    check_grads(FUNCS[name], (_z(6, (3,)),), order=2)


def test_check_grads_real_to_complex_to_real():
    check_grads(lambda x: fnp.abs(fnp.exp(1j * x) + x) ** 2, (np.array([0.3, -1.2]),), order=2)


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_vmap_and_jit_match_eager(name):
    f = FUNCS[name]
    zs = _z(7, (4, 3), C64)
    want = np.stack([np.asarray(f(z)) for z in zs])
    np.testing.assert_allclose(fg.vmap(f)(zs), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fg.jit(f)(zs[0]), want[0], rtol=1e-4, atol=1e-5)


# --- the Array API's special cases --------------------------------------------------------------

INF, NAN, PI = np.inf, np.nan, np.pi
# (function, input, expected, whether the standard leaves the signs unspecified)
SPECIAL = [
    ("exp", (0.0, 0.0), (1, 0), False), ("exp", (1, INF), (NAN, NAN), False),
    ("exp", (INF, 0.0), (INF, 0), False), ("exp", (-INF, 1.0), (0 * np.cos(1), 0 * np.sin(1)),
                                           False),
    ("exp", (-INF, INF), (0, 0), True), ("exp", (INF, INF), (INF, NAN), True),
    ("exp", (INF, NAN), (INF, NAN), True), ("exp", (NAN, 0.0), (NAN, 0), False),
    ("exp", (NAN, 1.0), (NAN, NAN), False),
    ("expm1", (0.0, 0.0), (0, 0), False), ("expm1", (-0.0, 0.0), (0, 0), False),
    ("tanh", (INF, 3.0), (1, 0.0), False), ("tanh", (-INF, 2.0), (-1, 0.0), False),
    ("tanh", (INF, -3.0), (1, -0.0), False), ("tanh", (0.0, 0.0), (0, 0), False),
    ("expm1", (1, INF), (NAN, NAN), False),
    ("expm1", (1, NAN), (NAN, NAN), False), ("expm1", (INF, 0.0), (INF, 0), False),
    ("expm1", (-INF, 1.0), (-1, 0), True), ("expm1", (-INF, INF), (-1, 0), True),
    ("expm1", (INF, INF), (INF, NAN), True), ("expm1", (-INF, NAN), (-1, 0), True),
    ("expm1", (INF, NAN), (INF, NAN), True), ("expm1", (NAN, 0.0), (NAN, 0), False),
    ("expm1", (NAN, 1.0), (NAN, NAN), False), ("expm1", (INF, 1.0), (INF, INF), False),
    ("log", (-0.0, 0.0), (-INF, PI), False), ("log", (0.0, 0.0), (-INF, 0), False),
    ("log", (1, INF), (INF, PI / 2), False), ("log", (-INF, 1.0), (INF, PI), False),
    ("log", (INF, 1.0), (INF, 0), False), ("log", (-INF, INF), (INF, 3 * PI / 4), False),
    ("log", (INF, INF), (INF, PI / 4), False), ("log", (INF, NAN), (INF, NAN), False),
    ("log", (NAN, INF), (INF, NAN), False), ("log", (NAN, 1.0), (NAN, NAN), False),
    ("log1p", (-1.0, 0.0), (-INF, 0), False), ("log1p", (1, INF), (INF, PI / 2), False),
    ("log1p", (-INF, 1.0), (INF, PI), False), ("log1p", (INF, INF), (INF, PI / 4), False),
    ("log1p", (NAN, INF), (INF, NAN), False),
    ("sqrt", (0.0, 0.0), (0, 0), False), ("sqrt", (NAN, INF), (INF, INF), False),
    ("sqrt", (1, NAN), (NAN, NAN), False), ("sqrt", (-INF, 1.0), (0, INF), False),
    ("sqrt", (INF, 1.0), (INF, 0), False), ("sqrt", (-INF, NAN), (NAN, INF), True),
    ("sqrt", (INF, NAN), (INF, NAN), False),
]


def _same(got, want, loose):
    for g, w in ((got.real, want[0]), (got.imag, want[1])):
        if np.isnan(w):
            assert np.isnan(g), (got, want)
        else:
            g, w = (abs(g), abs(w)) if loose else (g, w)
            assert g == w or abs(g - w) <= 1e-6 * abs(w), (got, want)  # pi in float32
            assert w != 0 or np.signbit(g) == np.signbit(w), (got, want)  # signed zeros


@pytest.mark.parametrize("x64", [False, True])
def test_array_api_special_cases(x64):
    fg.config.update("enable_x64", x64)
    for name, (a, b), want, loose in SPECIAL:
        z = np.array([complex(a, b)], C128 if x64 else C64)
        for got in (getattr(fnp, name)(z), fg.jit(getattr(fnp, name))(z)):
            assert got.dtype == z.dtype
            _same(complex(np.asarray(got)[0]), want, loose)


def test_expm1_is_accurate_near_zero():
    _x64()
    z = np.array([1e-9 + 1e-9j, 3e-12 - 2e-8j, -1e-10 + 0j])
    want = z + z * z / 2  # the series, exact to float64 here
    np.testing.assert_allclose(fnp.expm1(z), want, rtol=1e-12)


def test_ordering_is_lexicographic_as_in_numpy_and_jax():
    a = np.array([1 + 2j, 1 + 3j, 2 + 0j, 1 + 2j, np.nan + 0j], np.complex64)
    b = np.array([1 + 3j, 1 + 2j, 1 + 5j, 1 + 2j, 1j], np.complex64)
    with np.errstate(invalid="ignore"):
        for name in ("less", "less_equal", "greater", "greater_equal"):
            want = getattr(np, name)(a, b)
            np.testing.assert_array_equal(getattr(fnp, name)(a, b), want, err_msg=name)
            np.testing.assert_array_equal(fg.jit(getattr(fnp, name))(a, b), want)
            np.testing.assert_array_equal(fg.vmap(getattr(fnp, name))(a, b), want)
        np.testing.assert_array_equal(fnp.asarray(a) < 1.5, a < 1.5)
    np.testing.assert_array_equal(fnp.less(fnp.arange(3), 1), [True, False, False])


def test_maximum_minimum_of_complex_follow_numpy():
    nan = np.nan
    a = np.array([1 + 2j, 1 + 3j, 2, 1 + 2j, nan, 1j, complex(0, nan), nan], np.complex64)
    b = np.array([1 + 3j, 1 + 2j, 1 + 5j, 1 + 2j, 1j, complex(nan, 1), 2j, complex(0, nan)],
                 np.complex64)
    with np.errstate(invalid="ignore"):
        for name in ("maximum", "minimum"):
            want = getattr(np, name)(a, b)
            np.testing.assert_array_equal(getattr(fnp, name)(a, b), want, err_msg=name)
            np.testing.assert_array_equal(fg.jit(getattr(fnp, name))(a, b), want)
    check_grads(lambda z, w: fnp.maximum(z, w) * fnp.minimum(z, w),
                (_z(8, (4,)), _z(9, (4,))), order=2)


# --- ordering reductions and ranges ---------------------------------------------------------

@pytest.mark.parametrize("axis", [None, 0, 2, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_max_min_argmax_argmin_order_by_real_then_imag(axis, keepdims):
    _x64()
    rng = np.random.default_rng(3)
    # small integer parts make ties in the real part common; NaNs in either part win
    z = (rng.integers(0, 3, (4, 5, 3)) + 1j * rng.integers(0, 3, (4, 5, 3))).astype(C128)
    z[1, 2, 1], z[2, 0, 2] = np.nan, 1 + 1j * np.nan
    for f in ("max", "min"):
        got = getattr(fnp, f)(fnp.asarray(z), axis=axis, keepdims=keepdims)
        want = getattr(np, f)(z, axis=axis, keepdims=keepdims)
        assert got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)
        jitted = fg.jit(lambda v, f=f: getattr(fnp, f)(v, axis=axis, keepdims=keepdims))
        np.testing.assert_array_equal(np.asarray(jitted(fnp.asarray(z))), want)
    if not isinstance(axis, tuple):
        for f in ("argmax", "argmin"):
            np.testing.assert_array_equal(np.asarray(getattr(fnp, f)(fnp.asarray(z), axis=axis)),
                                          getattr(np, f)(z, axis=axis))


def test_complex_max_gradient_goes_to_the_first_maximum():
    _x64()
    g = fg.grad(lambda z: fnp.real(fnp.max(z)))(fnp.asarray([1 + 2j, 3 + 1j, 3 + 0.5j, 3 + 1j]))
    np.testing.assert_array_equal(np.asarray(g), [0, 1, 0, 0])
    with pytest.raises(errors.FuncgradValueError, match="max"):
        fnp.max(fnp.zeros((0, 2), fnp.complex64), axis=0)


def test_linspace_with_complex_endpoints():
    _x64()
    for args in ((0, 1 + 1j, 3), (1j, 2, 4, False), (np.array([0, 1j]), 2 - 1j, 5)):
        np.testing.assert_allclose(np.asarray(fnp.linspace(*args)), np.linspace(*args),
                                   rtol=1e-15, atol=1e-15)


def test_linspace_broadcasts_an_array_endpoint_against_a_scalar():
    np.testing.assert_allclose(np.asarray(fnp.linspace(np.array([0.0, 1.0]), 2.0, 3)),
                               np.linspace(np.array([0.0, 1.0]), 2.0, 3), rtol=1e-6)
