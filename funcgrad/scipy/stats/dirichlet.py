"""The Dirichlet distribution, as `jax.scipy.stats.dirichlet` (`x` along the first axis:
K entries, or K - 1 with the last implied; `alpha` of length K).

    >>> pdf(fnp.array([0.5, 0.5]), fnp.array([1.0, 1.0]))
    Array(1., dtype=float32)
"""

import funcgrad.numpy as fnp
from funcgrad import errors
from funcgrad.scipy import special

__all__ = ["logpdf", "pdf"]


def logpdf(x, alpha):
    """sum((alpha - 1) log x) - (sum gammaln(alpha) - gammaln(sum alpha)) on the simplex
    (entries > 0 summing to 1 within 1e-6), else -inf."""
    x, alpha = fnp.asarray(x), fnp.asarray(alpha)
    dt = fnp.result_type(x, alpha, 1.0)
    x, alpha = x.astype(dt), alpha.astype(dt)
    if alpha.ndim != 1:
        raise errors.op_error("dirichlet.logpdf", f"alpha must be 1-D, got shape {alpha.shape}",
                              cls=errors.FuncgradValueError)
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise errors.op_error("dirichlet.logpdf", f"x must have {k} or {k - 1} entries along "
                              f"its first axis, got shape {x.shape}",
                              cls=errors.FuncgradValueError)
    if x.shape[0] != k:
        x = fnp.concatenate([x, 1 - x.sum(0, keepdims=True)], axis=0)
    norm = fnp.sum(special.gammaln(alpha)) - special.gammaln(fnp.sum(alpha))
    a = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    out = fnp.sum(special.xlogy(a - 1, x), axis=0) - norm
    simplex = fnp.all(x > 0, axis=0) & (fnp.abs(x.sum(0) - 1) < 1e-6)
    return fnp.where(simplex, out, -fnp.inf)


def pdf(x, alpha):
    """The density."""
    return fnp.exp(logpdf(x, alpha))
