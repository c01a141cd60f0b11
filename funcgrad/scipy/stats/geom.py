"""The geometric distribution (trials until the first success), as
`jax.scipy.stats.geom`.

    >>> pmf(2.0, 0.5)
    Array(0.25, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0):
    """(k - 1) log(1 - p) + log p for k - loc >= 1, else -inf."""
    k, p, loc = promote(k, p, loc)
    x = k - loc
    return fnp.where(x <= 0, -fnp.inf, special.xlog1py(x - 1, -p) + fnp.log(p))


def pmf(k, p, loc=0):
    """P(K = k)."""
    return fnp.exp(logpmf(k, p, loc))
