"""The multivariate normal distribution, as `jax.scipy.stats.multivariate_normal`, through a
Cholesky factor of `cov` (batched over leading axes, as JAX broadcasts them).

    >>> logpdf(fnp.zeros(2), fnp.zeros(2), fnp.eye(2))
    Array(-1.837877, dtype=float32)
"""

import math

import funcgrad.numpy as fnp
from funcgrad import errors, lax

__all__ = ["logpdf", "pdf"]


def logpdf(x, mean, cov, allow_singular=None):
    """log N(x; mean, cov); `x` (..., n), `mean` (..., n), `cov` (..., n, n) or a scalar."""
    if allow_singular is not None:
        raise errors.FuncgradValueError("multivariate_normal.logpdf: allow_singular is not "
                                        f"supported (as in JAX)\n{errors.where()}")
    x, mean, cov = fnp.asarray(x), fnp.asarray(mean), fnp.asarray(cov)
    dt = fnp.result_type(x, mean, cov, 1.0)
    x, mean, cov = x.astype(dt), mean.astype(dt), cov.astype(dt)
    if mean.ndim == 0 or cov.ndim < 2:
        var = cov if cov.ndim == 0 else cov[..., None]
        y = x - mean
        return -0.5 * fnp.sum(y * y / var + fnp.log(2 * math.pi * var), axis=-1)
    n = cov.shape[-1]
    if mean.shape[-1] != n or (x.ndim and x.shape[-1] != n):
        raise errors.FuncgradValueError(
            f"multivariate_normal.logpdf: x {x.shape}, mean {mean.shape} and cov {cov.shape} "
            f"do not agree on the dimension\n{errors.where()}")
    chol = fnp.linalg.cholesky(cov)
    y = fnp.broadcast_to(x - mean, fnp.broadcast_shapes((x - mean).shape, cov.shape[:-1]))
    chol = fnp.broadcast_to(chol, y.shape[:-1] + (n, n))
    z = lax.linalg.triangular_solve(chol, y[..., None], left_side=True, lower=True)[..., 0]
    half_logdet = fnp.sum(fnp.log(fnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * fnp.sum(z * z, axis=-1) - half_logdet - 0.5 * n * math.log(2 * math.pi)


def pdf(x, mean, cov):
    """N(x; mean, cov)."""
    return fnp.exp(logpdf(x, mean, cov))
