"""The binomial distribution, as `jax.scipy.stats.binom`.

    >>> pmf(1.0, 2.0, 0.5)
    Array(0.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """log C(n, y) + y log p + (n - y) log(1 - p) for y = k - loc in [0, n] (JAX's edges:
    0 for y = n = 0 and for a zero linear term)."""
    k, n, p, loc = promote(k, n, p, loc)
    y = k - loc
    comb = special.gammaln(n + 1) - (special.gammaln(y + 1) + special.gammaln(n - y + 1))
    linear = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    out = fnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, comb + linear)
    return fnp.where((k >= loc) & (k < loc + n + 1), out, -fnp.inf)


def pmf(k, n, p, loc=0):
    """P(K = k)."""
    return fnp.exp(logpmf(k, n, p, loc))
