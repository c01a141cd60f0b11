"""The Poisson distribution, as `jax.scipy.stats.poisson`.

    >>> pmf(0, 1.0)  # exp(-1)
    Array(0.36787942, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logpmf", "pmf"]


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
