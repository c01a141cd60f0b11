"""The Laplace distribution, as `jax.scipy.stats.laplace`.

    >>> pdf(0.0)
    Array(0.5, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, loc=0, scale=1):
    """-|x - loc| / scale - log(2 scale)."""
    x, loc, scale = promote(x, loc, scale)
    return -fnp.abs(x - loc) / scale - math.log(2) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return 0.5 - 0.5 * fnp.sign(z) * fnp.expm1(-fnp.abs(z))
