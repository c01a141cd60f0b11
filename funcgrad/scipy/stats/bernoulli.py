"""The Bernoulli distribution, as `jax.scipy.stats.bernoulli`.

    >>> pmf(1, 0.25)
    Array(0.25, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k, p, loc=0):
    """log P(K = k): log p at 1, log(1 - p) at 0, -inf elsewhere."""
    k, p, loc = promote(k, p, loc)
    k = k - loc
    val = special.xlogy(k, p) + special.xlog1py(1 - k, -p)
    return fnp.where((k == 0) | (k == 1), val, -fnp.inf)


def pmf(k, p, loc=0):
    """P(K = k)."""
    return fnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    """P(K <= k)."""
    k, p = promote(k, p)
    return fnp.where(k < 0, 0.0, fnp.where(k < 1, 1 - p, 1.0))


def ppf(q, p):
    """The smallest k with cdf(k) >= q."""
    q, p = promote(q, p)
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), fnp.nan, fnp.where(q <= 1 - p, 0.0, 1.0))
