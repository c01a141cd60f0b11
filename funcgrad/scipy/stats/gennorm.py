"""The generalized normal distribution, as `jax.scipy.stats.gennorm` (shape `beta`; no loc
or scale, as JAX's).

    >>> pdf(0.0, 2.0)  # a normal with variance 1/2
    Array(0.5641896, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, beta):
    """log(beta / 2) - gammaln(1 / beta) - |x|**beta."""
    x, beta = promote(x, beta)
    return fnp.log(beta) - math.log(2) - special.gammaln(1 / beta) - fnp.abs(x) ** beta


def pdf(x, beta):
    """The density."""
    return fnp.exp(logpdf(x, beta))


def cdf(x, beta):
    """1/2 (1 + sign(x) gammainc(1 / beta, |x|**beta))."""
    x, beta = promote(x, beta)
    return 0.5 * (1 + fnp.sign(x) * special.gammainc(1 / beta, fnp.abs(x) ** beta))
