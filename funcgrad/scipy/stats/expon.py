"""The exponential distribution, as `jax.scipy.stats.expon`.

    >>> cdf(1.0)  # 1 - exp(-1)
    Array(0.63212055, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.nn.functions import log1mexp
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """-y - log scale for y = (x - loc) / scale >= 0, else -inf."""
    x, loc, scale = promote(x, loc, scale)
    y = (x - loc) / scale
    return fnp.where(y >= 0, -y - fnp.log(scale), -fnp.inf)


def pdf(x, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x) = 1 - exp(-y)."""
    x, loc, scale = promote(x, loc, scale)
    return -fnp.expm1(-fnp.maximum((x - loc) / scale, 0.0))


def logcdf(x, loc=0, scale=1):
    """log(1 - exp(-y)), accurate near 0 and far out (-inf below loc)."""
    x, loc, scale = promote(x, loc, scale)
    y = (x - loc) / scale
    return fnp.where(y > 0, log1mexp(fnp.where(y > 0, y, 1.0)), -fnp.inf)


def sf(x, loc=0, scale=1):
    """P(X > x) = exp(-y)."""
    return fnp.exp(logsf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """-y (0 below loc)."""
    x, loc, scale = promote(x, loc, scale)
    return -fnp.maximum((x - loc) / scale, 0.0)


def ppf(q, loc=0, scale=1):
    """The quantile loc - scale log(1 - q)."""
    q, loc, scale = promote(q, loc, scale)
    return loc - scale * fnp.log1p(-q)
