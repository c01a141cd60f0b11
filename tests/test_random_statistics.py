"""The distributions of funcgrad.random's samplers, against SciPy: Kolmogorov-Smirnov tests for
the continuous ones, chi-square tests for the counts (fixed keys, so each test is
deterministic; at these sample sizes a wrong parameterization fails by orders of magnitude),
and the implicit reparameterization gradients of gamma, beta and dirichlet against the
derivative of SciPy's inverse CDF and against derivatives of known means."""

import numpy as np
import pytest
from scipy import special, stats

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import random as r

N = 3000
P_MIN = 1e-3  # the smallest p-value accepted


def _draw(sample, seed):
    return np.asarray(sample(r.PRNGKey(seed)), np.float64).ravel()


CONTINUOUS = {  # name: (sample(key) of N values, the SciPy distribution)
    "gamma_small": (lambda k: r.gamma(k, 0.2, (N,)), stats.gamma(0.2)),
    "gamma": (lambda k: r.gamma(k, 3.5, (N,)), stats.gamma(3.5)),
    "loggamma": (lambda k: r.loggamma(k, 0.05, (N,)), stats.loggamma(0.05)),
    "beta": (lambda k: r.beta(k, 0.5, 2.0, (N,)), stats.beta(0.5, 2.0)),
    "dirichlet_marginal": (lambda k: r.dirichlet(k, fnp.array([0.7, 2.0, 1.3]), (N,))[:, 0],
                           stats.beta(0.7, 3.3)),
    "chisquare": (lambda k: r.chisquare(k, 3.0, (N,)), stats.chi2(3.0)),
    "f": (lambda k: r.f(k, 4.0, 7.0, (N,)), stats.f(4.0, 7.0)),
    "t": (lambda k: r.t(k, 2.5, (N,)), stats.t(2.5)),
    "generalized_normal": (lambda k: r.generalized_normal(k, 0.8, (N,)), stats.gennorm(0.8)),
    "cauchy": (lambda k: r.cauchy(k, (N,)), stats.cauchy()),
    "laplace": (lambda k: r.laplace(k, (N,)), stats.laplace()),
    "logistic": (lambda k: r.logistic(k, (N,)), stats.logistic()),
    "maxwell": (lambda k: r.maxwell(k, (N,)), stats.maxwell()),
    "double_sided_maxwell": (lambda k: fnp.abs(r.double_sided_maxwell(k, 1.0, 2.0, (N,)) - 1)
                             / 2, stats.maxwell()),
    "lognormal": (lambda k: r.lognormal(k, 0.6, (N,)), stats.lognorm(0.6)),
    "pareto": (lambda k: r.pareto(k, 2.5, (N,)), stats.pareto(2.5)),
    "rayleigh": (lambda k: r.rayleigh(k, 1.7, (N,)), stats.rayleigh(scale=1.7)),
    "wald": (lambda k: r.wald(k, 1.5, (N,)), stats.invgauss(1.5)),
    "weibull_min": (lambda k: r.weibull_min(k, 2.0, 1.3, (N,)),
                    stats.weibull_min(1.3, scale=2.0)),
    "triangular": (lambda k: r.triangular(k, -1.0, 0.5, 3.0, (N,)),
                   stats.triang(0.375, loc=-1.0, scale=4.0)),
    "gumbel_high": (lambda k: r.gumbel(k, (N,), mode="high"), stats.gumbel_r()),
    "gumbel_highest": (lambda k: r.gumbel(k, (N,), mode="highest"), stats.gumbel_r()),
    "normal_complex_real": (lambda k: r.normal(k, (N,), fnp.complex64).real * np.sqrt(2),
                            stats.norm()),
    "ball_radius": (lambda k: fnp.linalg.norm(r.ball(k, 3, shape=(N,)), axis=-1) ** 3,
                    stats.uniform()),
    "ball_p1_radius": (lambda k: fnp.abs(r.ball(k, 2, 1.0, (N,))).sum(-1) ** 2,
                       stats.uniform()),
    "orthogonal_entry": (lambda k: r.orthogonal(k, 3, (N,))[:, 1, 2],
                         stats.uniform(-1, 2)),  # Haar on O(3): an entry is uniform
    "mvn_mahalanobis": (lambda k: _mahalanobis(r.multivariate_normal(
        k, fnp.array([1.0, -2.0, 0.5]), fnp.asarray(COV), (N,), method="eigh")),
        stats.chi2(3)),
}
COV = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.7]])


def _mahalanobis(x):
    d = np.asarray(x, np.float64) - np.array([1.0, -2.0, 0.5])
    return np.einsum("ni,ij,nj->n", d, np.linalg.inv(COV), d)


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_distribution(name):
    sample, dist = CONTINUOUS[name]
    x = _draw(sample, 1)
    assert np.isfinite(x).all()
    assert stats.kstest(x, dist.cdf).pvalue > P_MIN


def _chi2(counts, pmf, n):
    """Chi-square p-value of integer samples against `pmf` over bins with >= 5 expected."""
    values = np.arange(counts.max() + 1)
    expected = pmf(values) * n
    keep = expected >= 5
    obs = np.bincount(counts, minlength=len(values))
    obs_bins, exp_bins = obs[keep], expected[keep]
    if n - exp_bins.sum() > 1e-6 * n:  # the rest of the support, as one bin
        obs_bins = np.append(obs_bins, n - obs_bins.sum())
        exp_bins = np.append(exp_bins, n - exp_bins.sum())
    return stats.chisquare(obs_bins, exp_bins * obs_bins.sum() / exp_bins.sum()).pvalue


DISCRETE = {
    "poisson_knuth": (lambda k: r.poisson(k, 3.5, (N,)), stats.poisson(3.5).pmf),
    "poisson_rejection": (lambda k: r.poisson(k, 42.0, (N,)), stats.poisson(42.0).pmf),
    "binomial_inversion": (lambda k: r.binomial(k, 20.0, 0.3, (N,)), stats.binom(20, 0.3).pmf),
    "binomial_btrs": (lambda k: r.binomial(k, 300.0, 0.4, (N,)), stats.binom(300, 0.4).pmf),
    "binomial_high_p": (lambda k: r.binomial(k, 60.0, 0.85, (N,)), stats.binom(60, 0.85).pmf),
    "geometric": (lambda k: r.geometric(k, 0.2, (N,)) - 1, stats.geom(0.2, loc=-1).pmf),
    "multinomial_marginal": (lambda k: r.multinomial(k, 30.0, fnp.array([0.2, 0.5, 0.3]),
                                                     shape=(N, 3))[:, 1],
                             stats.binom(30, 0.5).pmf),
    "rademacher": (lambda k: (r.rademacher(k, (N,)) + 1) // 2, stats.bernoulli(0.5).pmf),
    "bernoulli_high": (lambda k: r.bernoulli(k, 0.3, (N,), mode="high").astype(int),
                       stats.bernoulli(0.3).pmf),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_distribution(name):
    sample, pmf = DISCRETE[name]
    x = np.asarray(sample(r.PRNGKey(2))).ravel()
    assert (x >= 0).all() and np.array_equal(x, np.round(x))
    assert _chi2(x.astype(np.int64), pmf, len(x)) > P_MIN


def test_multinomial_counts_add_up_and_binomial_edge_cases():
    counts = np.asarray(r.multinomial(r.PRNGKey(3), fnp.array([7.0, 50.0]),
                                      fnp.array([0.1, 0.6, 0.3]), shape=(2, 3)))
    np.testing.assert_array_equal(counts.sum(-1), [7, 50])
    b = np.asarray(r.binomial(r.PRNGKey(4), fnp.array([0.0, 10.0, -1.0, np.inf, 10.0]),
                              fnp.array([0.5, 1.0, 0.5, 0.5, np.nan])))
    assert b[0] == 0 and b[1] == 10 and np.isnan(b[2]) and b[3] == np.inf and np.isnan(b[4])
    p = np.asarray(r.poisson(r.PRNGKey(5), fnp.array([0.0, 0.0])))
    np.testing.assert_array_equal(p, [0, 0])


def test_sampling_without_replacement_draws_distinct_classes():
    logits = fnp.log(fnp.array([0.05, 0.1, 0.15, 0.2, 0.5]))
    draws = np.asarray(fg.vmap(lambda k: r.categorical(k, logits, shape=(3,), replace=False))(
        r.split(r.PRNGKey(6), 2000)))
    assert all(len(set(row)) == 3 for row in draws.tolist())
    # the first draw of Gumbel-top-k is a categorical draw
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=5) / 2000,
                               [0.05, 0.1, 0.15, 0.2, 0.5], atol=0.03)


# --- implicit reparameterization gradients -------------------------------------------------------
def _inverse_cdf_derivative(a, x, h=1e-6):
    """d x / d a at a fixed CDF value u = P(a, x): the central difference of SciPy's
    gammaincinv(a, u) in a, computed in float64."""
    u = special.gammainc(a, x)
    return (special.gammaincinv(a + h, u) - special.gammaincinv(a - h, u)) / (2 * h)


@pytest.mark.parametrize("a", [0.3, 1.0, 2.7, 25.0])
def test_gamma_gradient_is_the_inverse_cdf_derivative(a):
    fg.config.update("enable_x64", True)
    key = r.PRNGKey(7)
    alphas = fnp.full((8,), a, dtype=fnp.float64)
    x = np.asarray(r.gamma(key, alphas))
    g = np.asarray(fg.grad(lambda al: r.gamma(key, al).sum())(alphas))
    np.testing.assert_allclose(g, _inverse_cdf_derivative(a, x), rtol=2e-5)
    # loggamma: d log x / d a = (d x / d a) / x
    g_log = np.asarray(fg.grad(lambda al: r.loggamma(key, al).sum())(alphas))
    np.testing.assert_allclose(g_log, _inverse_cdf_derivative(a, x) / x, rtol=2e-5)


def _mean_gradient(sample, x0, seed, n=4000):
    """The Monte Carlo mean of pathwise gradients of `sample(param, key)` (one sample per
    row of `param`) over `n` samples, and its standard error."""
    params = fnp.asarray(np.broadcast_to(x0, (n,) + np.shape(x0)))
    grads = np.asarray(fg.grad(lambda p: sample(p, r.PRNGKey(seed)).sum())(params), np.float64)
    return grads.mean(0), grads.std(0) / np.sqrt(n)


def test_gradients_of_means_beta_gamma_f_dirichlet():
    fg.config.update("enable_x64", True)
    a, b = 2.0, 3.0
    cases = [  # (loss(param, key), param, d/dparam of the mean, exactly)
        (lambda p, k: r.beta(k, p, b), a, b / (a + b) ** 2),  # log-space gammas
        (lambda p, k: r.gamma(k, p), 0.4, 1.0),
        (lambda p, k: r.f(k, 3.0, p), 7.0, -2 / (7.0 - 2) ** 2),  # E F = d2 / (d2 - 2)
    ]
    for i, (loss, p, want) in enumerate(cases):
        mean, se = _mean_gradient(loss, p, 10 + i)
        assert abs(mean - want) < 5 * se + 1e-3, (i, mean, want, se)
    alpha = np.array([0.5, 1.5, 3.0])
    total = alpha.sum()
    mean, se = _mean_gradient(lambda al, k: r.dirichlet(k, al)[:, 0], alpha, 20)
    want = (np.eye(3)[0] * total - alpha[0]) / total ** 2  # d E[x_0] / d alpha_j
    assert (np.abs(mean - want) < 5 * se + 1e-3).all(), (mean, want, se)


def test_gradients_under_jit_and_vmap_and_in_float32():
    key = r.PRNGKey(8)
    a = fnp.array([0.5, 2.0, 9.0])
    loss = lambda al: r.dirichlet(key, al)[1] + r.beta(key, al, 1.0).sum()  # noqa: E731
    g = np.asarray(fg.grad(loss)(a))
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(loss))(a)), g, rtol=1e-5)
    assert np.isfinite(g).all() and g.dtype == np.float32
    grad = fg.grad(lambda al, k: r.gamma(k, al).sum())
    per_key = fg.vmap(grad, (None, 0))(a, r.split(key, 3))
    loop = [np.asarray(grad(a, k)) for k in r.split(key, 3)]
    np.testing.assert_allclose(np.asarray(per_key), np.stack(loop), rtol=1e-5)
