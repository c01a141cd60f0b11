"""funcgrad.scipy.special against scipy.special: values on hypothesis-drawn shapes, derivatives
(check_grads, float64, orders 1-2, both modes), vmap against a Python loop, jit against eager,
JAX's zero conventions of xlogy/xlog1py and their derivatives, and one home per concept."""

import numpy as np
import pytest
import scipy.special as ss
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
import funcgrad.scipy as jsp
from funcgrad import nn
from funcgrad.test_util import check_grads

sp = jsp.special

# name -> (scipy reference, sampler of valid inputs in float64, number of arguments)
UNARY = {
    "erf": (ss.erf, lambda r, s: r.normal(size=s)),
    "erfc": (ss.erfc, lambda r, s: r.normal(size=s)),
    "erfinv": (ss.erfinv, lambda r, s: r.uniform(-0.95, 0.95, s)),
    "gammaln": (ss.gammaln, lambda r, s: r.uniform(0.2, 6.0, s)),
    "gamma": (ss.gamma, lambda r, s: r.uniform(0.2, 5.0, s)),
    "digamma": (ss.digamma, lambda r, s: r.uniform(0.3, 6.0, s)),
    "expit": (ss.expit, lambda r, s: r.normal(scale=3, size=s)),
    "logit": (ss.logit, lambda r, s: r.uniform(0.05, 0.95, s)),
    "entr": (ss.entr, lambda r, s: r.uniform(0.05, 3.0, s)),
    "ndtr": (ss.ndtr, lambda r, s: r.normal(scale=2, size=s)),
    "log_ndtr": (ss.log_ndtr, lambda r, s: r.normal(scale=4, size=s)),
    "ndtri": (ss.ndtri, lambda r, s: r.uniform(0.05, 0.95, s)),
}
BINARY = {
    "xlogy": (ss.xlogy, lambda r, s: r.uniform(0.1, 3, s), lambda r, s: r.uniform(0.1, 3, s)),
    "xlog1py": (ss.xlog1py, lambda r, s: r.uniform(0.1, 3, s), lambda r, s: r.uniform(0, 3, s)),
    "betaln": (ss.betaln, lambda r, s: r.uniform(0.5, 4, s), lambda r, s: r.uniform(0.5, 4, s)),
}
shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes, seed=st.integers(0, 2 ** 16))
def test_unary_matches_scipy(name, shape, seed):
    ref, sample = UNARY[name]
    x = sample(np.random.default_rng(seed), shape)
    got = getattr(sp, name)(x.astype(np.float32))
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), ref(x.astype(np.float32).astype(np.float64)),
                               rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shape=shapes, seed=st.integers(0, 2 ** 16))
def test_binary_matches_scipy(name, shape, seed):
    ref, sx, sy = BINARY[name]
    rng = np.random.default_rng(seed)
    x, y = sx(rng, shape).astype(np.float32), sy(rng, shape[-1:]).astype(np.float32)
    np.testing.assert_allclose(np.asarray(getattr(sp, name)(x, y)),
                               ref(x.astype(np.float64), y.astype(np.float64)), rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_derivatives(name):
    fg.config.update("enable_x64", True)
    x = UNARY[name][1](np.random.default_rng(0), (3,))
    check_grads(getattr(sp, name), (x,), order=2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_derivatives(name):
    fg.config.update("enable_x64", True)
    rng = np.random.default_rng(1)
    _, sx, sy = BINARY[name]
    check_grads(getattr(sp, name), (sx(rng, (3,)), sy(rng, (3,))), order=2, atol=1e-4,
                rtol=1e-4)


def test_polygamma_and_multigammaln():
    x = np.array([0.5, 1.5, 4.0])
    for n in (0, 1, 2, 3):
        np.testing.assert_allclose(np.asarray(sp.polygamma(n, x.astype(np.float32))),
                                   ss.polygamma(n, x), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(sp.multigammaln(3.5, 3)), ss.multigammaln(3.5, 3),
                               rtol=1e-6)


def test_xlogy_zero_convention_and_derivatives_at_zero():
    assert float(sp.xlogy(0.0, 0.0)) == 0.0 and float(sp.xlog1py(0.0, -1.0)) == 0.0
    gx, gy = fg.grad(sp.xlogy, argnums=(0, 1))(0.0, 0.0)
    assert np.isfinite(float(gy)) and float(gy) == 0.0  # JAX: y' term is x/y = 0 at x = 0
    gx, gy = fg.grad(sp.xlogy, argnums=(0, 1))(2.0, 3.0)
    np.testing.assert_allclose([float(gx), float(gy)], [np.log(3.0), 2.0 / 3.0], rtol=1e-6)
    assert float(sp.entr(0.0)) == 0.0 and float(sp.entr(-1.0)) == -np.inf
    assert float(fg.grad(sp.xlog1py, argnums=1)(0.0, -1.0)) == 0.0


def test_log_ndtr_tails_are_finite_and_accurate():
    x = np.array([-200.0, -40.0, -11.0, -9.0, 0.0, 5.0, 12.0])
    np.testing.assert_allclose(np.asarray(sp.log_ndtr(x.astype(np.float32))), ss.log_ndtr(x),
                               rtol=1e-5)
    g = np.asarray(fg.vmap(fg.grad(sp.log_ndtr))(fnp.asarray(x[1:4], dtype=fnp.float32)))
    ref = np.exp(-0.5 * x[1:4] ** 2 - 0.5 * np.log(2 * np.pi) - ss.log_ndtr(x[1:4]))
    np.testing.assert_allclose(g, ref, rtol=1e-4)


def test_one_home_softmax_logsumexp_expit_are_nn_functions():
    # scipy.special's softmax/log_softmax default to the whole array (axis=None), as SciPy's
    # and JAX's do; nn's to the last axis: so they are thin wrappers, not the same objects
    assert sp.logsumexp is nn.logsumexp and sp.expit is nn.sigmoid
    a = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 1000.0]], np.float32)
    for axis in (None, 0, 1):
        kw = {} if axis is None else {"axis": axis}
        np.testing.assert_allclose(np.asarray(sp.softmax(a, **kw)), ss.softmax(a, **kw),
                                   rtol=1e-6, atol=1e-30)
        np.testing.assert_allclose(np.asarray(sp.log_softmax(a, **kw)),
                                   ss.log_softmax(a, **kw), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(sp.softmax(a, axis=-1)), np.asarray(nn.softmax(a)))
    np.testing.assert_allclose(np.asarray(sp.logsumexp(a, axis=1)), ss.logsumexp(a, axis=1),
                               rtol=1e-6)


@pytest.mark.parametrize("name", ["gammaln", "xlogy", "log_ndtr", "erfinv"])
def test_vmap_matches_a_loop_and_jit_matches_eager(name):
    f = getattr(sp, name)
    rng = np.random.default_rng(3)
    if name in BINARY:
        args = (BINARY[name][1](rng, (4, 3)), BINARY[name][2](rng, (4, 3)))
    else:
        args = (UNARY[name][1](rng, (4, 3)),)
    args = tuple(a.astype(np.float32) for a in args)
    looped = np.stack([np.asarray(f(*[a[i] for a in args])) for i in range(4)])
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(*args)), looped, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(*args)), np.asarray(f(*args)), rtol=1e-6)


def test_lazy_namespace_and_unknown_names():
    with pytest.raises(AttributeError, match="linalg, special, stats"):
        jsp.not_a_module  # noqa: B018
    assert "special" in dir(jsp)


def test_incomplete_gamma_and_beta_against_scipy_with_derivatives():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(0.1, 20, 50), rng.uniform(0.1, 20, 50)
    x, u = rng.uniform(0, 30, 50), rng.uniform(0, 1, 50)
    for got, want in [(sp.gammainc(a, x), ss.gammainc(a, x)),
                      (sp.gammaincc(a, x), ss.gammaincc(a, x)),
                      (sp.betainc(a, b, u), ss.betainc(a, b, u))]:
        np.testing.assert_allclose(np.asarray(got), want, atol=2e-6)
    assert np.isnan(float(sp.gammainc(-1.0, 1.0))) and float(sp.gammainc(2.0, 0.0)) == 0.0
    assert float(sp.betainc(2.0, 3.0, 1.0)) == 1.0 and np.isnan(float(sp.betainc(2.0, 3.0, 2.0)))
    np.testing.assert_allclose(np.asarray(fg.jit(sp.gammaincc)(a, x)), ss.gammaincc(a, x),
                               atol=2e-6)
    fg.config.update("enable_x64", True)
    np.testing.assert_allclose(np.asarray(sp.gammainc(a, x)), ss.gammainc(a, x), atol=1e-12)
    # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a); d/da against scipy by central differences
    ga, gx = fg.grad(sp.gammainc, argnums=(0, 1))(3.0, 2.0)
    np.testing.assert_allclose(float(gx), 4.0 * np.exp(-2.0) / 2.0, rtol=1e-10)
    fd = (ss.gammainc(3.0 + 1e-6, 2.0) - ss.gammainc(3.0 - 1e-6, 2.0)) / 2e-6
    np.testing.assert_allclose(float(ga), fd, rtol=1e-6)
    check_grads(sp.gammainc, (np.array([0.7, 4.0]), np.array([0.5, 6.0])), order=1)
    check_grads(sp.betainc, (np.array([0.7, 4.0]), np.array([2.0, 1.5]), np.array([0.3, 0.8])),
                order=1)
    np.testing.assert_allclose(np.asarray(sp.rel_entr(np.array([0.0, 1.0, 2.0]),
                                                      np.array([1.0, 2.0, 0.0]))),
                               ss.rel_entr([0.0, 1.0, 2.0], [1.0, 2.0, 0.0]))
    np.testing.assert_allclose(np.asarray(sp.kl_div(np.array([0.0, 1.0, 2.0]),
                                                    np.array([1.0, 2.0, 0.0]))),
                               ss.kl_div([0.0, 1.0, 2.0], [1.0, 2.0, 0.0]))
