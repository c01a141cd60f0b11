"""funcgrad.scipy.stats's long tail (issue 28): the 16 new distributions, poisson.entropy,
gaussian_kde, mode, rankdata and sem, against SciPy in float64, with derivatives
(check_grads), vmap against a loop and jit against eager."""

import numpy as np
import pytest
import scipy.stats as ss
from transform_checks import check_all, close

import funcgrad as fg
import funcgrad.scipy.stats as fs

R = np.random.default_rng(21)
X = R.normal(size=12) * 2
Q = R.uniform(0.02, 0.98, 12)
POS = np.abs(X) + 0.1
METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")

# distribution -> (arguments after x, the x values)
CONTINUOUS = {
    "cauchy": ((0.3, 1.7), X), "gumbel_l": ((0.3, 1.7), X), "gumbel_r": ((0.3, 1.7), X),
    "expon": ((0.3, 1.7), X), "chi2": ((3.5, 0.05, 1.3), POS),
    "pareto": ((2.5, 0.1, 1.2), POS + 1.2),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_against_scipy(name):
    fg.config.update("enable_x64", True)
    params, x = CONTINUOUS[name]
    for method in METHODS:
        close(getattr(getattr(fs, name), method)(x, *params),
              getattr(getattr(ss, name), method)(x, *params), 1e-7, 1e-12)
    if hasattr(getattr(fs, name), "ppf"):
        close(getattr(fs, name).ppf(Q, *params), getattr(ss, name).ppf(Q, *params), 1e-7)


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_transforms(name):
    params, x = CONTINUOUS[name]
    x = x[:6].astype(np.float32)
    args = (x,) + tuple(np.float32(p) for p in params)
    check_all(getattr(fs, name).logpdf, args, grad=tuple(range(len(args))), rtol=1e-4,
              grad_tol=2e-4)
    check_all(getattr(fs, name).cdf, args, grad=(0, 1), rtol=1e-4, grad_tol=2e-4)


def test_cauchy_isf_gennorm_vonmises_wrapcauchy():
    fg.config.update("enable_x64", True)
    close(fs.cauchy.isf(Q, 0.3, 1.7), ss.cauchy.isf(Q, 0.3, 1.7), 1e-7)
    for method in ("logpdf", "pdf", "cdf"):
        close(getattr(fs.gennorm, method)(X, 1.7), getattr(ss.gennorm, method)(X, 1.7), 1e-7)
    close(fs.vonmises.logpdf(X, 2.5), ss.vonmises.logpdf(X, 2.5), 1e-7)
    w = R.uniform(0, 6.28, 10)
    close(fs.wrapcauchy.logpdf(w, 0.6), ss.wrapcauchy.logpdf(w, 0.6), 1e-7)
    assert np.isnan(float(fs.wrapcauchy.logpdf(1.0, 1.5)))
    fg.config.update("enable_x64", False)
    check_all(fs.vonmises.logpdf, (X[:5].astype(np.float32), np.float32(2.5)), grad=(0, 1))


@pytest.mark.parametrize("bounds", [(-1.0, 2.0), (0.5, 3.0), (-8.0, -6.5), (5.0, 9.0)])
def test_truncnorm_against_scipy_in_far_tails_too(bounds):
    fg.config.update("enable_x64", True)
    a, b = bounds
    x = np.linspace(a - 0.5, b + 0.5, 9) * 1.3 + 0.2
    for method in METHODS:
        close(getattr(fs.truncnorm, method)(x, a, b, 0.2, 1.3),
              getattr(ss.truncnorm, method)(x, a, b, 0.2, 1.3), 1e-7, 1e-12)
    fg.config.update("enable_x64", False)
    inside = np.linspace(a + 0.1, b - 0.1, 4).astype(np.float32)
    check_all(lambda x, lo, hi: fs.truncnorm.logpdf(x, lo, hi), (inside, np.float32(a),
                                                                 np.float32(b)),
              grad=(0, 1, 2), rtol=1e-4, grad_tol=2e-4)


def test_discrete_against_scipy():
    fg.config.update("enable_x64", True)
    k = np.arange(-1, 8.0)
    close(fs.geom.logpmf(k, 0.3), ss.geom.logpmf(k, 0.3), 1e-7)
    close(fs.binom.logpmf(k, 6, 0.3), ss.binom.logpmf(k, 6, 0.3), 1e-7)
    close(fs.nbinom.logpmf(k[1:], 3.5, 0.4), ss.nbinom.logpmf(k[1:], 3.5, 0.4), 1e-7)
    close(fs.betabinom.logpmf(k, 6, 2.5, 1.5), ss.betabinom.logpmf(k, 6, 2.5, 1.5), 1e-7)
    close(fs.betabinom.pmf(k, 6, 2.5, 1.5), ss.betabinom.pmf(k, 6, 2.5, 1.5), 1e-7)
    x, p = np.array([1, 2, 3]), np.array([0.2, 0.3, 0.5])
    close(fs.multinomial.logpmf(x, 6, p), ss.multinomial.logpmf(x, 6, p), 1e-7)
    assert float(fs.multinomial.pmf(x, 5, p)) == 0.0
    d = np.array([0.2, 0.3, 0.5])
    close(fs.dirichlet.logpdf(d, np.array([1.5, 2.0, 3.0])), ss.dirichlet.logpdf(d, [1.5, 2, 3]),
          1e-7)
    close(fs.dirichlet.logpdf(d[:2], np.array([1.5, 2.0, 3.0])),
          ss.dirichlet.logpdf(d, [1.5, 2, 3]), 1e-7)
    mu = np.array([0.0, 0.5, 3.0, 30.0, 99.0, 150.0, 2000.0])
    close(fs.poisson.entropy(mu), ss.poisson.entropy(mu), 1e-7)


def test_discrete_transforms():
    k = np.arange(0, 6.0).astype(np.float32)
    check_all(lambda p: fs.binom.logpmf(k, 6.0, p), (np.float32(0.3),), grad=(0,), batch=())
    check_all(lambda n, p: fs.nbinom.logpmf(k, n, p), (np.float32(3.5), np.float32(0.4)),
              grad=(0, 1), batch=())
    check_all(lambda a, b: fs.betabinom.logpmf(k, 6.0, a, b), (np.float32(2.5),
                                                               np.float32(1.5)),
              grad=(0, 1), batch=())
    check_all(lambda x, a: fs.dirichlet.logpdf(x, a),
              (np.array([[0.2, 0.5], [0.3, 0.1]], np.float32), np.float32([1.5, 2.0, 3.0])),
              grad=(0, 1), batch=())


def test_mode_rankdata_sem():
    fg.config.update("enable_x64", True)
    a = R.integers(0, 4, (3, 7))
    got, want = fs.mode(a, axis=1), ss.mode(a, axis=1)
    close((got.mode, got.count), (want.mode, want.count))
    assert fs.mode(a, axis=None, keepdims=True).mode.shape == (1, 1)
    v = np.array([3.0, 1, 4, 1, 5, 9, 2, 6, 5])
    for method in ("average", "min", "max", "dense", "ordinal"):
        close(fs.rankdata(v, method), ss.rankdata(v, method))
    close(fs.rankdata(a, axis=1), ss.rankdata(a, axis=1))
    assert np.isnan(np.asarray(fs.rankdata(np.array([1.0, np.nan])))).all()
    x = X.reshape(3, 4)
    close(fs.sem(x, axis=1), ss.sem(x, axis=1), 1e-7)
    close(fs.sem(x, axis=None), ss.sem(x, axis=None), 1e-7)
    fg.config.update("enable_x64", False)
    check_all(lambda x: fs.sem(x, axis=1), (x.astype(np.float32),), grad=(0,))
    check_all(lambda a: fs.rankdata(a), (v.astype(np.float32),), batch=(0,))


def test_gaussian_kde_against_scipy_and_under_jit():
    fg.config.update("enable_x64", True)
    d = R.normal(size=(2, 30))
    pts = R.normal(size=(2, 5))
    ours, theirs = fs.gaussian_kde(d), ss.gaussian_kde(d)
    close(ours(pts), theirs(pts), 1e-7)
    close(ours.logpdf(pts), theirs.logpdf(pts), 1e-7)
    w = np.arange(1.0, 31)
    k1 = fs.gaussian_kde(d[0], bw_method="silverman", weights=w)
    k2 = ss.gaussian_kde(d[0], bw_method="silverman", weights=w)
    close(k1(pts[0]), k2(pts[0]), 1e-7)
    close(k1.integrate_box_1d(-0.5, 1.0), k2.integrate_box_1d(-0.5, 1.0), 1e-7)
    close(k1.integrate_gaussian(np.array([0.3]), np.array([[0.5]])),
          k2.integrate_gaussian([0.3], [[0.5]]), 1e-7)
    close(k1.integrate_kde(fs.gaussian_kde(d[1])), k2.integrate_kde(ss.gaussian_kde(d[1])), 1e-7)
    close(fs.gaussian_kde(d, bw_method=0.5)(pts), ss.gaussian_kde(d, bw_method=0.5)(pts), 1e-7)
    close(fg.jit(lambda k, p: k(p))(ours, pts), ours(pts), 1e-12)
    s = np.asarray(ours.resample(fg.random.PRNGKey(0), (500,)))
    assert s.shape == (2, 500) and abs(s.mean() - d.mean()) < 0.3
    fg.config.update("enable_x64", False)
    check_all(lambda d, p: fs.gaussian_kde(d)(p), (d[:, :8].astype(np.float32),
                                                 pts.astype(np.float32)), grad=(0, 1),
              batch=(1,), rtol=1e-4)
