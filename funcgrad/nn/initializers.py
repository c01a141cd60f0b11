"""Parameter initializers, exactly as `jax.nn.initializers`.

An initializer is a function `init(key, shape, dtype=float32) -> Array`. `zeros` and `ones`
are initializers; the other names are factories returning one (`normal(stddev=1e-2)`,
`he_normal()`...). Fan sizes follow JAX: `in_axis=-2`, `out_axis=-1` (a dense `(in, out)`
matrix or an HWIO kernel); all other axes form the receptive field. For an OIHW convolution
kernel pass `in_axis=1, out_axis=0`. Given the same key, every initializer returns the same
numbers as JAX (to float32 rounding where JAX's erf_inv differs in the last bit). This module
imports only `funcgrad.random` and `funcgrad.numpy`.

    >>> from funcgrad import random
    >>> he_normal()(random.PRNGKey(0), (64, 32)).shape
    (64, 32)
"""

import math
import typing

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, random

__all__ = [
    "constant", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "kaiming_normal",
    "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones", "orthogonal",
    "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
    "Initializer", "delta_orthogonal",  # the long tail (issue 28)
]

# the standard deviation of a standard normal truncated to (-2, 2)
_TRUNCATED_STDDEV = .87962566103423978


def _dtype(dtype):
    return dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float()


def zeros(key, shape, dtype=None, out_sharding=None):
    """An array of zeros (the key is ignored; `out_sharding`: None or one device).

    Example: ``zeros(None, (2,))`` is ``[0., 0.]``.
    """
    return fnp.zeros(shape, _dtype(dtype), out_sharding=out_sharding)


def ones(key, shape, dtype=None, out_sharding=None):
    """An array of ones (the key is ignored; `out_sharding`: None or one device).

    Example: ``ones(None, (2,))`` is ``[1., 1.]``.
    """
    return fnp.ones(shape, _dtype(dtype), out_sharding=out_sharding)


def constant(value, dtype=None):
    """An initializer filling arrays with `value`.

    Example: ``constant(-7.0)(None, (2,))`` is ``[-7., -7.]``.
    """
    def init(key, shape, dtype=dtype):
        return fnp.full(shape, value, _dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from `[0, scale)`.

    Example: ``uniform(1.0)(random.PRNGKey(0), (3,))`` lies in [0, 1).
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return random.uniform(key, shape, dt) * dt.type(scale)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from a normal distribution with mean 0 and `stddev`.

    Example: ``normal(1.0)(random.PRNGKey(0), (3,))`` has shape (3,).
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return random.normal(key, shape, dt) * dt.type(stddev)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing `stddev * t`, `t` a standard normal truncated to (lower, upper).
    `stddev` is that of the *untruncated* normal (no correction, as in JAX).

    Example: ``truncated_normal(1.0)(random.PRNGKey(0), (3,))`` lies in (-2, 2).
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dt) * dt.type(stddev)
    return init


def _axes_size(shape, axes):
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    """JAX's `(fan_in, fan_out)`: the in/out axis sizes times the receptive field (the
    product of all other axes except `batch_axis`).

    Example:
        >>> compute_fans((3, 3, 16, 32))  # an HWIO 3x3 kernel
        (144.0, 288.0)
    """
    shape = tuple(shape)
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"cannot compute the fan sizes of a {len(shape)}-dimensional weight "
                         f"of shape {shape} with the default in_axis; it must be at least 2-D "
                         "(or pass in_axis explicitly)")
    in_size, out_size = _axes_size(shape, in_axis), _axes_size(shape, out_axis)
    receptive = math.prod(shape) / in_size / out_size / _axes_size(shape, batch_axis)
    return in_size * receptive, out_size * receptive


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer with variance `scale / n`, `n` chosen by `mode` from the fan sizes.

    Args:
        scale: the scaling factor (positive float).
        mode: "fan_in", "fan_out", "fan_avg" or "fan_geo_avg".
        distribution: "truncated_normal" (cut at two standard deviations, then rescaled by
            .87962566103423978 so the variance is still `scale / n`), "normal" or "uniform"
            (on `[-sqrt(3 scale / n), sqrt(3 scale / n))`).
        in_axis, out_axis, batch_axis: axes for the fan computation (see `compute_fans`).
        dtype: the default dtype.

    Example:
        >>> w = variance_scaling(2.0, "fan_in", "normal")(random.PRNGKey(0), (1000, 100))
        >>> round(float(w.std()) ** 2 * 1000, 1)  # close to 2.0
        2.0
    """
    modes = {"fan_in": lambda i, o: i, "fan_out": lambda i, o: o,
             "fan_avg": lambda i, o: (i + o) / 2, "fan_geo_avg": lambda i, o: (i * o) ** 0.5}
    if mode not in modes:
        raise ValueError(f"invalid mode for variance scaling initializer: {mode!r}; "
                         f"expected one of {sorted(modes)}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution!r}")

    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        shape = tuple(shape)
        variance = dt.type(scale / modes[mode](*compute_fans(shape, in_axis, out_axis,
                                                              batch_axis)))
        if distribution == "truncated_normal":
            stddev = np.sqrt(variance) / dt.type(_TRUNCATED_STDDEV)
            return random.truncated_normal(key, -2, 2, shape, dt) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dt) * np.sqrt(variance)
        return random.uniform(key, shape, dt, -1) * np.sqrt(dt.type(3) * variance)
    init.__qualname__ = _call_text("variance_scaling", scale, mode, distribution,
                                   in_axis=(in_axis, -2), out_axis=(out_axis, -1),
                                   batch_axis=(batch_axis, ()))
    return init


def _call_text(name, *args, **kwargs):
    """`name(args, k=v)` listing the keyword arguments that differ from their defaults (given
    as `(value, default)` pairs): the readable name of an initializer in a layer's repr."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, (v, d) in kwargs.items() if v != d]
    return f"{name}({', '.join(parts)})"


def _family(scale, mode, distribution, name):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        init = variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
        init.__qualname__ = _call_text(name, in_axis=(in_axis, -2), out_axis=(out_axis, -1),
                                       batch_axis=(batch_axis, ()))
        return init
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"`variance_scaling({scale}, {mode!r}, {distribution!r})`: an "
                       f"initializer factory (JAX's `{name}`).\n\n    Example: "
                       f"``{name}()(random.PRNGKey(0), (4, 3))`` has shape (4, 3).\n")
    return factory


glorot_uniform = xavier_uniform = _family(1.0, "fan_avg", "uniform", "glorot_uniform")
glorot_normal = xavier_normal = _family(1.0, "fan_avg", "truncated_normal", "glorot_normal")
lecun_uniform = _family(1.0, "fan_in", "uniform", "lecun_uniform")
lecun_normal = _family(1.0, "fan_in", "truncated_normal", "lecun_normal")
he_uniform = kaiming_uniform = _family(2.0, "fan_in", "uniform", "he_uniform")
he_normal = kaiming_normal = _family(2.0, "fan_in", "truncated_normal", "he_normal")


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of (scaled) orthogonal matrices, as JAX's: the QR decomposition of a
    normal draw, with the signs of R's diagonal folded into Q so the distribution is uniform.

    The array is viewed as a matrix whose columns run along `column_axis`; its columns (or
    rows, when there are fewer rows than columns) are orthonormal, times `scale`.

    Example: ``orthogonal()(random.PRNGKey(0), (4, 3))`` has orthonormal columns.
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: the initializer needs a shape of rank >= 2, got "
                             f"{shape}")
        axis = column_axis % len(shape)
        n_cols = shape[axis]
        n_rows = math.prod(shape) // n_cols if n_cols else 0
        wide = n_rows < n_cols
        a = random.normal(key, (n_cols, n_rows) if wide else (n_rows, n_cols), dt)
        q, r = fnp.linalg.qr(a)
        q = q * fnp.sign(fnp.diagonal(r))
        if wide:
            q = q.T
        q = fnp.reshape(q, shape[:axis] + shape[axis + 1:] + (n_cols,))
        return fnp.moveaxis(q, -1, axis) * dt.type(scale)
    init.__qualname__ = _call_text("orthogonal", scale=(scale, 1.0),
                                   column_axis=(column_axis, -1))
    return init


class Initializer(typing.Protocol):
    """What every initializer here is: a function `init(key, shape, dtype=None)` returning
    an array (JAX's protocol, for type annotations)."""

    def __call__(self, key, shape, dtype=None, out_sharding=None):
        raise NotImplementedError("Initializer is a protocol for annotations, not an "
                                  "initializer")


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of 1-D, 2-D or 3-D convolution kernels (shape (*window, in, out),
    in <= out) that are zero except at the window's center, where they hold an orthogonal
    matrix (Xiao et al., 2018): the convolution then preserves norms.

    Example: ``delta_orthogonal()(random.PRNGKey(0), (3, 3, 4, 4))[1, 1]`` is orthogonal.
    """
    def init(key, shape, dtype=dtype, out_sharding=None):
        if out_sharding is not None:
            raise ValueError("delta_orthogonal: out_sharding is not supported")
        dt = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal: the initializer needs a 3-D, 4-D or 5-D "
                             f"kernel shape, got {shape}")
        if shape[-1] < shape[-2]:
            raise ValueError(f"delta_orthogonal: fan_in must be at most fan_out, got shape "
                             f"{shape}")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(key, shape[-2:])
        center = tuple((k - 1) // 2 for k in shape[:-2])
        return fnp.zeros(shape, dt).at[center].set(ortho)
    init.__qualname__ = _call_text("delta_orthogonal", scale=(scale, 1.0),
                                   column_axis=(column_axis, -1))
    return init
