"""The logistic distribution, as `jax.scipy.stats.logistic`.

    >>> cdf(0.0)
    Array(0.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """-z - 2 softplus(-z) - log(scale) at z = (x - loc) / scale (stable for any z)."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return -fnp.abs(z) - 2 * fnp.log1p(fnp.exp(-fnp.abs(z))) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """expit((x - loc) / scale)."""
    x, loc, scale = promote(x, loc, scale)
    return special.expit((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    """log expit((x - loc) / scale), finite far into the left tail."""
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    return fnp.minimum(z, 0.0) - fnp.log1p(fnp.exp(-fnp.abs(z)))


def sf(x, loc=0, scale=1):
    """P(X > x) = expit(-(x - loc) / scale)."""
    x, loc, scale = promote(x, loc, scale)
    return special.expit((loc - x) / scale)


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    x, loc, scale = promote(x, loc, scale)
    z = (loc - x) / scale
    return fnp.minimum(z, 0.0) - fnp.log1p(fnp.exp(-fnp.abs(z)))


def ppf(x, loc=0, scale=1):
    """loc + scale * logit(x): the quantile at probability `x` (JAX names it `x`)."""
    x, loc, scale = promote(x, loc, scale)
    return loc + scale * special.logit(x)


def isf(x, loc=0, scale=1):
    """loc - scale * logit(x): the inverse survival function at probability `x`."""
    x, loc, scale = promote(x, loc, scale)
    return loc - scale * special.logit(x)
