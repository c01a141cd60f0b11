"""The uniform distribution on [loc, loc + scale], as `jax.scipy.stats.uniform`.

    >>> pdf(0.5)
    Array(1., dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """-log(scale) inside [loc, loc + scale], -inf outside."""
    x, loc, scale = promote(x, loc, scale)
    inside = (x >= loc) & (x <= loc + scale)
    return fnp.where(inside, -fnp.log(scale), -fnp.inf)


def pdf(x, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x), clipped to [0, 1]."""
    x, loc, scale = promote(x, loc, scale)
    return fnp.clip((x - loc) / scale, 0.0, 1.0)


def ppf(q, loc=0, scale=1):
    """loc + q * scale for q in [0, 1], NaN outside."""
    q, loc, scale = promote(q, loc, scale)
    return fnp.where((q >= 0) & (q <= 1), loc + q * scale, fnp.nan)
