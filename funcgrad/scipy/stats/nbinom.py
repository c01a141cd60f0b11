"""The negative binomial distribution (failures before `n` successes), as
`jax.scipy.stats.nbinom`.

    >>> pmf(0.0, 1.0, 0.5)
    Array(0.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """gammaln(y + n) - gammaln(n) - gammaln(y + 1) + n log p + y log(1 - p), y = k - loc."""
    k, n, p, loc = promote(k, n, p, loc)
    y = k - loc
    comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + 1)
    out = comb + special.xlogy(n, p) + special.xlogy(y, 1 - p)
    return fnp.where(k < loc, -fnp.inf, out)


def pmf(k, n, p, loc=0):
    """P(K = k)."""
    return fnp.exp(logpmf(k, n, p, loc))
