"""The beta distribution, as `jax.scipy.stats.beta`.

    >>> pdf(0.5, 2.0, 2.0)
    Array(1.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, a, b, loc=0, scale=1):
    """log of y**(a-1) (1-y)**(b-1) / B(a, b) at y = (x - loc) / scale, divided by scale."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    y = (x - loc) / scale
    val = (special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y) - special.betaln(a, b)
           - fnp.log(scale))
    return fnp.where((y < 0) | (y > 1), -fnp.inf, val)


def pdf(x, a, b, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    """P(X <= x) = betainc(a, b, (x - loc) / scale), clipped to the support."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return special.betainc(a, b, fnp.clip((x - loc) / scale, 0.0, 1.0))


def logcdf(x, a, b, loc=0, scale=1):
    """log P(X <= x)."""
    return fnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """P(X > x) = betainc(b, a, 1 - y) at y = (x - loc) / scale."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return special.betainc(b, a, 1.0 - fnp.clip((x - loc) / scale, 0.0, 1.0))


def logsf(x, a, b, loc=0, scale=1):
    """log P(X > x)."""
    return fnp.log(sf(x, a, b, loc, scale))
