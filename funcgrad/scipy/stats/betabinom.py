"""The beta-binomial distribution, as `jax.scipy.stats.betabinom`.

    >>> pmf(1.0, 2.0, 1.0, 1.0)  # uniform over {0, 1, 2}
    Array(0.33333334, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0):
    """-log(n + 1) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b) for
    y = floor(k) - loc (JAX's edges: NaN for n < 0, a <= 0 or b <= 0)."""
    k, n, a, b, loc = promote(k, n, a, b, loc)
    y = fnp.floor(k) - loc
    comb = -(fnp.log1p(n) + special.betaln(n - y + 1, y + 1))
    out = comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    out = fnp.where((y == 0) & (n == 0), 0.0, out)
    out = fnp.where((y < -loc) | (y > n) | (y + a <= 0), -fnp.inf, out)
    return fnp.where((n < 0) | (a <= 0) | (b <= 0), fnp.nan, out)


def pmf(k, n, a, b, loc=0):
    """P(K = k)."""
    return fnp.exp(logpmf(k, n, a, b, loc))
