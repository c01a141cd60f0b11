"""The von Mises distribution on the circle, as `jax.scipy.stats.vonmises` (concentration
`kappa`, centered at 0).

    >>> pdf(0.0, 1e-8)  # nearly uniform: 1 / (2 pi)
    Array(0.15915497, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.scipy.stats._util import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa):
    """kappa (cos x - 1) - log(2 pi i0e(kappa)) for kappa > 0, else NaN."""
    x, kappa = promote(x, kappa)
    out = kappa * (fnp.cos(x) - 1) - math.log(2 * math.pi) - fnp.log(lax.bessel_i0e(kappa))
    return fnp.where(kappa > 0, out, fnp.nan)


def pdf(x, kappa):
    """The density."""
    return fnp.exp(logpdf(x, kappa))
