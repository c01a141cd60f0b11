"""The beta distribution, as `jax.scipy.stats.beta` (logpdf, pdf).

    >>> pdf(0.5, 2.0, 2.0)
    Array(1.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote

__all__ = ["logpdf", "pdf"]


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
