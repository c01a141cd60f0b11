"""The long tail's special functions: lax's bessel_i0e/i1e, zeta, igamma/igammac/betainc,
igamma_grad_a and random_gamma_grad (lax/special_series.py) and the scipy.special names built
on them, against SciPy, with derivatives (check_grads, float64), vmap and jit. JAX's edge
values are checked in test_jax_tail_references.py."""

import numpy as np
import pytest
import scipy.special as ss
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.scipy.special as sp

R = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bessel_against_scipy(dtype):
    fg.config.update("enable_x64", dtype == np.float64)
    x = np.concatenate([np.linspace(-40, 40, 161), [0.0, 1e-8, 29.9, 30.1, 700.0]]).astype(dtype)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    close(lax.bessel_i0e(x), ss.i0e(x).astype(dtype), tol, 0)
    close(lax.bessel_i1e(x), ss.i1e(x).astype(dtype), tol, 1e-300)
    close(sp.i0e(x), ss.i0e(x).astype(dtype), tol, 0)
    small = x[np.abs(x) < 50]
    close(sp.i0(small), ss.i0(small).astype(dtype), tol, 0)
    close(sp.i1(small), ss.i1(small).astype(dtype), tol, 1e-300)


def test_bessel_transforms():
    x = np.array([-3.0, -0.4, 0.3, 0.7, 12.0, 45.0], np.float32)  # (|x| has a kink at 0)
    check_all(lax.bessel_i0e, (x,), ss.i0e(x), grad=(0,), order=2)
    check_all(lax.bessel_i1e, (x,), ss.i1e(x), grad=(0,), order=2)
    check_all(sp.i1, (x[:4],), ss.i1(x[:4]), grad=(0,))
    assert float(fg.grad(lax.bessel_i1e)(0.0)) == 0.5


def test_zeta_against_scipy_and_derivative_in_q():
    fg.config.update("enable_x64", True)
    x, q = R.uniform(1.001, 40, 60), R.uniform(0.001, 500, 60)
    close(lax.zeta(x, q), ss.zeta(x, q), 1e-13, 0)
    close(sp.zeta(3.0), ss.zeta(3.0), 1e-14)
    close(lax.zeta(4.0, -30.25), ss.zeta(4.0, -30.25), 1e-12)  # XLA gets this one wrong
    fg.config.update("enable_x64", False)
    check_all(lambda q: lax.zeta(3.5, q), (np.float32([0.5, 2.0, 7.0]),),
              ss.zeta(3.5, [0.5, 2.0, 7.0]), grad=(0,), order=2)
    with pytest.raises(TypeError, match="no derivative in its first argument"):
        fg.grad(lambda x: lax.zeta(x, 2.0))(3.0)


def test_incomplete_gamma_and_beta_against_scipy():
    fg.config.update("enable_x64", True)
    a, x, b = R.uniform(0.05, 30, 80), R.uniform(0.01, 40, 80), R.uniform(0.05, 30, 80)
    u = R.uniform(0, 1, 80)
    close(lax.igamma(a, x), ss.gammainc(a, x), 0, 1e-12)
    close(lax.igammac(a, x), ss.gammaincc(a, x), 0, 1e-12)
    close(lax.betainc(a, b, u), ss.betainc(a, b, u), 0, 1e-12)
    h = 1e-6
    fd = (ss.gammainc(a + h, x) - ss.gammainc(a - h, x)) / (2 * h)
    close(lax.igamma_grad_a(a, x), fd, 0, 1e-8)
    # implicit reparameterization: the sample x(a) = P^-1(a, u) at fixed noise u moves with a
    # as d/da gammaincinv(a, u)
    a, u = R.uniform(0.3, 20, 40), R.uniform(0.05, 0.95, 40)
    x = ss.gammaincinv(a, u)
    h = 1e-5
    dx = (ss.gammaincinv(a + h, u) - ss.gammaincinv(a - h, u)) / (2 * h)
    close(lax.random_gamma_grad(a, x), dx, 1e-6, 1e-8)


def test_incomplete_functions_transforms():
    a = np.array([0.7, 2.0, 5.5], np.float32)
    x = np.array([0.4, 3.0, 4.0], np.float32)
    u = np.array([0.2, 0.5, 0.9], np.float32)
    check_all(lax.igamma, (a, x), ss.gammainc(a, x), grad=(0, 1), rtol=2e-5)
    check_all(lax.igammac, (a, x), ss.gammaincc(a, x), grad=(0, 1), rtol=2e-5)
    check_all(lax.betainc, (a, a[::-1].copy(), u), ss.betainc(a, a[::-1], u), grad=(0, 1, 2),
              rtol=2e-5)
    # differentiable again, which JAX's igamma_grad_a is not
    check_all(lax.igamma_grad_a, (a, x), grad=(0, 1), rtol=1e-4, atol=1e-5)
    check_all(lax.random_gamma_grad, (a, x), grad=(0, 1), rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="one float dtype"):
        lax.igamma(a, np.array([1, 2, 3]))


@pytest.mark.parametrize("name,args", [
    ("beta", (R.uniform(-3, 4, 12), R.uniform(0.2, 4, 12))),
    ("comb", (np.array([5.0, 10.0, 3.0, 4.0, -1.0]), np.array([2.0, 3.0, 5.0, 0.0, 1.0]))),
    ("factorial", (np.array([0.0, 1.0, 4.0, 6.5, -2.0]),)),
    ("poch", (R.uniform(0.5, 5, 10), R.uniform(-0.4, 3, 10))),
    ("gammasgn", (np.array([-2.5, -1.5, -0.5, 0.5, -0.0, 0.0, -3.0, 2.0]),)),
    ("loggamma", (np.array([0.5, 1.0, 7.5, 30.0]),)),
    ("boxcox", (R.uniform(0.1, 5, 8), np.array([0.0, 0.5, -1.0, 2.0] * 2))),
    ("boxcox1p", (R.uniform(-0.9, 5, 8), np.array([0.0, 0.5, -1.0, 2.0] * 2))),
])
def test_scipy_special_against_scipy(name, args):
    fg.config.update("enable_x64", True)
    close(getattr(sp, name)(*args), getattr(ss, name)(*args), 1e-10, 1e-12)


def test_scipy_special_more():
    fg.config.update("enable_x64", True)
    close(sp.comb(np.array([5.0, 4.0]), np.array([2.0, 3.0]), repetition=True),
          ss.comb([5.0, 4.0], [2.0, 3.0], repetition=True), 1e-10)
    for n in (0, 1, 2, 9, 24):
        close(sp.bernoulli(n), ss.bernoulli(n), 1e-10, 1e-14)  # (SciPy's are approximate)
    with pytest.raises(ValueError, match="exact"):
        sp.factorial(3.0, exact=True)
    fg.config.update("enable_x64", False)
    z, m = np.array([0.7, 2.0, 3.5], np.float32), np.array([0.5, 1.5, 2.0], np.float32)
    check_all(sp.poch, (z, m), ss.poch(z, m), grad=(0, 1))
    check_all(sp.beta, (z, m), ss.beta(z, m), grad=(0, 1))
    check_all(sp.boxcox, (z, m - 1), ss.boxcox(z, m - 1), grad=(0, 1))


_X = np.concatenate([np.linspace(-30.0, 30.0, 121), [0.0, 1e-3, 0.5, 1.0, 2.0, 4.0, 8.0, 64.0,
                                                     700.0, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("name", ["erfcx", "dawsn", "expi", "exp1", "sici", "spence"])
def test_integrals_against_scipy(name):
    fg.config.update("enable_x64", True)
    with np.errstate(all="ignore"):
        close(getattr(sp, name)(_X), getattr(ss, name)(_X), 1e-13, 1e-300)
    fg.config.update("enable_x64", False)
    x32 = _X.astype(np.float32)
    with np.errstate(all="ignore"):
        close(getattr(sp, name)(x32), getattr(ss, name)(x32), 1e-5, 1e-30)


def test_expn_owens_t_wofz_against_scipy():
    fg.config.update("enable_x64", True)
    for n in (0, 1, 2, 5, 30, 6000):  # the series, the continued fraction, large n
        with np.errstate(all="ignore"):
            close(sp.expn(n, _X), ss.expn(n, _X), 1e-13, 1e-300)
    h = np.linspace(-3, 3, 7)[:, None]
    a = np.array([-3.0, -1.0, -0.5, 0.0, 0.3, 1.0, 2.5, 10.0])[None]
    close(sp.owens_t(h, a), ss.owens_t(h, a), 1e-14, 1e-15)
    z = R.normal(size=40) * 4 + 1j * R.normal(size=40) * 4
    close(sp.wofz(z), ss.wofz(z), 1e-12, 1e-14)
    close(sp.erfcx(z), ss.erfcx(z), 1e-12, 1e-14)


@pytest.mark.parametrize("name,args,argnums", [
    ("erfcx", (np.array([-2.0, -0.3, 0.4, 3.0, 30.0]),), (0,)),
    ("dawsn", (np.array([-7.0, -4.0, -0.3, 0.4, 3.0, 5.0]),), (0,)),
    ("expi", (np.array([-3.0, -0.5, 0.4, 3.0, 20.0, 70.0]),), (0,)),
    ("exp1", (np.array([0.3, 1.0, 3.0, 9.0]),), (0,)),
    ("expn", (3, np.array([0.3, 1.0, 3.0, 9.0])), (1,)),
    ("sici", (np.array([-6.0, -0.5, 0.7, 3.0, 9.0]),), (0,)),
    ("spence", (np.array([0.2, 0.7, 1.3, 1.8, 3.0]),), (0,)),
    ("owens_t", (np.array([-1.0, 0.3, 2.0]), np.array([0.5, -2.0, 1.5])), (0, 1)),
])
def test_integrals_derivatives_batching_jit(name, args, argnums):
    f = getattr(sp, name)
    args32 = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args)
    check_all(f, args32, grad=argnums, batch=argnums, rtol=1e-5, atol=1e-6)
    fg.config.update("enable_x64", True)
    check_all(f, args, grad=argnums, order=2 if name != "owens_t" else 1, batch=(),
              jit=False)
    fg.config.update("enable_x64", False)


def test_bessel_jn_against_scipy_and_jax():
    fg.config.update("enable_x64", True)
    z = np.array([0.1, 0.5, 1.0, 2.0, 7.5, 20.0])
    close(sp.bessel_jn(z, v=4), np.stack([ss.jv(k, z) for k in range(5)]), 1e-12, 1e-14)
    close(sp.bessel_jn(np.linspace(20, 40, 5), v=2, n_iter=90),
          np.stack([ss.jv(k, np.linspace(20, 40, 5)) for k in range(3)]), 1e-10, 1e-12)
    fg.config.update("enable_x64", False)
    # float32: JAX's 50 steps overflow for small z (JAX also gives nan there)
    got = np.asarray(sp.bessel_jn(np.float32([0.5, 7.5, 20.0]), v=1))
    assert np.isnan(got[:, 0]).all()
    close(got[:, 1:], np.array([[0.2663397, 0.16702464], [0.13524845, 0.06683309]], np.float32),
          1e-6, 1e-7)
    assert sp.bessel_jn(np.float32(3.0), v=2).shape == (3,)
    with pytest.raises(ValueError, match="bessel_jn.*complex"):
        sp.bessel_jn(1j, v=1)
    with pytest.raises(TypeError, match="bessel_jn"):
        sp.bessel_jn(1.0, v=1.5)


def test_bessel_jn_transforms():
    z = np.float32([5.0, 7.5, 12.0])
    fg.config.update("enable_x64", True)
    check_all(lambda x: sp.bessel_jn(x, v=2), (z.astype(np.float64),), order=2, batch=(),
              grad=(0,), jit=False)
    close(fg.grad(lambda x: sp.bessel_jn(x, v=1)[0])(7.5), -ss.jv(1, 7.5), 1e-10)
    fg.config.update("enable_x64", False)
    check_all(lambda x: sp.bessel_jn(x, v=2), (z,), rtol=1e-5, atol=1e-6)


def test_hyp1f1_against_scipy_and_edges():
    fg.config.update("enable_x64", True)
    a, b = R.uniform(0.1, 5, 40), R.uniform(0.1, 5, 40)
    x = np.concatenate([R.uniform(-8, 30, 36), [120.0, 150.0, 0.0, -1e-3]])
    close(sp.hyp1f1(a, b, x), ss.hyp1f1(a, b, x), 1e-9, 1e-300)
    # JAX's conventions: 1F1(0; b; x) = 1 (SciPy agrees), 1F1(0; 0; x) = 1 (SciPy: nan),
    # 1F1(a; a; x) = e^x, 1F1(a; 0; x) = inf
    close(sp.hyp1f1(np.array([0.0, 0.0, 2.5, 1.0]), np.array([3.0, 0.0, 2.5, 0.0]), 2.0),
          np.array([1.0, 1.0, np.exp(2.0), np.inf]), 1e-15)
    fg.config.update("enable_x64", False)
    close(sp.hyp1f1(np.float32(1.0), np.float32(2.0), np.float32(1.0)), np.e - 1, 1e-6)
    with pytest.raises(ValueError, match="hyp1f1.*complex"):
        sp.hyp1f1(1.0, 2.0, 1j)


def test_hyp1f1_derivatives_batching_jit():
    a, b, x = np.float32([0.5, 1.3, 2.0]), np.float32([1.5, 0.7, 3.2]), np.float32([0.3, -2.0,
                                                                                      4.0])
    check_all(sp.hyp1f1, (a, b, x), ss.hyp1f1(a, b, x), grad=(0, 1, 2), rtol=1e-5, atol=1e-5)
    fg.config.update("enable_x64", True)
    a64, b64, x64 = (t.astype(np.float64) for t in (a, b, x))
    h = 1e-6  # the a- and b-series against SciPy's finite differences
    ga = fg.grad(lambda t: sp.hyp1f1(t, b64[1], x64[1]))(a64[1])
    close(ga, (ss.hyp1f1(a64[1] + h, b64[1], x64[1]) - ss.hyp1f1(a64[1] - h, b64[1], x64[1]))
          / (2 * h), 1e-7)
    check_all(sp.hyp1f1, (a64, b64, x64), grad=(2,), order=2, batch=(), jit=False)
    fg.config.update("enable_x64", False)
