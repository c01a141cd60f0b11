"""Gamma and the samplers built on it: `gamma`, `loggamma`, `beta`, `dirichlet`, `chisquare`,
`f`, `t`, `generalized_normal` and `ball`.

A gamma sample is JAX's: Marsaglia and Tsang's method for each element with its own key
(`split(key, a.size)`), boosted by `u ** (1 / a)` for `a < 1` (in log space for `loggamma`),
two nested rejection loops that run per element under `vmap`, as JAX's lowering does. Its
derivative with respect to `a` is the implicit reparameterization gradient
(`gamma_grad.random_gamma_grad`), so `grad` flows through gamma, beta, dirichlet, chisquare,
f and t samples into their parameters, as in JAX.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.custom_derivatives import custom_jvp
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.random import prng
from funcgrad.random.common import (
    any_true,
    check_shape,
    compiled,
    concrete_int,
    float_dtype,
    param,
    sample_shape,
    select,
)
from funcgrad.random.gamma_grad import random_gamma_grad
from funcgrad.random.keys import unwrap
from funcgrad.random.samplers import (
    exponential_floats,
    normal_floats,
    rademacher_values,
    unit_uniform,
)


def _keep(active, new, old):
    """`new` where `active`, else `old` (for a batch of keys: each word array)."""
    if isinstance(new, tuple):
        return tuple(fnp.where(active, n, o) for n, o in zip(new, old))
    return fnp.where(active, new, old)


def _gamma_many(keys, alpha, log_space):
    """One Gamma(alpha[i], 1) sample from each key of `keys` (a batch of keys as its two
    word arrays): JAX's `_gamma_one` (Marsaglia and Tsang) step for step, vectorized as
    `vmap` runs it: each loop runs while any element is still rejected, and an element's
    state is kept once it is accepted, so element `i` is JAX's sample for key `i`."""
    dt = alpha.dtype
    one, zero = dt.type(1), dt.type(0)
    boost = alpha >= one
    alpha_orig, alpha = alpha, fnp.where(boost, alpha, alpha + one)
    d = alpha - dt.type(1 / 3)
    c = dt.type(1 / 3) / fnp.sqrt(d)

    def rejected(kxvu):  # the squeeze test, then the full test: reject while either fails
        _, x, v, u = kxvu
        return ((u >= one - dt.type(0.0331) * (x * x))
                & (fnp.log(u) >= x * dt.type(0.5) + d * (one - v + fnp.log(v))))

    def next_normal(kxv):  # draw normals x until v = 1 + c x is positive
        key, subkey = prng.split2(kxv[0])
        x = normal_floats(subkey, (), dt)
        new = (key, x, one + x * c)
        return tuple(_keep(kxv[2] <= zero, n, o) for n, o in zip(new, kxv))

    def propose(kxvu):
        key, x_key, u_key = prng.split2(kxvu[0], 3)
        _, x, v = lax.while_loop(lambda kxv: any_true(kxv[2] <= zero), next_normal,
                                 (x_key, fnp.zeros_like(alpha), -fnp.ones_like(alpha)))
        new = (key, x * x, v * v * v, unit_uniform(u_key, (), dt))
        return tuple(_keep(rejected(kxvu), n, o) for n, o in zip(new, kxvu))

    keys, subkeys = prng.split2(keys)
    start = (keys, fnp.zeros_like(alpha), fnp.ones_like(alpha), fnp.full_like(alpha, 2))
    v = lax.while_loop(lambda kxvu: any_true(rejected(kxvu)), propose, start)[2]
    if log_space:
        log_u = lax.neg(exponential_floats(subkeys, (), dt))
        log_boost = fnp.where(boost | (log_u == zero), zero, log_u * (one / alpha_orig))
        return fnp.log(d) + fnp.log(v) + log_boost
    u = one - unit_uniform(subkeys, (), dt)
    return d * v * fnp.where(boost, one, fnp.power(u, one / alpha_orig))


def _draw(key, a, log_space):
    """Gamma samples of `a`'s shape, one key per element (JAX's `_gamma_impl`)."""
    if a.size == 0:
        return fnp.zeros_like(a)
    keys = prng.hash_counters(key, (a.size,))  # the words of split(key, a.size)
    return _gamma_many(keys, a.reshape(-1), log_space).reshape(a.shape)


def _gamma_derivative(sample, a, log_space):
    """d sample / d a at a fixed CDF value (of `log(sample)` in log space)."""
    if not log_space:
        return random_gamma_grad(a, sample)
    x = fnp.exp(sample)
    x = select(x == a.dtype.type(0), fnp.full_like(x, np.finfo(a.dtype).tiny), x)
    return random_gamma_grad(a, x) / x


def _with_gradient(log_space):
    @custom_jvp
    def draw(key, a):
        return _draw(key, a, log_space)
    draw.defjvps(None, lambda t, out, key, a: t * _gamma_derivative(out, a, log_space))
    return draw


_DRAW = {False: _with_gradient(False), True: _with_gradient(True)}


def gamma_floats(key, a, shape, dtype, log_space=False):
    """JAX's `_gamma`: `a` cast and broadcast to `shape`, then one sample per element."""
    a = fnp.broadcast_to(lax.convert_element_type(a, dtype), shape)
    return _DRAW[log_space](key, a)


@compiled
def _gamma(key, a, *, shape, dtype, log_space):
    return gamma_floats(key, a, shape, dtype, log_space)


def _gamma_args(op, key, a, shape, dtype):
    data, _ = unwrap(op, key)
    dtype = float_dtype(op, dtype)
    a = param(op, "a", a)
    return data, a, sample_shape(op, shape, a), dtype


def gamma(key, a, shape=None, dtype=None, *, out_sharding=None):
    """Gamma(a, 1) samples (density proportional to `x**(a - 1) * exp(-x)`), JAX's algorithm;
    differentiable in `a` (implicit reparameterization, as JAX).

    Args:
        key: a key.
        a: the shape parameter, positive (a float or an array broadcastable to `shape`).
        shape: the sample shape (default `a`'s shape).
        dtype: a float dtype.
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> bool((gamma(PRNGKey(0), 2.0, (5,)) > 0).all())
        True
    """
    data, a, shape, dtype = _gamma_args("gamma", key, a, shape, dtype)
    return _gamma(data, a, shape=shape, dtype=dtype, log_space=False)


def loggamma(key, a, shape=None, dtype=None, *, out_sharding=None):
    """The logarithms of Gamma(a, 1) samples, computed in log space (accurate where `a` is
    so small that the samples underflow); `exp(loggamma(k, a))` equals `gamma(k, a)`.

    Example:
        >>> bool((loggamma(PRNGKey(0), 0.01, (5,)) < 0).all())
        True
    """
    data, a, shape, dtype = _gamma_args("loggamma", key, a, shape, dtype)
    return _gamma(data, a, shape=shape, dtype=dtype, log_space=True)


# --- built on gamma ---------------------------------------------------------------------------
@compiled
def _beta(key, a, b, *, shape, dtype):
    key_a, key_b = prng.split2(key)
    log_a = gamma_floats(key_a, a, shape, dtype, log_space=True)
    log_b = gamma_floats(key_b, b, shape, dtype, log_space=True)
    log_max = lax.max(log_a, log_b)
    ga, gb = fnp.exp(log_a - log_max), fnp.exp(log_b - log_max)
    return ga / (ga + gb)


def beta(key, a, b, shape=None, dtype=None, *, out_sharding=None):
    """Beta(a, b) samples `Ga / (Ga + Gb)` from two log-space gamma draws, differentiable in
    `a` and `b`.

    Example:
        >>> x = beta(PRNGKey(0), 2.0, 3.0, (4,))
        >>> bool(((x > 0) & (x < 1)).all())
        True
    """
    data, _ = unwrap("beta", key)
    dtype = float_dtype("beta", dtype)
    a, b = param("beta", "a", a), param("beta", "b", b)
    return _beta(data, a, b, shape=sample_shape("beta", shape, a, b), dtype=dtype)


def _softmax_last(x):
    unnormalized = fnp.exp(x - lax.stop_gradient(fnp.max(x, axis=-1, keepdims=True)))
    return unnormalized / fnp.sum(unnormalized, axis=-1, keepdims=True)


@compiled
def _dirichlet(key, alpha, *, shape, dtype):
    return _softmax_last(gamma_floats(key, alpha, shape, dtype, log_space=True))


def dirichlet(key, alpha, shape=None, dtype=None, *, out_sharding=None):
    """Dirichlet(alpha) samples: the softmax of log-space gamma draws over the last axis.

    Args:
        key: a key.
        alpha: concentrations of shape `(..., n)`.
        shape: the batch shape (default `alpha.shape[:-1]`); the result has `shape + (n,)`.
        dtype: a float dtype.
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> x = dirichlet(PRNGKey(0), fnp.array([1.0, 2.0, 3.0]))
        >>> round(float(x.sum()), 5)
        1.0
    """
    data, _ = unwrap("dirichlet", key)
    dtype = float_dtype("dirichlet", dtype)
    alpha = param("dirichlet", "alpha", alpha)
    if alpha.ndim < 1:
        raise op_error("random.dirichlet", "alpha must have at least one axis",
                       cls=FuncgradValueError)
    batch = sample_shape("dirichlet", shape, alpha.shape[:-1])
    return _dirichlet(data, alpha, shape=batch + alpha.shape[-1:], dtype=dtype)


def chisquare_floats(key, df, shape, dtype):
    half = lax.convert_element_type(df, dtype) / dtype.type(2)
    return fnp.exp(gamma_floats(key, half, shape, dtype, log_space=True)) * dtype.type(2)


@compiled
def _chisquare(key, df, *, shape, dtype):
    return chisquare_floats(key, df, shape, dtype)


def chisquare(key, df, shape=None, dtype=None, *, out_sharding=None):
    """Chi-square samples with `df` degrees of freedom: `2 * Gamma(df / 2)`.

    Example:
        >>> chisquare(PRNGKey(0), 3.0, (2,)).shape
        (2,)
    """
    data, _ = unwrap("chisquare", key)
    dtype = float_dtype("chisquare", dtype)
    df = param("chisquare", "df", df)
    return _chisquare(data, df, shape=sample_shape("chisquare", shape, df), dtype=dtype)


@compiled
def _f(key, dfnum, dfden, *, shape, dtype):
    dfnum = lax.convert_element_type(dfnum, dtype)
    dfden = lax.convert_element_type(dfden, dtype)
    key_dfd, key_dfn = prng.split2(key)
    num = chisquare_floats(key_dfn, dfnum, shape, dtype) / dfnum
    return num / (chisquare_floats(key_dfd, dfden, shape, dtype) / dfden)


def f(key, dfnum, dfden, shape=None, dtype=None, *, out_sharding=None):
    """F-distribution samples: the ratio of two chi-squares, each over its degrees of freedom.

    Example:
        >>> bool((f(PRNGKey(0), 3.0, 5.0, (4,)) > 0).all())
        True
    """
    data, _ = unwrap("f", key)
    dtype = float_dtype("f", dtype)
    dfnum, dfden = param("f", "dfnum", dfnum), param("f", "dfden", dfden)
    return _f(data, dfnum, dfden, shape=sample_shape("f", shape, dfnum, dfden), dtype=dtype)


@compiled
def _t(key, df, *, shape, dtype):
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = prng.split2(key)
    n = normal_floats(key_n, shape, dtype)
    half_df = df / dtype.type(2)
    g = gamma_floats(key_g, half_df, shape, dtype)
    return n * fnp.sqrt(half_df / g)


def t(key, df, shape=None, dtype=None, *, out_sharding=None):
    """Student's t samples with `df` degrees of freedom: `n * sqrt(df / 2 / Gamma(df / 2))`.

    Example:
        >>> t(PRNGKey(0), 4.0, (3,)).shape
        (3,)
    """
    data, _ = unwrap("t", key)
    dtype = float_dtype("t", dtype)
    df = param("t", "df", df)
    return _t(data, df, shape=sample_shape("t", shape, df), dtype=dtype)


def generalized_normal_floats(key, p, shape, dtype):
    """JAX's `_generalized_normal`: `sign * Gamma(1 / p) ** (1 / p)`."""
    key_g, key_r = prng.split2(key)
    g = gamma_floats(key_g, 1 / p, shape, dtype)
    return rademacher_values(key_r, shape, dtype) * g ** (1 / p)


@compiled
def _generalized_normal(key, p, *, shape, dtype):
    return generalized_normal_floats(key, p, shape, dtype)


def generalized_normal(key, p, shape=(), dtype=None, *, out_sharding=None):
    """Generalized normal samples, density proportional to `exp(-|x| ** p)` (p = 2: a normal
    of variance 1/2; p = 1: Laplace).

    Example:
        >>> generalized_normal(PRNGKey(0), 1.5, (3,)).shape
        (3,)
    """
    data, _ = unwrap("generalized_normal", key)
    dtype = float_dtype("generalized_normal", dtype)
    p = param("generalized_normal", "p", p)
    shape = check_shape("generalized_normal", shape)
    return _generalized_normal(data, p, shape=shape, dtype=dtype)


@compiled
def _ball(key, p, *, d, shape, dtype):
    k1, k2 = prng.split2(key)
    g = generalized_normal_floats(k1, p, (*shape, d), dtype)
    e = exponential_floats(k2, shape, dtype)
    return g / (((fnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


def ball(key, d, p=2, shape=(), dtype=None, *, out_sharding=None):
    """Points uniformly distributed in the unit `p`-norm ball of dimension `d`.

    Example:
        >>> x = ball(PRNGKey(0), 3, shape=(10,))
        >>> x.shape, bool((fnp.linalg.norm(x, axis=-1) <= 1).all())
        ((10, 3), True)
    """
    data, _ = unwrap("ball", key)
    dtype = float_dtype("ball", dtype)
    d = concrete_int("ball", "d", d)
    p = param("ball", "p", p)
    return _ball(data, p, d=d, shape=check_shape("ball", shape), dtype=dtype)
