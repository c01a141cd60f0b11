"""The truncated normal distribution, as `jax.scipy.stats.truncnorm` (a standard normal
cut to [a, b], then shifted by `loc` and scaled by `scale`).

The mass of [a, b] is computed in logs from the side of the tail it lies in, so far tails
stay finite. Imports funcgrad.numpy and scipy.special.

    >>> pdf(0.0, -1.0, 1.0).round(4)
    Array(0.5844, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_diff(la, lb):
    """log(exp(la) - exp(lb)) for la >= lb."""
    return la + fnp.log1p(-fnp.exp(lb - la))


def _log_mass(a, b):
    """log(Phi(b) - Phi(a)), from the upper tail when a > 0."""
    upper = a > 0
    lo = _log_diff(special.log_ndtr(fnp.where(upper, -a, b)),
                   special.log_ndtr(fnp.where(upper, -b, a)))
    return lo


def _args(x, a, b, loc, scale):
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return (x - loc) / scale, a, b, scale


def logpdf(x, a, b, loc=0, scale=1):
    """The standard normal's log density minus log of the mass of [a, b], on [a, b]."""
    z, a, b, scale = _args(x, a, b, loc, scale)
    out = -0.5 * z * z - 0.5 * math.log(2 * math.pi) - _log_mass(a, b) - fnp.log(scale)
    return fnp.where((z >= a) & (z <= b), out, -fnp.inf)


def pdf(x, a, b, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    """log P(X <= x)."""
    z, a, b, _ = _args(x, a, b, loc, scale)
    zc = fnp.clip(z, a, b)
    upper = a > 0  # mass of [a, z] over mass of [a, b], each from the better tail
    num = _log_diff(special.log_ndtr(fnp.where(upper, -a, zc)),
                    special.log_ndtr(fnp.where(upper, -zc, a)))
    out = num - _log_mass(a, b)
    return fnp.where(z <= a, -fnp.inf, fnp.where(z >= b, 0.0, out))


def cdf(x, a, b, loc=0, scale=1):
    """P(X <= x)."""
    return fnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    """log P(X > x) (the mirror image's cdf)."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
    """P(X > x)."""
    return fnp.exp(logsf(x, a, b, loc, scale))
