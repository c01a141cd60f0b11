"""Student's t distribution, as `jax.scipy.stats.t` (logpdf, pdf).

    >>> pdf(0.0, 1.0)  # Cauchy: 1 / pi
    Array(0.31830993, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    """log density with `df` degrees of freedom at (x - loc) / scale, divided by scale."""
    x, df, loc, scale = promote(x, df, loc, scale)
    y = (x - loc) / scale
    norm = (special.gammaln(0.5 * (df + 1)) - special.gammaln(0.5 * df)
            - 0.5 * fnp.log(df * math.pi) - fnp.log(scale))
    return norm - 0.5 * (df + 1) * fnp.log1p(y * y / df)


def pdf(x, df, loc=0, scale=1):
    """The density."""
    return fnp.exp(logpdf(x, df, loc, scale))
