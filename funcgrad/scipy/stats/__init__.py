"""`funcgrad.scipy.stats`: distributions as in `jax.scipy.stats`, one module each
(`norm.logpdf(x, loc=0, scale=1)`, `multivariate_normal.logpdf(x, mean, cov)`, ...).

Each function promotes its arguments to a common float dtype and broadcasts them, like
JAX's. Imports funcgrad.numpy, lax and funcgrad.scipy.special.
"""

from funcgrad.scipy.stats import (
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from funcgrad.scipy.stats.kde import gaussian_kde
from funcgrad.scipy.stats.summary import ModeResult, mode, rankdata, sem

__all__ = ["bernoulli", "beta", "gamma", "laplace", "logistic", "multivariate_normal", "norm",
           "poisson", "t", "uniform",
           # the long tail (issue 28)
           "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gennorm", "geom",
           "gumbel_l", "gumbel_r", "multinomial", "nbinom", "pareto", "truncnorm", "vonmises",
           "wrapcauchy", "ModeResult", "gaussian_kde", "mode", "rankdata", "sem"]
