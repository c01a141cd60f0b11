"""The Pareto distribution, as `jax.scipy.stats.pareto` (shape `b`, support y >= 1 for
y = (x - loc) / scale).

    >>> cdf(2.0, 1.0)
    Array(0.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _y(x, b, loc, scale):
    x, b, loc, scale = promote(x, b, loc, scale)
    return (x - loc) / scale, b, scale


def logpdf(x, b, loc=0, scale=1):
    """log b - log scale - (b + 1) log y for y >= 1, else -inf."""
    y, b, scale = _y(x, b, loc, scale)
    safe = fnp.where(y >= 1, y, 1.0)
    return fnp.where(y >= 1, fnp.log(b) - fnp.log(scale) - (b + 1) * fnp.log(safe), -fnp.inf)


def pdf(x, b, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, b, loc, scale))


def logsf(x, b, loc=0, scale=1):
    """-b log y (0 below the support)."""
    y, b, _ = _y(x, b, loc, scale)
    return -b * fnp.log(fnp.maximum(y, 1.0))


def sf(x, b, loc=0, scale=1):
    """P(X > x) = y**-b."""
    return fnp.exp(logsf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    """P(X <= x) = 1 - y**-b."""
    return -fnp.expm1(logsf(x, b, loc, scale))


def logcdf(x, b, loc=0, scale=1):
    """log(1 - y**-b) (-inf below the support)."""
    return fnp.log(cdf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
    """The quantile loc + scale (1 - q)**(-1/b)."""
    q, b, loc, scale = promote(q, b, loc, scale)
    return loc + scale * fnp.exp(-fnp.log1p(-q) / b)
