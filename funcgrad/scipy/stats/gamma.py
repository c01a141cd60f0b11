"""The gamma distribution, as `jax.scipy.stats.gamma`.

    >>> pdf(1.0, 1.0)  # exp(-1)
    Array(0.36787942, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, a, loc=0, scale=1):
    """log of x**(a-1) exp(-x) / Gamma(a) at (x - loc) / scale, divided by scale."""
    x, a, loc, scale = promote(x, a, loc, scale)
    y = (x - loc) / scale
    val = special.xlogy(a - 1, y) - y - special.gammaln(a) - fnp.log(scale)
    return fnp.where(y < 0, -fnp.inf, val)


def pdf(x, a, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    """P(X <= x) = gammainc(a, (x - loc) / scale), 0 below loc."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return special.gammainc(a, fnp.maximum((x - loc) / scale, 0.0))


def logcdf(x, a, loc=0, scale=1):
    """log P(X <= x)."""
    return fnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    """P(X > x) = gammaincc(a, (x - loc) / scale)."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return special.gammaincc(a, fnp.maximum((x - loc) / scale, 0.0))


def logsf(x, a, loc=0, scale=1):
    """log P(X > x)."""
    return fnp.log(sf(x, a, loc, scale))
