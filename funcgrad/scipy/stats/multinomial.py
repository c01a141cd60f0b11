"""The multinomial distribution, as `jax.scipy.stats.multinomial` (counts `x` along the
last axis, `n` trials, probabilities `p`).

    >>> pmf(fnp.array([1, 1]), 2, fnp.array([0.5, 0.5]))
    Array(0.5, dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.scipy import special

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    """gammaln(n + 1) + sum(x log p - gammaln(x + 1)) when the counts sum to n, else -inf."""
    x, n, p = fnp.asarray(x), fnp.asarray(n), fnp.asarray(p)
    if x.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise errors.op_error("multinomial.logpmf", f"x and n must have integer types, got "
                              f"{x.dtype} and {n.dtype}", cls=errors.FuncgradValueError)
    p = p.astype(fnp.result_type(p, 1.0))
    xf, nf = x.astype(p.dtype), n.astype(p.dtype)
    out = special.gammaln(nf + 1) + fnp.sum(special.xlogy(xf, p) - special.gammaln(xf + 1),
                                            axis=-1)
    return fnp.where(fnp.sum(x) == n, out, -fnp.inf)


def pmf(x, n, p):
    """P(X = x)."""
    return fnp.exp(logpmf(x, n, p))
