"""funcgrad.random: counter-based, splittable pseudo-random numbers, bit for bit as `jax.random`.

Keys are raw `uint32[2]` arrays (`PRNGKey`) or typed keys (`key`, dtype `key<fry>`). Every
sampler is a pure function of its key: the same key gives the same numbers eagerly, under
`jit`, under `vmap` (over keys or parameters) and on every backend. The generator is
Threefry-2x32 (20 rounds) with JAX's default "partitionable" counter layout, written with
ordinary lax integer ops; each sampler is JAX's algorithm on those bits, so the numbers are
JAX's (bit for bit, or to float32 rounding where transcendental functions round differently).
An eager sampler call runs as one compiled program (`common.compiled`).

The modules: `prng` (the cipher, bits, split, fold_in on raw data), `keys` (key kinds and
the functions on keys), `common` (argument checks; `compiled`), `samplers` (uniform,
normal, bernoulli, gumbel, randint, ...), `selection` (permutation, choice, categorical),
`distributions` (continuous families built from uniforms and normals), `discrete`
(geometric, poisson, binomial, multinomial), `gamma_family` (gamma and the samplers built on
it, with implicit reparameterization gradients; their special function in `gamma_grad`). No
module is named as a public function.
This package imports only the public lax/numpy/jit layers and must not import
`funcgrad.nn`.

    >>> key = PRNGKey(0)
    >>> k1, k2 = split(key)
    >>> uniform(k1, (3,)).shape
    (3,)
"""

import numpy as np  # noqa: F401  (the docstrings' examples use np)

from funcgrad.random.discrete import binomial, geometric, multinomial, poisson
from funcgrad.random.distributions import (
    cauchy,
    double_sided_maxwell,
    laplace,
    logistic,
    lognormal,
    maxwell,
    multivariate_normal,
    orthogonal,
    pareto,
    rademacher,
    rayleigh,
    triangular,
    wald,
    weibull_min,
)
from funcgrad.random.gamma_family import (
    ball,
    beta,
    chisquare,
    dirichlet,
    f,
    gamma,
    generalized_normal,
    loggamma,
    t,
)
from funcgrad.random.keys import (
    PRNGKey,
    PRNGKeyArray,
    clone,
    fold_in,
    key,
    key_data,
    key_dtype,
    key_impl,
    split,
    wrap_key_data,
)
from funcgrad.random.prng import threefry2x32
from funcgrad.random.samplers import (
    bernoulli,
    bits,
    exponential,
    gumbel,
    normal,
    randint,
    truncated_normal,
    uniform,
)
from funcgrad.random.selection import categorical, choice, permutation

__all__ = [
    "PRNGKey", "PRNGKeyArray", "ball", "bernoulli", "beta", "binomial", "bits", "categorical",
    "cauchy", "chisquare", "choice", "clone", "dirichlet", "double_sided_maxwell",
    "exponential", "f", "fold_in", "gamma", "generalized_normal", "geometric", "gumbel", "key",
    "key_data", "key_dtype", "key_impl", "laplace", "loggamma", "logistic", "lognormal",
    "maxwell", "multinomial", "multivariate_normal", "normal", "orthogonal", "pareto",
    "permutation", "poisson", "rademacher", "randint", "rayleigh", "split", "t",
    "threefry2x32", "triangular", "truncated_normal", "uniform", "wald", "weibull_min",
    "wrap_key_data",
]
