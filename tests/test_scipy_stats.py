"""funcgrad.scipy.stats against scipy.stats: every function on hypothesis-drawn shapes with
broadcast parameters, derivatives (check_grads, float64, orders 1-2), vmap against a loop, jit
against eager, and multivariate_normal (batched, through a Cholesky factor)."""

import numpy as np
import pytest
import scipy.stats as ss
from hypothesis import given
from hypothesis import strategies as st

import funcgrad as fg
import funcgrad.numpy as fnp
import funcgrad.scipy as jsp
from funcgrad.test_util import check_grads


def _pos(lo, hi):
    return lambda r, s: r.uniform(lo, hi, s)


def _normal(scale):
    return lambda r, s: r.normal(scale=scale, size=s)


def _ints(hi):
    return lambda r, s: r.integers(0, hi, s).astype(np.float64)


# (module, function) -> (scipy reference, samplers for the arguments)
CASES = {
    ("norm", "logpdf"): (ss.norm.logpdf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("norm", "pdf"): (ss.norm.pdf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("norm", "cdf"): (ss.norm.cdf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("norm", "logcdf"): (ss.norm.logcdf, [_normal(4), _normal(1), _pos(0.5, 2)]),
    ("norm", "sf"): (ss.norm.sf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("norm", "logsf"): (ss.norm.logsf, [_normal(4), _normal(1), _pos(0.5, 2)]),
    ("norm", "ppf"): (ss.norm.ppf, [_pos(0.05, 0.95), _normal(1), _pos(0.5, 2)]),
    ("norm", "isf"): (ss.norm.isf, [_pos(0.05, 0.95), _normal(1), _pos(0.5, 2)]),
    ("bernoulli", "logpmf"): (ss.bernoulli.logpmf, [_ints(2), _pos(0.1, 0.9)]),
    ("bernoulli", "pmf"): (ss.bernoulli.pmf, [_ints(2), _pos(0.1, 0.9)]),
    ("bernoulli", "cdf"): (ss.bernoulli.cdf, [_ints(2), _pos(0.1, 0.9)]),
    ("bernoulli", "ppf"): (ss.bernoulli.ppf, [_pos(0.01, 0.99), _pos(0.1, 0.9)]),
    ("poisson", "logpmf"): (ss.poisson.logpmf, [_ints(8), _pos(0.5, 5)]),
    ("poisson", "pmf"): (ss.poisson.pmf, [_ints(8), _pos(0.5, 5)]),
    ("gamma", "logpdf"): (ss.gamma.logpdf, [_pos(0.1, 5), _pos(0.5, 4), _normal(0.01),
                                            _pos(0.5, 2)]),
    ("gamma", "pdf"): (ss.gamma.pdf, [_pos(0.1, 5), _pos(0.5, 4)]),
    ("gamma", "cdf"): (ss.gamma.cdf, [_pos(0.1, 8), _pos(0.5, 4), _normal(0.01), _pos(0.5, 2)]),
    ("gamma", "logcdf"): (ss.gamma.logcdf, [_pos(0.1, 8), _pos(0.5, 4)]),
    ("gamma", "sf"): (ss.gamma.sf, [_pos(0.1, 8), _pos(0.5, 4)]),
    ("gamma", "logsf"): (ss.gamma.logsf, [_pos(0.1, 8), _pos(0.5, 4)]),
    ("poisson", "cdf"): (ss.poisson.cdf, [_ints(8), _pos(0.5, 5)]),
    ("beta", "logpdf"): (ss.beta.logpdf, [_pos(0.05, 0.95), _pos(0.5, 4), _pos(0.5, 4)]),
    ("beta", "pdf"): (ss.beta.pdf, [_pos(0.05, 0.95), _pos(0.5, 4), _pos(0.5, 4)]),
    ("beta", "cdf"): (ss.beta.cdf, [_pos(0.05, 0.95), _pos(0.5, 4), _pos(0.5, 4)]),
    ("beta", "logcdf"): (ss.beta.logcdf, [_pos(0.05, 0.95), _pos(0.5, 4), _pos(0.5, 4)]),
    ("beta", "sf"): (ss.beta.sf, [_pos(0.05, 0.95), _pos(0.5, 4), _pos(0.5, 4)]),
    ("beta", "logsf"): (ss.beta.logsf, [_pos(0.05, 0.95), _pos(0.5, 4), _pos(0.5, 4)]),
    ("t", "logpdf"): (ss.t.logpdf, [_normal(3), _pos(1, 10), _normal(1), _pos(0.5, 2)]),
    ("t", "pdf"): (ss.t.pdf, [_normal(3), _pos(1, 10)]),
    ("uniform", "logpdf"): (ss.uniform.logpdf, [_pos(0.05, 0.95)]),
    ("uniform", "pdf"): (ss.uniform.pdf, [_normal(1), _normal(0.1), _pos(0.5, 2)]),
    ("uniform", "cdf"): (ss.uniform.cdf, [_normal(1), _normal(0.1), _pos(0.5, 2)]),
    ("uniform", "ppf"): (ss.uniform.ppf, [_pos(0, 1), _normal(1), _pos(0.5, 2)]),
    ("laplace", "logpdf"): (ss.laplace.logpdf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("laplace", "pdf"): (ss.laplace.pdf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("laplace", "cdf"): (ss.laplace.cdf, [_normal(2), _normal(1), _pos(0.5, 2)]),
    ("logistic", "logpdf"): (ss.logistic.logpdf, [_normal(3), _normal(1), _pos(0.5, 2)]),
    ("logistic", "pdf"): (ss.logistic.pdf, [_normal(3), _normal(1), _pos(0.5, 2)]),
    ("logistic", "cdf"): (ss.logistic.cdf, [_normal(3), _normal(1), _pos(0.5, 2)]),
    ("logistic", "logcdf"): (ss.logistic.logcdf, [_normal(8), _normal(1), _pos(0.5, 2)]),
    ("logistic", "sf"): (ss.logistic.sf, [_normal(3), _normal(1), _pos(0.5, 2)]),
    ("logistic", "logsf"): (ss.logistic.logsf, [_normal(8), _normal(1), _pos(0.5, 2)]),
    ("logistic", "ppf"): (ss.logistic.ppf, [_pos(0.05, 0.95), _normal(1), _pos(0.5, 2)]),
    ("logistic", "isf"): (ss.logistic.isf, [_pos(0.05, 0.95), _normal(1), _pos(0.5, 2)]),
}
DISCRETE_FIRST_ARG = {"bernoulli", "poisson"}
IDS = [f"{m}.{f}" for m, f in CASES]


def _fn(key):
    return getattr(getattr(jsp.stats, key[0]), key[1])


def _args(key, rng, shape):
    # the first argument has `shape`; parameters broadcast from its trailing axis
    _, samplers = CASES[key]
    return [s(rng, shape if i == 0 else shape[-1:]) for i, s in enumerate(samplers)]


@pytest.mark.parametrize("key", list(CASES), ids=IDS)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
       seed=st.integers(0, 2 ** 16))
def test_matches_scipy(key, shape, seed):
    args = [a.astype(np.float32) for a in _args(key, np.random.default_rng(seed), shape)]
    got = _fn(key)(*args)
    want = CASES[key][0](*[a.astype(np.float64) for a in args])
    assert got.dtype == np.float32 and got.shape == np.shape(want)
    np.testing.assert_allclose(np.asarray(got), want, rtol=3e-5, atol=3e-6)


# Piecewise-constant ones have no derivative to check; the gamma/beta log/survival variants
# are thin wrappers of their cdf (gammainc/gammaincc/betainc are checked in test_scipy_special).
NO_DERIVATIVE_CHECK = {("bernoulli", "cdf"), ("bernoulli", "ppf"), ("uniform", "cdf"),
                       ("uniform", "ppf")} | {(m, f) for m in ("gamma", "beta")
                                              for f in ("logcdf", "sf", "logsf")}
FIRST_ORDER_ONLY = {("gamma", "cdf"), ("beta", "cdf"), ("poisson", "cdf")}  # 64-step loops


@pytest.mark.parametrize("key", [k for k in CASES if k not in NO_DERIVATIVE_CHECK], ids=str)
def test_derivatives(key):
    fg.config.update("enable_x64", True)
    order = 1 if key in FIRST_ORDER_ONLY else 2
    args = _args(key, np.random.default_rng(7), (3,))
    if key[0] in DISCRETE_FIRST_ARG:  # the count is not differentiable: hold it fixed
        k = args[0]
        check_grads(lambda *p: _fn(key)(k, *p), tuple(args[1:]), order=order, atol=1e-4,
                    rtol=1e-4)
    else:
        check_grads(_fn(key), tuple(args), order=order, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("key", [("norm", "logpdf"), ("t", "logpdf"), ("poisson", "logpmf"),
                                 ("logistic", "logcdf")], ids=str)
def test_vmap_matches_a_loop_and_jit_matches_eager(key):
    args = [a.astype(np.float32) for a in _args(key, np.random.default_rng(2), (5, 3))]
    args = [args[0]] + [np.broadcast_to(a, (5, 3)) for a in args[1:]]
    f = _fn(key)
    looped = np.stack([np.asarray(f(*[a[i] for a in args])) for i in range(5)])
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(*args)), looped, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(*args)), np.asarray(f(*args)), rtol=1e-6)


def _spd(rng, n, batch=()):
    a = rng.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_multivariate_normal_matches_scipy_batched_and_differentiable():
    rng = np.random.default_rng(0)
    cov, mean = _spd(rng, 3), rng.normal(size=3)
    x = rng.normal(size=(4, 3))
    got = jsp.stats.multivariate_normal.logpdf(x.astype(np.float32), mean, cov)
    np.testing.assert_allclose(np.asarray(got), ss.multivariate_normal.logpdf(x, mean, cov),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jsp.stats.multivariate_normal.pdf(x[0], mean, cov)),
                               ss.multivariate_normal.pdf(x[0], mean, cov), rtol=1e-5)
    covs = _spd(rng, 2, (3,))  # a batch of covariances broadcast against a batch of x
    xs = rng.normal(size=(3, 2))
    got = jsp.stats.multivariate_normal.logpdf(xs, np.zeros(2), covs)
    want = [ss.multivariate_normal.logpdf(xs[i], np.zeros(2), covs[i]) for i in range(3)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    fg.config.update("enable_x64", True)
    sym = lambda c: c @ c.T + 3.0 * fnp.eye(3)  # keep the covariance SPD under perturbation
    check_grads(lambda x, m, c: jsp.stats.multivariate_normal.logpdf(x, m, sym(c)),
                (x[0], mean, rng.normal(size=(3, 3))), order=2, atol=1e-4, rtol=1e-4)


def test_multivariate_normal_dimension_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match=r"multivariate_normal.logpdf.*\(3,\).*\(2, 2\)"):
        jsp.stats.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), np.eye(2))


def test_outside_the_support():
    assert float(jsp.stats.poisson.logpmf(-1.0, 2.0)) == -np.inf
    assert float(jsp.stats.poisson.logpmf(1.5, 2.0)) == -np.inf
    assert float(jsp.stats.gamma.logpdf(-1.0, 2.0)) == -np.inf
    assert float(jsp.stats.beta.logpdf(1.5, 2.0, 2.0)) == -np.inf
    assert float(jsp.stats.uniform.pdf(2.0)) == 0.0
    assert float(jsp.stats.bernoulli.pmf(2.0, 0.3)) == 0.0
