"""The wrapped Cauchy distribution on [0, 2 pi], as `jax.scipy.stats.wrapcauchy` (shape
0 < c < 1).

    >>> pdf(0.0, 0.5)  # (1 - c**2) / (2 pi (1 - c)**2)
    Array(0.47746485, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._util import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    """log(1 - c**2) - log(2 pi) - log(1 + c**2 - 2 c cos x) on [0, 2 pi] (NaN outside
    0 < c < 1)."""
    x, c = promote(x, c)
    out = (fnp.log(1 - c * c) - math.log(2 * math.pi)
           - fnp.log(1 + c * c - 2 * c * fnp.cos(x)))
    out = fnp.where((x >= 0) & (x <= 2 * math.pi), out, -fnp.inf)
    return fnp.where((c > 0) & (c < 1), out, fnp.nan)


def pdf(x, c):
    """The density."""
    return fnp.exp(logpdf(x, c))
