"""Continuous distributions built from uniform and normal draws, each JAX's formula on the same
bits: `cauchy`, `laplace`, `logistic`, `lognormal`, `pareto`, `rayleigh`, `wald`,
`weibull_min`, `triangular`, `maxwell`, `double_sided_maxwell`, `rademacher`,
`multivariate_normal` and `orthogonal`."""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.random import prng
from funcgrad.random.common import (
    check_shape,
    compiled,
    concrete_int,
    float_dtype,
    int_dtype,
    param,
    sample_shape,
    select,
)
from funcgrad.random.keys import unwrap
from funcgrad.random.samplers import (
    exponential_floats,
    normal_floats,
    rademacher_values,
    unit_uniform,
)


def _cast(x, dtype, shape):
    return fnp.broadcast_to(lax.convert_element_type(x, dtype), shape)


# --- standard forms: shape and dtype only ----------------------------------------------------
@compiled
def _standard(key, *, name, shape, dtype):
    info = np.finfo(dtype)
    if name == "cauchy":
        u = unit_uniform(key, shape, dtype, info.eps, 1.0)
        return lax.tan(lax.mul(dtype.type(np.pi), lax.sub(u, dtype.type(0.5))))
    if name == "laplace":
        u = unit_uniform(key, shape, dtype, -1.0 + info.epsneg, 1.0)
        return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))
    if name == "logistic":
        x = unit_uniform(key, shape, dtype, info.tiny, 1.0)
        return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))
    return fnp.linalg.norm(normal_floats(key, (*shape, 3), dtype), axis=-1)  # maxwell


def _standard_sample(name, key, shape, dtype):
    data, _ = unwrap(name, key)
    dtype, shape = float_dtype(name, dtype), check_shape(name, shape)
    return _standard(data, name=name, shape=shape, dtype=dtype)


def cauchy(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard Cauchy samples `tan(pi * (u - 1/2))`, `u` uniform in [eps, 1).

    Example:
        >>> cauchy(PRNGKey(0), (3,)).shape
        (3,)
    """
    return _standard_sample("cauchy", key, shape, dtype)


def laplace(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard Laplace samples `sign(u) * log1p(-|u|)`, `u` uniform in (-1, 1).

    Example:
        >>> laplace(PRNGKey(0), (3,)).shape
        (3,)
    """
    return _standard_sample("laplace", key, shape, dtype)


def logistic(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard logistic samples `log(u) - log1p(-u)`, `u` uniform in (0, 1).

    Example:
        >>> logistic(PRNGKey(0), (3,)).shape
        (3,)
    """
    return _standard_sample("logistic", key, shape, dtype)


def maxwell(key, shape=(), dtype=None, *, out_sharding=None):
    """Maxwell samples: the norm of three standard normals.

    Example:
        >>> bool((maxwell(PRNGKey(0), (3,)) > 0).all())
        True
    """
    return _standard_sample("maxwell", key, shape, dtype)


@compiled
def _rademacher(key, *, shape, dtype):
    return rademacher_values(key, shape, dtype)


def rademacher(key, shape=(), dtype=None, *, out_sharding=None):
    """Random signs, -1 or +1 with equal probability (integer dtype by default).

    Example:
        >>> sorted(set(np.asarray(rademacher(PRNGKey(0), (20,))).tolist()))
        [-1, 1]
    """
    data, _ = unwrap("rademacher", key)
    dtype = int_dtype("rademacher", None) if dtype is None else float_dtype(
        "rademacher", dtype, kinds="iuf")
    return _rademacher(data, shape=check_shape("rademacher", shape), dtype=dtype)


# --- one parameter ----------------------------------------------------------------------------
@compiled
def _lognormal(key, sigma, *, shape, dtype):
    return fnp.exp(normal_floats(key, shape, dtype) * lax.convert_element_type(sigma, dtype))


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None, *, out_sharding=None):
    """Log-normal samples `exp(sigma * n)` (real or complex dtype).

    Example:
        >>> bool((lognormal(PRNGKey(0), 0.5, (4,)) > 0).all())
        True
    """
    data, _ = unwrap("lognormal", key)
    dtype = float_dtype("lognormal", dtype, kinds="fc")
    sigma = param("lognormal", "sigma", sigma, kinds="biufc")
    return _lognormal(data, sigma, shape=sample_shape("lognormal", shape, sigma), dtype=dtype)


@compiled
def _pareto(key, b, *, shape, dtype):
    return fnp.exp(exponential_floats(key, shape, dtype) / lax.convert_element_type(b, dtype))


def pareto(key, b, shape=None, dtype=None, *, out_sharding=None):
    """Pareto samples of shape parameter `b` (support [1, inf)): `exp(e / b)`, `e`
    exponential.

    Example:
        >>> bool((pareto(PRNGKey(0), 3.0, (4,)) >= 1).all())
        True
    """
    data, _ = unwrap("pareto", key)
    dtype = float_dtype("pareto", dtype)
    b = param("pareto", "b", b)
    return _pareto(data, b, shape=sample_shape("pareto", shape, b), dtype=dtype)


@compiled
def _rayleigh(key, scale, *, shape, dtype):
    u = unit_uniform(key, shape, dtype)
    root = lax.sqrt(lax.mul(lax.log(u), dtype.type(-2)))
    return lax.mul(_cast(scale, dtype, shape), root)


def rayleigh(key, scale, shape=None, dtype=None, *, out_sharding=None):
    """Rayleigh samples `scale * sqrt(-2 log u)`.

    Example:
        >>> rayleigh(PRNGKey(0), 2.0, (3,)).shape
        (3,)
    """
    data, _ = unwrap("rayleigh", key)
    dtype = float_dtype("rayleigh", dtype)
    scale = param("rayleigh", "scale", scale)
    return _rayleigh(data, scale, shape=sample_shape("rayleigh", shape, scale), dtype=dtype)


@compiled
def _wald(key, mean, *, shape, dtype):
    k1, k2 = prng.split2(key)
    mean = _cast(mean, dtype, shape)
    v, z = normal_floats(k1, shape, dtype), unit_uniform(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq, mean_sq = lax.integer_pow(y, 2), lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def wald(key, mean, shape=None, dtype=None, *, out_sharding=None):
    """Wald (inverse Gaussian) samples of mean `mean` and shape 1.

    Example:
        >>> bool((wald(PRNGKey(0), 1.5, (4,)) > 0).all())
        True
    """
    data, _ = unwrap("wald", key)
    dtype = float_dtype("wald", dtype)
    mean = param("wald", "mean", mean)
    return _wald(data, mean, shape=sample_shape("wald", shape, mean), dtype=dtype)


# --- two and three parameters -----------------------------------------------------------------
@compiled
def _weibull_min(key, scale, concentration, *, shape, dtype):
    u = unit_uniform(key, shape, dtype)
    return fnp.power(-fnp.log1p(-u), 1.0 / concentration) * scale


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples `scale * (-log1p(-u)) ** (1 / concentration)` (the inverse CDF).

    Example:
        >>> weibull_min(PRNGKey(0), 1.0, 2.0, (3,)).shape
        (3,)
    """
    data, _ = unwrap("weibull_min", key)
    dtype = float_dtype("weibull_min", dtype)
    scale = param("weibull_min", "scale", scale)
    concentration = param("weibull_min", "concentration", concentration)
    return _weibull_min(data, scale, concentration, shape=check_shape("weibull_min", shape),
                        dtype=dtype)


@compiled
def _triangular(key, left, mode, right, *, shape, dtype):
    left, mode, right = (_cast(v, dtype, shape) for v in (left, mode, right))
    fc = (mode - left) / (right - left)
    u = unit_uniform(key, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return select(u < fc, out1, out2)


def triangular(key, left, mode, right, shape=None, dtype=None, *, out_sharding=None):
    """Triangular samples on `[left, right]` with peak at `mode` (the inverse CDF).

    Example:
        >>> x = triangular(PRNGKey(0), 0.0, 1.0, 3.0, (5,))
        >>> bool(((x >= 0) & (x <= 3)).all())
        True
    """
    data, _ = unwrap("triangular", key)
    dtype = float_dtype("triangular", dtype)
    left, mode, right = (param("triangular", n, v) for n, v in (("left", left), ("mode", mode),
                                                                  ("right", right)))
    shape = sample_shape("triangular", shape, left, mode, right)
    return _triangular(data, left, mode, right, shape=shape, dtype=dtype)


@compiled
def _double_sided_maxwell(key, loc, scale, *, shape, dtype):
    maxwell_key, sign_key = prng.split2(key)
    rvs = fnp.linalg.norm(normal_floats(maxwell_key, (*shape, 3), dtype), axis=-1)
    return rademacher_values(sign_key, shape, dtype) * rvs * scale + loc


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Double-sided Maxwell samples: a Maxwell sample with a random sign, times `scale`,
    plus `loc`. As in JAX the result shape is `shape + broadcast(loc, scale).shape` (with
    `shape=()` meaning that broadcast shape, so array parameters give it twice).

    Example:
        >>> double_sided_maxwell(PRNGKey(0), 0.0, 1.0, (4,)).shape
        (4,)
    """
    data, _ = unwrap("double_sided_maxwell", key)
    dtype = float_dtype("double_sided_maxwell", dtype)
    loc = param("double_sided_maxwell", "loc", loc)
    scale = param("double_sided_maxwell", "scale", scale)
    params_shape = sample_shape("double_sided_maxwell", None, loc, scale)
    shape = check_shape("double_sided_maxwell", shape) or params_shape
    return _double_sided_maxwell(data, loc, scale, shape=shape + params_shape, dtype=dtype)


# --- matrices ---------------------------------------------------------------------------------
@compiled
def _multivariate_normal(key, mean, cov, *, shape, dtype, method):
    if method == "svd":
        u, s, _ = fnp.linalg.svd(cov)
        factor = u * fnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = v * fnp.sqrt(w[..., None, :])
    else:
        factor = fnp.linalg.cholesky(cov)
    samples = normal_floats(key, shape + mean.shape[-1:], dtype)
    return mean + fnp.einsum("...ij,...j->...i", factor, samples)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky", *,
                        out_sharding=None):
    """Multivariate normal samples `mean + factor @ n` with `factor @ factor.T = cov`.

    Args:
        key: a key.
        mean: means of shape `(..., n)`.
        cov: covariances of shape `(..., n, n)` (positive definite for "cholesky").
        shape: the batch shape (default: the broadcast of the batch shapes of `mean` and
            `cov`); the result has `shape + (n,)`.
        dtype: a float dtype (default: that of `mean` and `cov`).
        method: "cholesky" (default), "svd" or "eigh" (the last two allow singular `cov`).
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> multivariate_normal(PRNGKey(0), fnp.zeros(2), fnp.eye(2), (5,)).shape
        (5, 2)
    """
    data, _ = unwrap("multivariate_normal", key)
    mean, cov = (param("multivariate_normal", n, v) for n, v in (("mean", mean), ("cov", cov)))
    mean, cov = _promote_inexact(mean, cov)
    if method not in ("svd", "eigh", "cholesky"):
        raise op_error("random.multivariate_normal", f"method must be 'svd', 'eigh' or "
                       f"'cholesky', got {method!r}", cls=FuncgradValueError)
    dtype = mean.dtype if dtype is None else float_dtype("multivariate_normal", dtype)
    if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != mean.shape[-1:] * 2:
        raise op_error("random.multivariate_normal", f"expected mean of shape (..., n) and cov "
                       f"of shape (..., n, n); got {tuple(mean.shape)} and {tuple(cov.shape)}",
                       cls=FuncgradValueError)
    batch = sample_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
    return _multivariate_normal(data, mean, cov, shape=batch, dtype=dtype, method=method)


def _promote_inexact(*xs):
    """JAX's `promote_dtypes_inexact`: the common dtype, made a float if it is not one."""
    dt = np.dtype(fnp.result_type(*xs))
    dt = dt if dtypes.kind(dt) in "fc" else dtypes.default_float()
    return [x.astype(dt) for x in xs]


@compiled
def _orthogonal(key, *, n, m, shape, dtype):
    z = normal_floats(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = fnp.linalg.qr(z)
    x = q * fnp.expand_dims(fnp.sign(fnp.diagonal(r, axis1=-2, axis2=-1)), -2)
    return fnp.swapaxes(x, -1, -2) if n < m else x


def orthogonal(key, n, shape=(), dtype=None, m=None, *, out_sharding=None):
    """Random `n x m` matrices with orthonormal columns (or rows when `n < m`), uniform
    (Haar) when square: the Q of a normal matrix's QR, its signs fixed by R's diagonal.

    Example:
        >>> q = orthogonal(PRNGKey(0), 3)
        >>> bool(fnp.allclose(q @ q.T, fnp.eye(3), atol=1e-5))
        True
    """
    data, _ = unwrap("orthogonal", key)
    dtype = float_dtype("orthogonal", dtype, kinds="fc")
    n = concrete_int("orthogonal", "n", n)
    m = n if m is None else concrete_int("orthogonal", "m", m)
    return _orthogonal(data, n=n, m=m, shape=check_shape("orthogonal", shape), dtype=dtype)
