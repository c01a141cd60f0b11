"""The right-skewed Gumbel distribution, as `jax.scipy.stats.gumbel_r`.

    >>> cdf(0.0)  # exp(-1)
    Array(0.36787942, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.nn.functions import log1mexp
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(x, loc, scale):
    x, loc, scale = promote(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0, scale=1):
    """-z - exp(-z) - log scale."""
    z, scale = _z(x, loc, scale)
    return -z - fnp.exp(-z) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """-exp(-z)."""
    z, _ = _z(x, loc, scale)
    return -fnp.exp(-z)


def cdf(x, loc=0, scale=1):
    """exp(-exp(-z))."""
    return fnp.exp(logcdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """log(1 - exp(-exp(-z)))."""
    z, _ = _z(x, loc, scale)
    return log1mexp(fnp.exp(-z))


def sf(x, loc=0, scale=1):
    """P(X > x) = -expm1(-exp(-z))."""
    z, _ = _z(x, loc, scale)
    return -fnp.expm1(-fnp.exp(-z))


def ppf(p, loc=0, scale=1):
    """The quantile loc - scale log(-log p)."""
    p, loc, scale = promote(p, loc, scale)
    return loc - scale * fnp.log(-fnp.log(p))
