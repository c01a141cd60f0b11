"""The basic samplers: `bits`, `uniform`, `normal`, `truncated_normal`, `bernoulli`,
`exponential`, `gumbel` and `randint`, each JAX's algorithm on Threefry bits.

Each public function checks its arguments and runs its body (a `compiled` function of the
key) as one jitted program; other samplers' bodies call the plain functions the bodies are
made of (`uniform_floats`, `normal_floats`, ...). The shuffling and sampling of existing
arrays (`permutation`, `choice`, `categorical`) live in `selection.py`; distributions built
on these in `distributions.py`, `discrete.py` and `gamma_family.py`.
"""

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax
from funcgrad.errors import FuncgradValueError, op_error
from funcgrad.random import prng
from funcgrad.random.common import (
    GUMBEL_MODES,
    check_mode,
    check_shape,
    compiled,
    float_dtype,
    int_dtype,
    param,
    sample_shape,
)
from funcgrad.random.keys import unwrap


# --- bits and uniform floats -------------------------------------------------------------------
@compiled
def _bits(key, *, bit_width, shape):
    return prng.random_bits(key, bit_width, shape)


def bits(key, shape=(), dtype=None, *, out_sharding=None):
    """Uniform random bits of an unsigned integer dtype (default uint32, uint64 with x64).

    Example:
        >>> bits(PRNGKey(0), (2,)).dtype
        dtype('uint32')
    """
    data, _ = unwrap("bits", key)
    dtype = dtypes.as_dtype(dtype or dtypes.default_uint())
    if dtypes.kind(dtype) != "u":
        raise op_error("random.bits", f"dtype must be an unsigned integer type, got {dtype}")
    dtype = dtypes.canonicalize(dtype)
    return _bits(data, bit_width=dtype.itemsize * 8, shape=check_shape("bits", shape))


def _to_rank(x, shape):
    """`x` broadcast to `shape` (a rank-0 `x` stays rank 0: lax broadcasts it)."""
    return fnp.broadcast_to(x, shape) if x.ndim else x


def uniform_floats(key, shape, dtype, minval, maxval):
    """JAX's `_uniform`: the top `nmant` random bits as a mantissa under the exponent of
    1.0 give a float in [1, 2); minus one, scaled and shifted into `[minval, maxval)`."""
    finfo = np.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    rng_bits = 8 if nmant < 8 else nbits
    rbits = prng.random_bits(key, rng_bits, shape)
    uint = prng.UINT[nbits]
    if rng_bits != nbits:
        rbits = lax.convert_element_type(rbits, uint)
    mant = lax.shift_right_logical(rbits, uint.type(rng_bits - nmant))
    one_bits = uint.type(np.array(1.0, dtype).view(uint))
    floats = lax.sub(lax.bitcast_convert_type(lax.bitwise_or(mant, one_bits), dtype),
                     dtype.type(1.0))
    lo = _to_rank(lax.convert_element_type(minval, dtype), shape)
    hi = _to_rank(lax.convert_element_type(maxval, dtype), shape)
    return lax.max(lo, lax.add(lax.mul(floats, lax.sub(hi, lo)), lo))


@compiled
def _uniform(key, minval, maxval, *, shape, dtype):
    if minval is None:  # the default bounds, as constants
        return unit_uniform(key, shape, dtype)
    return uniform_floats(key, shape, dtype, minval, maxval)


def _check_bound(op, v, shape):
    v = param(op, "a bound", v)
    if v.ndim > len(shape) or not all(a in (1, b) for a, b in zip(v.shape[::-1],
                                                                 shape[::-1])):
        raise op_error(f"random.{op}", f"bound of shape {tuple(v.shape)} does not broadcast "
                       f"to the sample shape {tuple(shape)}", cls=FuncgradValueError)
    return v


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0, *, out_sharding=None):
    """Uniform floats in `[minval, maxval)` (JAX's mantissa construction, bit for bit).

    With the default bounds the numbers equal JAX's bit for bit. For other bounds JAX's
    compiled `u * (maxval - minval) + minval` is usually contracted into one fused
    multiply-add; funcgrad rounds the product and the sum separately, so the two may differ
    in the last bit.

    Args:
        key: a key (`PRNGKey(seed)` or `key(seed)`).
        shape: the sample shape.
        dtype: a float dtype (default float32, float64 with x64).
        minval, maxval: bounds broadcastable to `shape`.
        out_sharding: accepted for JAX's signature; funcgrad arrays live on one device.

    Example:
        >>> float(uniform(PRNGKey(0), minval=2.0, maxval=3.0)) >= 2.0
        True
    """
    data, _ = unwrap("uniform", key)
    dtype, shape = float_dtype("uniform", dtype), check_shape("uniform", shape)
    if _is_number(minval, 0) and _is_number(maxval, 1):
        return _uniform(data, None, None, shape=shape, dtype=dtype)
    lo, hi = (_check_bound("uniform", v, shape) for v in (minval, maxval))
    return _uniform(data, lo, hi, shape=shape, dtype=dtype)


def _is_number(x, value):
    return type(x) in (int, float) and x == value


def unit_uniform(key, shape, dtype, minval=0.0, maxval=1.0):
    """Uniform floats with constant bounds, inside a sampler's body."""
    return uniform_floats(key, shape, dtype, dtype.type(minval), dtype.type(maxval))


# --- normal -------------------------------------------------------------------------------------
def normal_real(key, shape, dtype):
    """JAX's `_normal_real`: `sqrt(2) * erf_inv(u)`, `u` uniform in (-1, 1)."""
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = uniform_floats(key, shape, dtype, lo, dtype.type(1.0))
    return lax.mul(dtype.type(np.sqrt(2)), lax.erf_inv(u))


def normal_floats(key, shape, dtype):
    """Standard normal samples of a real or complex dtype (complex: independent real and
    imaginary parts, each of variance 1/2, as JAX)."""
    if dtypes.kind(dtype) != "c":
        return normal_real(key, shape, dtype)
    key_re, key_im = prng.split2(key)
    real = np.dtype(np.array(0, dtype).real.dtype)
    re, im = (normal_real(k, shape, real).astype(dtype) for k in (key_re, key_im))
    return (re + 1j * im) / np.array(np.sqrt(2), dtype)


@compiled
def _normal(key, *, shape, dtype):
    return normal_floats(key, shape, dtype)


def normal(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard normal samples (real or complex dtype): `sqrt(2) * erf_inv(u)` with `u`
    uniform in (-1, 1), as JAX; equal to JAX's to float32 rounding (the inverse-erf
    implementations differ in the last bits).

    Example:
        >>> normal(PRNGKey(0), (2, 3)).shape
        (2, 3)
    """
    data, _ = unwrap("normal", key)
    dtype = float_dtype("normal", dtype, kinds="fc")
    return _normal(data, shape=check_shape("normal", shape), dtype=dtype)


@compiled
def _truncated_normal(key, lower, upper, *, shape, dtype):
    sqrt2 = dtype.type(np.sqrt(2))
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a, b = lax.erf(lax.div(lower, sqrt2)), lax.erf(lax.div(upper, sqrt2))
    out = lax.mul(sqrt2, lax.erf_inv(uniform_floats(key, shape, dtype, a, b)))
    lo = lax.nextafter(lax.stop_gradient(lower), fnp.full(lower.shape, np.inf, dtype))
    hi = lax.nextafter(lax.stop_gradient(upper), fnp.full(upper.shape, -np.inf, dtype))
    return fnp.clip(out, lo, hi)


def truncated_normal(key, lower, upper, shape=None, dtype=None, *, out_sharding=None):
    """Standard normal samples truncated to the open interval `(lower, upper)`.

    Args:
        key: a key.
        lower, upper: bounds (scalars or arrays broadcastable to `shape`).
        shape: the sample shape (default: the broadcast shape of the bounds).
        dtype: a float dtype.
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> bool(abs(truncated_normal(PRNGKey(0), -1.0, 1.0, (100,))).max() < 1.0)
        True
    """
    data, _ = unwrap("truncated_normal", key)
    dtype = float_dtype("truncated_normal", dtype)
    lower, upper = (param("truncated_normal", n, v) for n, v in (("lower", lower),
                                                                  ("upper", upper)))
    shape = sample_shape("truncated_normal", shape, lower, upper)
    return _truncated_normal(data, lower, upper, shape=shape, dtype=dtype)


# --- bernoulli, exponential, gumbel -------------------------------------------------------------
@compiled
def _bernoulli(key, p, *, shape, mode):
    dtype = p.dtype
    p = _to_rank(p, shape)
    if mode == "high":
        u1, u2 = unit_uniform(key, (2, *shape), dtype)
        u2 = u2 * dtype.type(2.0 ** -np.finfo(dtype).nmant)
        return u2 < p - u1
    return lax.lt(unit_uniform(key, shape, dtype), p)


def bernoulli(key, p=0.5, shape=None, mode="low", *, out_sharding=None):
    """Boolean samples that are True with probability `p` (`uniform(key, shape) < p`).

    Args:
        key: a key.
        p: the probability of True (a float or a float array broadcastable to `shape`).
        shape: the sample shape (default `p`'s shape).
        mode: "low" (one uniform draw; probabilities below about 1e-7 in float32 round
            to 0) or "high" (two draws, about twice the cost, right down to about 1e-14).
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> bernoulli(PRNGKey(0), 0.3, (4,)).dtype
        dtype('bool')
    """
    data, _ = unwrap("bernoulli", key)
    check_mode("bernoulli", mode, ("high", "low"))
    p = param("bernoulli", "p", p, kinds="f")
    shape = sample_shape("bernoulli", shape, p)
    return _bernoulli(data, p, shape=shape, mode=mode)


def rademacher_values(key, shape, dtype):
    """JAX's `_rademacher`: `2 * bernoulli(key, 0.5, shape) - 1` in `dtype` (the coin is
    drawn in the default float dtype, as JAX's weakly typed 0.5 is)."""
    ft = dtypes.default_float()
    heads = lax.lt(unit_uniform(key, shape, ft), ft.type(0.5))
    return (2 * heads.astype(dtype) - 1).astype(dtype)


def exponential_floats(key, shape, dtype):
    """JAX's `_exponential`: `-log1p(-u)`."""
    return lax.neg(lax.log1p(lax.neg(unit_uniform(key, shape, dtype))))


@compiled
def _exponential(key, *, shape, dtype):
    return exponential_floats(key, shape, dtype)


def exponential(key, shape=(), dtype=None, *, out_sharding=None):
    """Standard exponential samples `-log1p(-u)`.

    Example:
        >>> bool(exponential(PRNGKey(0), (5,)).min() >= 0)
        True
    """
    data, _ = unwrap("exponential", key)
    dtype = float_dtype("exponential", dtype)
    return _exponential(data, shape=check_shape("exponential", shape), dtype=dtype)


def _clz32(x):
    """Leading zero bits of uint32 `x`: 32 minus the set bits of `x` smeared rightwards."""
    for s in (1, 2, 4, 8, 16):
        x = lax.bitwise_or(x, lax.shift_right_logical(x, np.uint32(s)))
    return lax.sub(np.uint32(32), lax.population_count(x))


def _safe_int_to_float(hi, lo):
    """JAX's `_safe_int_to_float`: the 64-bit fixed-point fraction `hi:lo` (in [0, 1)) as a
    float32, keeping 24 significant bits however small it is."""
    hiclz, loclz = _clz32(hi), _clz32(lo)
    lo_part = fnp.where(hiclz == 32, lax.shift_left(lo, loclz),
                        lax.shift_right_logical(lo, lax.sub(np.uint32(32), hiclz)))
    mantissa = lax.bitwise_or(lax.shift_left(hi, hiclz), lo_part)
    mantissa = lax.shift_right_logical(mantissa, np.uint32(8))
    mantissa = lax.bitwise_and(mantissa, np.uint32((1 << 23) - 1))
    lead = fnp.where(hiclz == 32, lax.add(np.uint32(32), loclz), hiclz)
    exp = lax.shift_left(lax.sub(np.uint32(126), lead), np.uint32(23))
    exp = lax.bitwise_and(exp, np.uint32((1 << 30) - (1 << 22)))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.dtype(np.float32))


def gumbel_floats(key, shape, dtype, mode):
    """JAX's `_gumbel` in its three modes."""
    info = np.finfo(dtype)
    if dtype == np.float32 and mode == "highest":
        b = prng.random_bits(key, 32, (2, *shape))
        b_hi, b_lo = b[0], b[1]
        n_hi, n_lo = lax.bitwise_not(b_hi), lax.bitwise_not(b_lo)
        # 1 - bits in 64-bit fixed point: add one to the low word, carrying into the high one
        n_hi = n_hi + (n_lo == np.uint32(0xFFFFFFFF)).astype(np.uint32)
        n_lo = n_lo + np.uint32(1)
        flip = b_hi < np.uint32(1 << 31)
        x = _safe_int_to_float(fnp.where(flip, b_hi, n_hi), fnp.where(flip, b_lo, n_lo))
        return fnp.where(flip, -fnp.log(-fnp.log1p(-x)), -fnp.log(-fnp.log(x)))
    if mode in ("high", "highest"):
        high, low = unit_uniform(key, (2, *shape), dtype)
        x = fnp.where(high >= 0.5, high,
                      high + dtype.type(2.0 ** -info.nmant) * low + dtype.type(info.tiny))
        return -fnp.log(-fnp.log1p(-x))
    u = unit_uniform(key, shape, dtype, info.tiny, 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


@compiled
def _gumbel(key, *, shape, dtype, mode):
    return gumbel_floats(key, shape, dtype, mode)


def gumbel(key, shape=(), dtype=None, mode=None, *, out_sharding=None):
    """Standard Gumbel samples.

    Args:
        key: a key.
        shape: the sample shape.
        dtype: a float dtype.
        mode: "low" (default: `-log(-log(u))`), "high" (two uniform draws, accurate far
            into the upper tail) or "highest" (float32: 64 random bits per sample).
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> gumbel(PRNGKey(0), (3,)).shape
        (3,)
    """
    data, _ = unwrap("gumbel", key)
    dtype = float_dtype("gumbel", dtype)
    mode = check_mode("gumbel", "low" if mode is None else mode, GUMBEL_MODES)
    return _gumbel(data, shape=check_shape("gumbel", shape), dtype=dtype, mode=mode)


# --- integers ---------------------------------------------------------------------------------
def _clip_int(v, dtype):
    """Convert integer `v` to `dtype`, clipping into its range instead of wrapping."""
    info_v, info_d = np.iinfo(v.dtype), np.iinfo(dtype)
    lo = v.dtype.type(max(info_v.min, info_d.min))
    hi = v.dtype.type(min(info_v.max, info_d.max))
    return lax.convert_element_type(lax.clamp(lo, v, hi), dtype)


def _int_bound(v):
    return v if dtypes.kind(v.dtype) in "iu" else v.astype(dtypes.default_int())


def randint_ints(key, shape, minval, maxval, dtype):
    """JAX's `_randint`: two `nbits` draws reduced modulo the span (bias ~ span**2 / 2**64)."""
    minval, maxval = _int_bound(fnp.asarray(minval)), _int_bound(fnp.asarray(maxval))
    top = _clip_int(fnp.asarray(np.array(np.iinfo(dtype).max, dtype)), maxval.dtype)
    out_of_range = fnp.broadcast_to(lax.gt(maxval, top), maxval.shape)
    lo = fnp.broadcast_to(_clip_int(minval, dtype), shape)
    hi = fnp.broadcast_to(_clip_int(maxval, dtype), shape)
    oor = fnp.broadcast_to(out_of_range, shape)
    nbits = dtype.itemsize * 8
    k1, k2 = prng.split2(key)
    higher, lower = prng.random_bits(k1, nbits, shape), prng.random_bits(k2, nbits, shape)
    udt = prng.UINT[nbits]
    span = lax.convert_element_type(lax.sub(hi, lo), udt)
    span = lax.select_n(lax.le(hi, lo), span, lax.full_like(span, 1))
    span = lax.select_n(lax.bitwise_and(oor, lax.gt(hi, lo)), span,
                        lax.add(span, udt.type(1)))
    multiplier = lax.rem(lax.full_like(span, 2 ** (nbits // 2)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    return lax.add(lo, lax.convert_element_type(lax.rem(offset, span), dtype))


@compiled
def _randint(key, minval, maxval, *, shape, dtype):
    info = dtypes.iinfo(dtype)
    if info.bits < 32:  # as JAX: sample 8/16-bit values in int32 (less modulo bias), then cast
        i32 = np.dtype(np.int32)
        lo = fnp.clip(_int_bound(minval).astype(i32), int(info.min), int(info.max))
        hi = fnp.clip(_int_bound(maxval).astype(i32), int(info.min), int(info.max) + 1)
        return randint_ints(key, shape, lo, hi, i32).astype(dtype)
    return randint_ints(key, shape, minval, maxval, dtype)


def randint(key, shape, minval, maxval, dtype=None, *, out_sharding=None):
    """Uniform integers in `[minval, maxval)`, JAX's algorithm (two `nbits` draws reduced
    modulo the span), bit for bit.

    Args:
        key: a key.
        shape: the sample shape.
        minval, maxval: bounds broadcastable to `shape` (clipped to the dtype's range; when
            `maxval <= minval` the result is `minval`).
        dtype: an integer dtype (default int32, int64 with x64).
        out_sharding: accepted for JAX's signature (one device).

    Example:
        >>> bool((randint(PRNGKey(0), (50,), 3, 7) >= 3).all())
        True
    """
    data, _ = unwrap("randint", key)
    shape = check_shape("randint", shape)
    dtype = int_dtype("randint", dtype)
    lo, hi = (_check_bound("randint", v, shape) for v in (minval, maxval))
    return _randint(data, lo, hi, shape=shape, dtype=dtype)
