"""funcgrad.random: counter-based, splittable pseudo-random numbers, bit for bit as `jax.random`.

A key is a plain `uint32[2]` array. Every sampler is a pure function of its key: the same key
gives the same numbers eagerly, under `jit`, under `vmap` (over keys or data) and on every
backend. The generator is Threefry-2x32 (20 rounds) with JAX's default "partitionable" counter
layout (`jax_threefry_partitionable=True`, the default since JAX 0.5), written with ordinary
lax integer ops so that every transform handles it with no special rule. This module imports
only the public lax/numpy layers and must not import `funcgrad.nn`.

    >>> key = PRNGKey(0)
    >>> k1, k2 = split(key)
    >>> uniform(k1, (3,)).shape
    (3,)
"""

import math
import operator
import os
from collections.abc import Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.core import concrete_value, get_aval
from funcgrad.errors import (
    FuncgradTypeError,
    FuncgradValueError,
    memory_error,
    op_error,
    short_repr,
)

__all__ = [
    "PRNGKey", "bernoulli", "bits", "categorical", "choice", "exponential", "fold_in",
    "gumbel", "key", "key_data", "normal", "permutation", "randint", "split", "threefry2x32",
    "truncated_normal", "uniform",
]

_U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


# --- the Threefry-2x32 block cipher ---------------------------------------------------------
def _u32(v):
    return np.uint32(v & 0xFFFFFFFF)


def _rotate_left(x, r):
    # (x << r) | (x >> (32 - r)) on uint32: constant in-range shifts, which fuse on every tier
    return lax.bitwise_or(lax.shift_left(x, _u32(r)), lax.shift_right_logical(x, _u32(32 - r)))


def _apply_round(a, b, r):
    a = lax.add(a, b)
    return a, lax.bitwise_xor(a, _rotate_left(b, r))


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of the counter words `(x1, x2)` under key `(k1, k2)`.

    All arguments are uint32; rank-0 arguments broadcast against the others. This is JAX's
    `threefry2x32_p`, built from uint32 adds (wrapping), rotations and xors.

    Args:
        k1, k2: the two key words.
        x1, x2: the two counter words (arrays of one shape, or rank 0).

    Returns:
        The pair of hashed words `(y1, y2)`, each with the broadcast shape.

    Example:
        >>> [int(v) for v in threefry2x32(np.uint32(0), np.uint32(0), np.uint32(0),
        ...                               np.uint32(0))]
        [1797259609, 2579123966]
    """
    ks = (k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), np.uint32(0x1BD11BDA)))
    a, b = lax.add(x1, ks[0]), lax.add(x2, ks[1])
    for i in range(5):  # five blocks of four rounds, each followed by a key injection
        for r in _ROTATIONS[i % 2]:
            a, b = _apply_round(a, b, r)
        a = lax.add(a, ks[(i + 1) % 3])
        b = lax.add(lax.add(b, ks[(i + 2) % 3]), np.uint32(i + 1))
    return a, b


# --- keys -----------------------------------------------------------------------------------
def _check_key(op, key):
    """The key as a funcgrad uint32[2] array (or tracer); a clear error otherwise."""
    key = fnp.asarray(key)
    if key.dtype != _U32 or key.shape != (2,):
        hint = ("keys come from funcgrad.random.PRNGKey(seed); to use a batch of keys, "
                "vmap over them") if key.ndim > 1 else "make keys with PRNGKey(seed)"
        raise op_error(f"random.{op}", f"expected a single key, a uint32[2] array; got "
                       f"{key.dtype}{list(key.shape)}", hint=hint)
    return key


def _key_words(key):
    return (lax.reshape(lax.slice(key, (0,), (1,)), ()),
            lax.reshape(lax.slice(key, (1,), (2,)), ()))


def _unstack(keys):
    """The rows of a `(2, 2)` key array as two keys."""
    return [lax.reshape(lax.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in (0, 1)]


def _pack(y1, y2):
    """Stack two word arrays of shape S into keys of shape S + (2,)."""
    shape = tuple(y1.shape) + (1,)
    return lax.concatenate([lax.reshape(y1, shape), lax.reshape(y2, shape)], len(shape) - 1)


def PRNGKey(seed):  # noqa: N802  (JAX's name)
    """A key from an integer seed: `uint32[2]` `[hi, lo]` words of the seed.

    A 32-bit seed (or a Python int while x64 is off, taken modulo 2**32 as JAX does) gives
    `[0, seed mod 2**32]`; a 64-bit seed (x64 on) gives its high and low words.

    Args:
        seed: a Python int or an integer scalar array (may be traced).

    Returns:
        A `uint32[2]` key.

    Raises:
        TypeError: when `seed` is not an integer scalar.

    Example:
        >>> np.asarray(PRNGKey(42)).tolist()
        [0, 42]
    """
    if isinstance(seed, (bool, float, complex)):
        raise op_error("random.PRNGKey", f"the seed must be an integer, got {short_repr(seed)}")
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, np.ndarray):
        wide = dtypes.canonicalize(np.int64) == np.int64
        s = int(seed) % 2**64 if wide else int(seed) % 2**32
        return fnp.asarray(np.array([s >> 32, s & 0xFFFFFFFF], _U32))
    seed = fnp.asarray(seed)
    if seed.ndim != 0 or dtypes.kind(seed.dtype) not in "iu":
        raise op_error("random.PRNGKey", f"the seed must be an integer scalar, got "
                       f"{seed.dtype}{list(seed.shape)}")
    if seed.dtype.itemsize == 8:  # integer conversions wrap: this reads the two's complement
        u = lax.convert_element_type(seed, np.uint64)
        hi = lax.convert_element_type(lax.div(u, np.uint64(2**32)), _U32)
        return _pack(hi, lax.convert_element_type(u, _U32))
    lo = lax.convert_element_type(seed, _U32)
    return _pack(lax.full_like(lo, 0), lo)


# JAX's `key` makes a typed key array; funcgrad keys are always the raw uint32[2] words.
key = PRNGKey


def key_data(keys):
    """The raw `uint32` words of `keys` (funcgrad keys are already raw: the identity)."""
    return fnp.asarray(keys)


def _counters(shape):
    """JAX's `iota_2x32_shape`: (hi, lo) words of the row-major 64-bit index of each element.
    The hi words are zero for any array that fits in memory; it is returned as a rank-0 zero."""
    size = math.prod(shape)
    if size >= 2**32:
        raise op_error("random", f"cannot draw {size} values (shape {shape}) at once; the "
                       "counter layout supports fewer than 2**32", cls=FuncgradValueError)
    if not shape:
        return np.uint32(0), np.uint32(0)
    # A numpy constant rather than `lax.iota`: jit's simplify pass currently fails on
    # zero-operand equations too large to constant-fold (reported with random's tests).
    return np.uint32(0), fnp.asarray(np.arange(size, dtype=_U32).reshape(shape))


def _hash_counters(key, shape):
    k1, k2 = _key_words(key)
    return threefry2x32(k1, k2, *_counters(shape))


def _shape(op, shape):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise op_error(f"random.{op}", f"shape must be a sequence of ints, got "
                       f"{short_repr(shape)}", cls=FuncgradTypeError) from None
    if any(d < 0 for d in shape):
        raise op_error(f"random.{op}", f"negative dimensions are not allowed: {shape}",
                       cls=FuncgradValueError)
    # The draw needs at least its uint32 counters; beyond the machine's memory it cannot run.
    if math.prod(shape) * 4 > _physical_memory():
        raise memory_error(f"random.{op}", [(shape, np.dtype(np.uint32))])
    return shape


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not a POSIX system: numpy will tell
        return float("inf")


def split(key, num=2):
    """Split a key into `num` new independent keys (shape `(num, 2)`; `num` may be a shape).

    Example:
        >>> np.asarray(split(PRNGKey(0))).tolist()
        [[1797259609, 2579123966], [928981903, 3453687069]]
    """
    key = _check_key("split", key)
    shape = _shape("split", num)
    if not shape:
        return key
    y1, y2 = _hash_counters(key, shape)
    return _pack(y1, y2)


def fold_in(key, data):
    """A new key from `key` and a 32-bit integer `data` (e.g. a step or layer index).

    Example:
        >>> np.asarray(fold_in(PRNGKey(0), 1)).shape
        (2,)
    """
    key = _check_key("fold_in", key)
    if isinstance(data, (int, np.integer)) and not isinstance(data, np.ndarray):
        d = np.uint32(int(data) % 2**32)
    else:
        d = fnp.asarray(data)
        if d.ndim != 0 or dtypes.kind(d.dtype) not in "iub":
            raise op_error("random.fold_in", f"data must be an integer scalar, got "
                           f"{d.dtype}{list(d.shape)}")
        d = lax.convert_element_type(d, _U32)
    k1, k2 = _key_words(key)
    y1, y2 = threefry2x32(k1, k2, np.uint32(0), d)
    return _pack(y1, y2)


def _random_bits(key, bit_width, shape):
    y1, y2 = _hash_counters(key, shape)
    if bit_width == 64:
        hi = lax.convert_element_type(y1, np.uint64)
        return lax.bitwise_or(lax.mul(hi, np.uint64(2**32)), lax.convert_element_type(y2,
                                                                                       np.uint64))
    out = lax.bitwise_xor(y1, y2)
    return out if bit_width == 32 else lax.convert_element_type(out, _UINT[bit_width])


def bits(key, shape=(), dtype=None):
    """Uniform random bits of an unsigned integer dtype (default uint32).

    Example:
        >>> bits(PRNGKey(0), (2,)).dtype
        dtype('uint32')
    """
    key = _check_key("bits", key)
    dtype = np.dtype(dtype or dtypes.default_uint())
    if dtypes.kind(dtype) != "u":
        raise op_error("random.bits", f"dtype must be an unsigned integer type, got {dtype}")
    dtype = dtypes.canonicalize(dtype)
    return _random_bits(key, dtype.itemsize * 8, _shape("bits", shape))


# --- continuous samplers ----------------------------------------------------------------------
def _float_dtype(op, dtype):
    dtype = np.dtype(dtype) if dtype is not None else dtypes.default_float()
    if dtypes.kind(dtype) != "f":
        raise op_error(f"random.{op}", f"dtype must be a floating type, got {dtype}")
    return dtypes.canonicalize(dtype)


def _bounds(op, v, dtype, shape):
    v = fnp.asarray(v, dtype=dtype)
    if v.ndim > len(shape) or not all(a in (1, b) for a, b in zip(v.shape[::-1],
                                                                 shape[::-1])):
        raise op_error(f"random.{op}", f"bound of shape {tuple(v.shape)} does not broadcast "
                       f"to the sample shape {tuple(shape)}", cls=FuncgradValueError)
    return fnp.broadcast_to(v, shape) if v.ndim else v


def _uniform(key, shape, dtype, minval, maxval):
    finfo = np.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    rng_bits = nbits if nmant >= 8 else 8  # JAX draws 8 bits for bfloat16's 7-bit mantissa
    rbits = _random_bits(key, rng_bits, shape)
    # Keep the top `nmant` bits as the mantissa of a float in [1, 2): a right shift.
    uint = _UINT[nbits]
    if rng_bits != nbits:
        rbits = lax.convert_element_type(rbits, uint)
    mant = lax.shift_right_logical(rbits, uint.type(rng_bits - nmant))
    one_bits = uint.type(np.array(1.0, dtype).view(uint))
    floats = lax.sub(lax.bitcast_convert_type(lax.bitwise_or(mant, one_bits), dtype),
                     dtype.type(1.0))
    scaled = lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval)
    return lax.max(minval, scaled)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in `[minval, maxval)` (JAX's mantissa construction, bit for bit).

    With the default bounds the numbers equal JAX's bit for bit. For other bounds JAX's
    compiled `u * (maxval - minval) + minval` is usually contracted into one fused
    multiply-add; funcgrad rounds the product and the sum separately, so the two may differ
    in the last bit.

    Args:
        key: a `uint32[2]` key.
        shape: the sample shape.
        dtype: a float dtype (default float32, float64 with x64).
        minval, maxval: bounds broadcastable to `shape`.

    Example:
        >>> float(uniform(PRNGKey(0), minval=2.0, maxval=3.0)) >= 2.0
        True
    """
    key = _check_key("uniform", key)
    dtype, shape = _float_dtype("uniform", dtype), _shape("uniform", shape)
    lo, hi = (_bounds("uniform", v, dtype, shape) for v in (minval, maxval))
    return _uniform(key, shape, dtype, lo, hi)


def normal(key, shape=(), dtype=None):
    """Standard normal samples: `sqrt(2) * erf_inv(u)` with `u` uniform in (-1, 1).

    Example:
        >>> normal(PRNGKey(0), (2, 3)).shape
        (2, 3)
    """
    key = _check_key("normal", key)
    dtype, shape = _float_dtype("normal", dtype), _shape("normal", shape)
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, lo, dtype.type(1.0))
    return lax.mul(dtype.type(np.sqrt(2)), lax.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples truncated to the open interval `(lower, upper)`.

    Args:
        key: a `uint32[2]` key.
        lower, upper: bounds (scalars or arrays broadcastable to `shape`).
        shape: the sample shape (default: the broadcast shape of the bounds).
        dtype: a float dtype.

    Example:
        >>> bool(abs(truncated_normal(PRNGKey(0), -1.0, 1.0, (100,))).max() < 1.0)
        True
    """
    key = _check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    lower, upper = fnp.asarray(lower, dtype=dtype), fnp.asarray(upper, dtype=dtype)
    shape = (fnp.broadcast_shapes(lower.shape, upper.shape) if shape is None
             else _shape("truncated_normal", shape))
    sqrt2 = dtype.type(np.sqrt(2))
    a = _bounds("truncated_normal", lax.erf(lax.div(lower, sqrt2)), dtype, shape)
    b = _bounds("truncated_normal", lax.erf(lax.div(upper, sqrt2)), dtype, shape)
    out = lax.mul(sqrt2, lax.erf_inv(_uniform(key, shape, dtype, a, b)))
    lo = lax.nextafter(lax.stop_gradient(lower), fnp.full(lower.shape, np.inf, dtype))
    hi = lax.nextafter(lax.stop_gradient(upper), fnp.full(upper.shape, -np.inf, dtype))
    return fnp.clip(out, lo, hi)


def bernoulli(key, p=0.5, shape=None):
    """Boolean samples that are True with probability `p` (`uniform(key, shape) < p`).

    Example:
        >>> bernoulli(PRNGKey(0), 0.3, (4,)).dtype
        dtype('bool')
    """
    key = _check_key("bernoulli", key)
    p = fnp.asarray(p)
    if dtypes.kind(p.dtype) != "f":
        raise op_error("random.bernoulli", f"p must have a floating dtype, got {p.dtype}")
    shape = tuple(p.shape) if shape is None else _shape("bernoulli", shape)
    u = _uniform(key, shape, p.dtype, *(_bounds("bernoulli", v, p.dtype, shape)
                                        for v in (0.0, 1.0)))
    return lax.lt(u, _bounds("bernoulli", p, p.dtype, shape))


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel samples `-log(-log(u))` (JAX's default "low" mode).

    Example:
        >>> gumbel(PRNGKey(0), (3,)).shape
        (3,)
    """
    key = _check_key("gumbel", key)
    dtype, shape = _float_dtype("gumbel", dtype), _shape("gumbel", shape)
    tiny = dtype.type(np.finfo(dtype).tiny)
    u = _uniform(key, shape, dtype, tiny, dtype.type(1.0))
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def exponential(key, shape=(), dtype=None):
    """Standard exponential samples `-log1p(-u)`.

    Example:
        >>> bool(exponential(PRNGKey(0), (5,)).min() >= 0)
        True
    """
    key = _check_key("exponential", key)
    dtype, shape = _float_dtype("exponential", dtype), _shape("exponential", shape)
    u = _uniform(key, shape, dtype, dtype.type(0.0), dtype.type(1.0))
    return lax.neg(lax.log1p(lax.neg(u)))


def categorical(key, logits, axis=-1, shape=None):
    """Samples of class indices from unnormalized log-probabilities (Gumbel-max).

    Args:
        key: a `uint32[2]` key.
        logits: log-probabilities along `axis` (any shift is allowed).
        axis: the class axis.
        shape: sample shape; must end with the batch shape of `logits` (default: it).

    Returns:
        int32 indices of shape `shape`.

    Example:
        >>> int(categorical(PRNGKey(0), fnp.array([-1e9, 0.0, -1e9])))
        1
    """
    key = _check_key("categorical", key)
    logits = fnp.asarray(logits)
    axis = axis + logits.ndim if axis < 0 else axis
    batch_shape = tuple(np.delete(logits.shape, axis))
    shape = batch_shape if shape is None else _shape("categorical", shape)
    if shape[len(shape) - len(batch_shape):] != batch_shape:
        raise op_error("random.categorical", f"shape {shape} must end with the batch shape "
                       f"{batch_shape} of logits {tuple(logits.shape)}", cls=FuncgradValueError)
    prefix = shape[:len(shape) - len(batch_shape)]
    g_shape = list(shape[len(prefix):])
    g_shape.insert(axis, logits.shape[axis])
    g = gumbel(key, (*prefix, *g_shape), logits.dtype)
    return fnp.argmax(g + fnp.expand_dims(logits, tuple(range(len(prefix)))),
                      axis=axis + len(prefix))


# --- integers and permutations ----------------------------------------------------------------
def _clip_int(v, dtype):
    """Convert integer `v` to `dtype`, clipping into its range instead of wrapping."""
    info_v, info_d = np.iinfo(v.dtype), np.iinfo(dtype)
    lo = v.dtype.type(max(info_v.min, info_d.min))
    hi = v.dtype.type(min(info_v.max, info_d.max))
    return lax.convert_element_type(lax.clamp(lo, v, hi), dtype)


def _int_bound(v):
    v = fnp.asarray(v)
    return v if dtypes.kind(v.dtype) in "iu" else v.astype(dtypes.default_int())


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in `[minval, maxval)`, JAX's algorithm (two `nbits` draws reduced
    modulo the span), bit for bit.

    Args:
        key: a `uint32[2]` key.
        shape: the sample shape.
        minval, maxval: bounds broadcastable to `shape` (clipped to the dtype's range; when
            `maxval <= minval` the result is `minval`).
        dtype: an integer dtype (default int32, int64 with x64).

    Example:
        >>> bool((randint(PRNGKey(0), (50,), 3, 7) >= 3).all())
        True
    """
    key = _check_key("randint", key)
    shape = _shape("randint", shape)
    dtype = dtypes.canonicalize(np.dtype(dtype or dtypes.default_int()))
    if dtypes.kind(dtype) not in "iu":
        raise op_error("random.randint", f"dtype must be an integer type, got {dtype}")
    minval, maxval = _int_bound(minval), _int_bound(maxval)
    info = np.iinfo(dtype)
    if info.bits < 32:  # as JAX: sample 8/16-bit values in int32 (less modulo bias), then cast
        i32 = np.dtype(np.int32)
        lo = fnp.clip(minval.astype(i32), int(info.min), int(info.max))
        hi = fnp.clip(maxval.astype(i32), int(info.min), int(info.max) + 1)
        return _randint(key, shape, lo, hi, i32).astype(dtype)
    return _randint(key, shape, minval, maxval, dtype)


def _randint(key, shape, minval, maxval, dtype):
    top = _clip_int(fnp.asarray(np.array(np.iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, top)
    lo = _bounds("randint", _clip_int(minval, dtype), dtype, shape)
    hi = _bounds("randint", _clip_int(maxval, dtype), dtype, shape)
    oor = _bounds("randint", maxval_out_of_range, np.dtype(bool), shape)
    nbits = dtype.itemsize * 8
    k1, k2 = _unstack(split(key))
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    udt = _UINT[nbits]
    span = lax.convert_element_type(lax.sub(hi, lo), udt)
    span = lax.select_n(lax.le(hi, lo), span, lax.full_like(span, 1))
    span = lax.select_n(lax.bitwise_and(oor, lax.gt(hi, lo)), span,
                        lax.add(span, udt.type(1)))
    multiplier = lax.rem(lax.full_like(span, 2 ** (nbits // 2)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    return lax.add(lo, lax.convert_element_type(lax.rem(offset, span), dtype))


def _shuffle(key, x, axis):
    num_rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(num_rounds):
        key, subkey = _unstack(split(key))
        _, x = lax.sort_key_val(_random_bits(subkey, 32, tuple(x.shape)), x, axis)
    return x


def _static_int(op, x):
    v = concrete_value(x)
    if v is None:
        raise op_error(f"random.{op}", "an integer count must be concrete (not traced)",
                       hint="pass a Python int, or an array to shuffle")
    return int(v)


def permutation(key, x, axis=0, independent=False):
    """A random permutation of `arange(x)` (int `x`) or of `x` along `axis`.

    With `independent=True` every slice along `axis` is shuffled on its own; otherwise whole
    slices move together (JAX's sort-based `_shuffle`, bit for bit).

    Example:
        >>> sorted(np.asarray(permutation(PRNGKey(0), 5)).tolist())
        [0, 1, 2, 3, 4]
    """
    key = _check_key("permutation", key)
    if get_aval(x).ndim == 0:
        if dtypes.kind(get_aval(x).dtype) not in "iu":
            raise op_error("random.permutation", "x must be an integer or an array of rank >= 1")
        return _shuffle(key, fnp.arange(_static_int("permutation", x)), 0)
    x = fnp.asarray(x)
    axis = axis + x.ndim if axis < 0 else axis
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, fnp.arange(x.shape[axis]), 0)
    return fnp.take(x, ind, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random samples from `arange(a)` (int `a`) or from `a` along `axis`.

    Args:
        key: a `uint32[2]` key.
        a: an int or an array.
        shape: the sample shape.
        replace: sample with replacement (default) or without.
        p: optional probabilities (1-D, one per candidate).
        axis: the axis of `a` to sample along.

    Example:
        >>> choice(PRNGKey(0), 10, (3,), replace=False).shape
        (3,)
    """
    key = _check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise op_error("random.choice", f"shape must be a sequence, got {short_repr(shape)}")
    shape = tuple(shape)
    arr = fnp.asarray(a)
    if arr.ndim == 0:
        n = _static_int("choice", a)
    else:
        axis = axis + arr.ndim if axis < 0 else axis
        n = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return fnp.zeros(shape, arr.dtype)
    if n <= 0:
        raise op_error("random.choice", "a must be greater than 0 unless no samples are "
                       "taken", cls=FuncgradValueError)
    if not replace and n_draws > n:
        raise op_error("random.choice", f"cannot take a larger sample (size {n_draws}) than "
                       f"the population (size {n}) when replace=False", cls=FuncgradValueError)
    if p is None and replace:
        ind = randint(key, shape, 0, n)
    elif p is None:  # the first draws of a permutation (the same as permuting `a` itself)
        ind = permutation(key, n)[:n_draws]
    else:
        ind = _choice_p(key, n, shape, replace, p)
    result = ind if arr.ndim == 0 else fnp.take(arr, ind.reshape(-1), axis=axis)
    return result.reshape(shape if arr.ndim == 0 else
                          arr.shape[:axis] + shape + arr.shape[axis + 1:])


def _choice_p(key, n, shape, replace, p):
    p = fnp.asarray(p)
    if dtypes.kind(p.dtype) != "f":
        p = p.astype(dtypes.default_float())
    if tuple(p.shape) != (n,):
        raise op_error("random.choice", f"p must be None or a 1-D vector with the same size "
                       f"as a.shape[axis] ({n}); got shape {tuple(p.shape)}",
                       cls=FuncgradValueError)
    if replace:
        cdf = fnp.cumsum(p)
        r = cdf[-1] * (1 - uniform(key, shape, dtype=p.dtype))
        return fnp.searchsorted(cdf, r).astype(dtypes.default_int())
    g = gumbel(key, (n,), dtype=p.dtype) + fnp.log(p)
    return lax.top_k(g, math.prod(shape))[1].astype(dtypes.default_int())
