"""The normal distribution, as `jax.scipy.stats.norm`.

    >>> logpdf(0.0)
    Array(-0.9189385, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """log N(x; loc, scale**2)."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return -0.5 * z * z - 0.5 * math.log(2 * math.pi) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    """N(x; loc, scale**2)."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote(x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    """log P(X <= x), finite far into the left tail."""
    x, loc, scale = promote(x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x, loc=0, scale=1):
    """P(X > x) = cdf(-x) about loc."""
    x, loc, scale = promote(x, loc, scale)
    return special.ndtr((loc - x) / scale)


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    x, loc, scale = promote(x, loc, scale)
    return special.log_ndtr((loc - x) / scale)


def ppf(q, loc=0, scale=1):
    """The quantile function, the inverse of `cdf`."""
    q, loc, scale = promote(q, loc, scale)
    return loc + scale * special.ndtri(q)


def isf(q, loc=0, scale=1):
    """The inverse of `sf`."""
    q, loc, scale = promote(q, loc, scale)
    return loc - scale * special.ndtri(q)
