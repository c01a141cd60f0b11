"""The Poisson distribution, as `jax.scipy.stats.poisson`.

    >>> pmf(0, 1.0)  # exp(-1)
    Array(0.36787942, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


def logpmf(k, mu, loc=0):
    """log P(K = k) = k log mu - mu - log k! (-inf off the non-negative integers)."""
    k, mu, loc = promote(k, mu, loc)
    k = k - loc
    val = special.xlogy(k, mu) - mu - special.gammaln(k + 1)
    return fnp.where((k < 0) | (k != fnp.round(k)), -fnp.inf, val)


def pmf(k, mu, loc=0):
    """P(K = k)."""
    return fnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(K <= k) = gammaincc(floor(k) + 1, mu), 0 for k < 0."""
    k, mu, loc = promote(k, mu, loc)
    k = fnp.floor(k - loc)
    return fnp.where(k < 0, 0.0, special.gammaincc(fnp.maximum(k, 0.0) + 1, mu))


def entropy(mu, loc=0):
    """The entropy of the distribution: -sum_k p(k) log p(k), summed over the k that carry
    mass (k < mu + 20 sqrt(mu) + 40, at most 400 terms) below mu = 100, and the asymptotic
    series 0.5 log(2 pi e mu) - 1/(12 mu) - 1/(24 mu**2) - 19/(360 mu**3) above.

    Example:
        >>> entropy(1.0).round(4)
        Array(1.3048, dtype=float32)
    """
    mu, loc = promote(mu, loc)
    small = mu < 100
    m = fnp.where(small, mu, 1.0)
    k = fnp.arange(400, dtype=m.dtype).reshape((400,) + (1,) * m.ndim)
    lp = special.xlogy(k, m) - m - special.gammaln(k + 1)
    terms = fnp.where(k < m + 20 * fnp.sqrt(m) + 40, -fnp.exp(lp) * lp, 0.0)
    summed = fnp.sum(terms, axis=0)
    b = fnp.where(small, 100.0, mu)
    asym = (0.5 * fnp.log(2 * fnp.pi * fnp.e * b) - 1 / (12 * b) - 1 / (24 * b ** 2)
            - 19 / (360 * b ** 3))
    return fnp.where(mu == 0, 0.0, fnp.where(small, summed, asym)).astype(mu.dtype)
