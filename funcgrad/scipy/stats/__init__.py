"""`funcgrad.scipy.stats`: distributions as in `jax.scipy.stats`, one module each
(`norm.logpdf(x, loc=0, scale=1)`, `multivariate_normal.logpdf(x, mean, cov)`, ...).

Each function promotes its arguments to a common float dtype and broadcasts them, like
JAX's. Imports funcgrad.numpy, lax and funcgrad.scipy.special.
"""

from funcgrad.scipy.stats import (
    bernoulli,
    beta,
    gamma,
    laplace,
    logistic,
    multivariate_normal,
    norm,
    poisson,
    t,
    uniform,
)

__all__ = ["bernoulli", "beta", "gamma", "laplace", "logistic", "multivariate_normal", "norm",
           "poisson", "t", "uniform"]
