"""The Cauchy distribution, as `jax.scipy.stats.cauchy`.

    >>> pdf(0.0)
    Array(0.31830993, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """-log(pi scale) - log1p(z**2), z = (x - loc) / scale."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return -math.log(math.pi) - fnp.log(scale) - fnp.log1p(z * z)


def pdf(x, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """1/2 + arctan(z) / pi."""
    x, loc, scale = promote(x, loc, scale)
    return 0.5 + fnp.arctan((x - loc) / scale) / math.pi


def logcdf(x, loc=0, scale=1):
    """log P(X <= x)."""
    return fnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """P(X > x) = 1/2 - arctan(z) / pi."""
    x, loc, scale = promote(x, loc, scale)
    return 0.5 - fnp.arctan((x - loc) / scale) / math.pi


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    return fnp.log(sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    """The quantile loc + scale tan(pi (q - 1/2))."""
    q, loc, scale = promote(q, loc, scale)
    return loc + scale * fnp.tan(math.pi * (q - 0.5))


def isf(q, loc=0, scale=1):
    """The inverse of `sf`."""
    q, loc, scale = promote(q, loc, scale)
    return loc + scale * fnp.tan(math.pi * (0.5 - q))
