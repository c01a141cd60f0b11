"""The chi-squared distribution, as `jax.scipy.stats.chi2` (a gamma distribution with shape
df / 2 and scale 2).

    >>> cdf(2.0, 2.0)  # 1 - exp(-1)
    Array(0.63212043, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, df, loc=0, scale=1):
    """(df/2 - 1) log y - y/2 - (df/2) log 2 - gammaln(df/2) - log scale, y > 0."""
    x, df, loc, scale = promote(x, df, loc, scale)
    y = (x - loc) / scale
    k = df / 2
    safe = fnp.where(y > 0, y, 1.0)
    out = special.xlogy(k - 1, safe) - safe / 2 - k * math.log(2) - special.gammaln(k)
    return fnp.where(y > 0, out - fnp.log(scale), -fnp.inf)


def pdf(x, df, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    """P(X <= x) = gammainc(df / 2, y / 2)."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return special.gammainc(df / 2, fnp.maximum((x - loc) / scale, 0.0) / 2)


def logcdf(x, df, loc=0, scale=1):
    """log P(X <= x)."""
    return fnp.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    """P(X > x) = gammaincc(df / 2, y / 2)."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return special.gammaincc(df / 2, fnp.maximum((x - loc) / scale, 0.0) / 2)


def logsf(x, df, loc=0, scale=1):
    """log P(X > x)."""
    return fnp.log(sf(x, df, loc, scale))
