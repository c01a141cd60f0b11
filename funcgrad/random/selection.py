"""Shuffling and sampling from given values: `permutation`, `choice` and `categorical`, JAX's
algorithms (sort-based shuffles, Gumbel-max and Gumbel-top-k) bit for bit."""

import math
from collections.abc import Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.core import get_aval
from funcgrad.errors import FuncgradValueError, op_error, short_repr
from funcgrad.random import prng
from funcgrad.random.common import (
    GUMBEL_MODES,
    check_mode,
    check_shape,
    compiled,
    concrete_int,
    param,
)
from funcgrad.random.keys import unwrap
from funcgrad.random.samplers import (
    gumbel_floats,
    randint_ints,
    unit_uniform,
)


def _shuffle(key, x, axis):
    """JAX's `_shuffle`: sort by fresh 32-bit keys, enough rounds that ties are unlikely."""
    num_rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(num_rounds):
        key, subkey = prng.split2(key)
        _, x = lax.sort_key_val(prng.random_bits(subkey, 32, tuple(x.shape)), x, axis)
    return x


def _permute(key, x, axis, independent):
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    return fnp.take(x, _shuffle(key, fnp.arange(x.shape[axis]), 0), axis=axis)


@compiled
def _permutation(key, x, *, axis, independent):
    return _permute(key, x, axis, independent)


@compiled
def _permutation_range(key, *, n):
    return _shuffle(key, fnp.arange(n), 0)


def permutation(key, x, axis=0, independent=False, *, out_sharding=None):
    """A random permutation of `arange(x)` (int `x`) or of `x` along `axis`.

    With `independent=True` every slice along `axis` is shuffled on its own; otherwise whole
    slices move together (JAX's sort-based `_shuffle`, bit for bit).

    Example:
        >>> sorted(np.asarray(permutation(PRNGKey(0), 5)).tolist())
        [0, 1, 2, 3, 4]
    """
    data, _ = unwrap("permutation", key)
    aval = get_aval(x) if hasattr(x, "aval") else get_aval(fnp.asarray(x))
    if aval.ndim == 0:
        if dtypes.kind(aval.dtype) not in "iu":
            raise op_error("random.permutation", "x must be an integer or an array of rank >= 1")
        return _permutation_range(data, n=concrete_int("permutation", "x", x))
    x = fnp.asarray(x)
    axis = _axis("permutation", axis, x.ndim)
    return _permutation(data, x, axis=axis, independent=bool(independent))


def _axis(op, axis, ndim):
    if not -ndim <= axis < ndim:
        raise op_error(f"random.{op}", f"axis {axis} is out of bounds for an array of rank "
                       f"{ndim}", cls=FuncgradValueError)
    return axis % ndim


# --- choice --------------------------------------------------------------------------------------
@compiled
def _choice(key, a, p, *, shape, n, replace, axis, mode):
    n_draws = math.prod(shape)
    if p is None and replace:
        ind = randint_ints(key, shape, 0, n, dtypes.default_int())
    elif p is None:  # the first draws of a permutation (the same as permuting `a` itself)
        x = fnp.arange(n) if a is None else a
        perm = _permute(key, x, 0 if a is None else axis, False)
        first = lax.slice_in_dim(perm, 0, n_draws, axis=0 if a is None else axis)
        if a is not None:
            return first.reshape(a.shape[:axis] + shape + a.shape[axis + 1:])
        ind = first
    elif replace:
        cdf = fnp.cumsum(p)
        r = cdf[-1] * (1 - unit_uniform(key, shape, cdf.dtype))
        ind = fnp.searchsorted(cdf, r).astype(dtypes.default_int())
    else:  # Gumbel top-k
        g = gumbel_floats(key, (n,), p.dtype, mode) + fnp.log(p)
        ind = lax.top_k(g, n_draws)[1].astype(dtypes.default_int())
    if a is None:
        return ind.reshape(shape)
    return fnp.take(a, ind.reshape(-1), axis=axis).reshape(a.shape[:axis] + shape +
                                                           a.shape[axis + 1:])


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random samples from `arange(a)` (int `a`) or from `a` along `axis`.

    Args:
        key: a key.
        a: an int or an array.
        shape: the sample shape.
        replace: sample with replacement (default) or without.
        p: optional probabilities (1-D, one per candidate).
        axis: the axis of `a` to sample along.
        mode: the Gumbel sampler's mode when sampling without replacement with `p`
            (see `gumbel`).

    Example:
        >>> choice(PRNGKey(0), 10, (3,), replace=False).shape
        (3,)
    """
    data, _ = unwrap("choice", key)
    if not isinstance(shape, Sequence):
        raise op_error("random.choice", f"shape must be a sequence, got {short_repr(shape)}")
    shape = check_shape("choice", shape)
    arr = param("choice", "a", a, kinds="biufc")
    if arr.ndim == 0:
        n, arr, axis = concrete_int("choice", "a", a), None, 0
    else:
        axis = _axis("choice", axis, arr.ndim)
        n = arr.shape[axis]
    if math.prod(shape) == 0:
        return fnp.zeros(shape, dtypes.default_int() if arr is None else arr.dtype)
    if n <= 0:
        raise op_error("random.choice", "a must be greater than 0 unless no samples are "
                       "taken", cls=FuncgradValueError)
    if not replace and math.prod(shape) > n:
        raise op_error("random.choice", f"cannot take a larger sample (size "
                       f"{math.prod(shape)}) than the population (size {n}) when "
                       "replace=False", cls=FuncgradValueError)
    if p is not None:
        p = param("choice", "p", p)
        if dtypes.kind(p.dtype) != "f":
            p = p.astype(dtypes.default_float())
        if tuple(p.shape) != (n,):
            raise op_error("random.choice", f"p must be None or a 1-D vector with the same "
                           f"size as a.shape[axis] ({n}); got shape {tuple(p.shape)}",
                           cls=FuncgradValueError)
    mode = check_mode("choice", "low" if mode is None else mode, GUMBEL_MODES)
    return _choice(data, arr, p, shape=shape, n=n, replace=bool(replace), axis=axis,
                   mode=mode)


# --- categorical ---------------------------------------------------------------------------------
@compiled
def _categorical(key, logits, *, shape, axis, replace, mode):
    ndim = logits.ndim
    batch_shape = tuple(np.delete(logits.shape, axis))
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        g_shape = list(shape[len(prefix):])
        g_shape.insert(axis, logits.shape[axis])
        g = gumbel_floats(key, (*prefix, *g_shape), logits.dtype, mode)
        return fnp.argmax(g + fnp.expand_dims(logits, tuple(range(len(prefix)))),
                          axis=axis + len(prefix))
    logits = logits + gumbel_floats(key, tuple(logits.shape), logits.dtype, mode)
    _, indices = lax.top_k(fnp.moveaxis(logits, axis, -1), math.prod(prefix))
    return fnp.moveaxis(indices, ndim - 1, 0).reshape(shape)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None, *,
                out_sharding=None):
    """Samples of class indices from unnormalized log-probabilities (Gumbel-max; without
    replacement, Gumbel-top-k).

    Args:
        key: a key.
        logits: log-probabilities along `axis` (any shift is allowed).
        axis: the class axis.
        shape: sample shape; must end with the batch shape of `logits` (default: it).
        replace: with replacement (default); `False` draws distinct classes, at most as
            many as there are (the leading `shape` entries count the draws).
        mode: the Gumbel sampler's mode (see `gumbel`).
        out_sharding: accepted for JAX's signature (one device).

    Returns:
        int32 indices of shape `shape`.

    Example:
        >>> int(categorical(PRNGKey(0), fnp.array([-1e9, 0.0, -1e9])))
        1
    """
    data, _ = unwrap("categorical", key)
    logits = param("categorical", "logits", logits)
    if dtypes.kind(logits.dtype) != "f":
        logits = logits.astype(dtypes.default_float())
    if logits.ndim == 0:
        raise op_error("random.categorical", "logits must have at least one axis (the "
                       "classes)", cls=FuncgradValueError)
    axis = _axis("categorical", axis, logits.ndim)
    batch_shape = tuple(np.delete(logits.shape, axis))
    shape = batch_shape if shape is None else check_shape("categorical", shape)
    if shape[len(shape) - len(batch_shape):] != batch_shape:
        raise op_error("random.categorical", f"shape {shape} must end with the batch shape "
                       f"{batch_shape} of logits {tuple(logits.shape)}", cls=FuncgradValueError)
    draws = math.prod(shape[:len(shape) - len(batch_shape)])
    if not replace and draws > logits.shape[axis]:
        raise op_error("random.categorical", f"the number of samples without replacement "
                       f"({draws}) cannot exceed the number of categories "
                       f"({logits.shape[axis]})", cls=FuncgradValueError)
    mode = check_mode("categorical", "low" if mode is None else mode, GUMBEL_MODES)
    return _categorical(data, logits, shape=shape, axis=axis, replace=bool(replace), mode=mode)
