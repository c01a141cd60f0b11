"""XLA's random-bit operations of lax: `rng_bit_generator` (a pure function of a key: the
Philox-4x32-10 generator, built from lax's integer ops) and `rng_uniform` (XLA's stateful
RngUniform: a primitive with a side effect, drawing from a generator this module owns).

`funcgrad.random` (threefry, JAX's bits) is what programs should use; these exist for code
written against lax. XLA leaves the bits of both unspecified across platforms; funcgrad's
are its own (documented in the JAX-differences table). Imports lax siblings and core.
"""

import enum

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ArrayBase, Primitive, ShapedArray, get_aval, to_array
from funcgrad.interpreters import ad, batching
from funcgrad.lax.bit_ops import mulhi
from funcgrad.lax.elementwise import add, convert_element_type, div, floor, mul, sub
from funcgrad.lax.logic import bitwise_and, bitwise_xor, shift_left, shift_right_logical
from funcgrad.lax.shape import broadcast_in_dim, full, iota, reshape
from funcgrad.lax.slicing import concatenate, slice_in_dim
from funcgrad.lax.utils import static_ints

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_uniform", "rng_uniform_p"]


class RandomAlgorithm(enum.IntEnum):
    """The bit generator of `rng_bit_generator` (XLA's names; funcgrad runs Philox for
    RNG_DEFAULT and RNG_PHILOX)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


_U32 = np.dtype(np.uint32)
_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox-4x32 multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # and key increments (Salmon et al., SC'11)


def _c(v, shape):
    return full(shape, v, _U32)


def _philox(counter, key):
    """Philox-4x32-10 on counter words (4 arrays) and key words (2 arrays)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    shape = get_aval(c0).shape
    for _ in range(10):
        m0, m1 = _c(_M0, shape), _c(_M1, shape)
        hi0, lo0 = mulhi(m0, c0), mul(m0, c0)
        hi1, lo1 = mulhi(m1, c2), mul(m1, c2)
        c0, c1, c2, c3 = (bitwise_xor(bitwise_xor(hi1, c1), k0), lo1,
                          bitwise_xor(bitwise_xor(hi0, c3), k1), lo0)
        k0, k1 = add(k0, _c(_W0, shape)), add(k1, _c(_W1, shape))
    return [c0, c1, c2, c3]


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """`(new_key, bits)`: random bits of `shape` and unsigned `dtype` (8 to 64 bits) from a
    uint32[4] `key` (key words 0-1, counter words 2-3), and the key to use next (its counter
    advanced past the blocks used). A pure function: the same key gives the same bits.

    Example:
        >>> key, bits = rng_bit_generator(fnp.array([1, 2, 3, 4], fnp.uint32), (2,))
        >>> key
        Array([1, 2, 4, 4], dtype=uint32)
    """
    if out_sharding is not None:
        raise errors.op_error("rng_bit_generator", "out_sharding is not supported")
    try:
        algorithm = RandomAlgorithm(algorithm)
    except Exception as e:  # noqa: BLE001
        raise errors.op_error("rng_bit_generator", f"algorithm must be a RandomAlgorithm, got "
                              f"{errors.short_repr(algorithm)}",
                              cls=errors.FuncgradValueError) from e
    if algorithm == RandomAlgorithm.RNG_THREE_FRY:
        raise errors.op_error("rng_bit_generator", "RNG_THREE_FRY is not implemented here; "
                              "use RNG_DEFAULT or RNG_PHILOX (or funcgrad.random, threefry "
                              "with JAX's bits)", cls=errors.FuncgradValueError)
    key = key if isinstance(key, ArrayBase) else to_array(np.asarray(key, np.uint32))
    kav = get_aval(key)
    if kav.shape != (4,) or kav.dtype != _U32:
        raise errors.op_error("rng_bit_generator", f"key must be uint32[4], got {kav}",
                              cls=errors.FuncgradTypeError)
    shape = static_ints("rng_bit_generator", shape, "shape")
    dt = dtypes.as_dtype(dtype)
    if dt.kind != "u" or dt.itemsize not in (1, 2, 4, 8):
        raise errors.op_error("rng_bit_generator", f"dtype must be an unsigned integer type, "
                              f"got {dt}", cls=errors.FuncgradTypeError)
    count = int(np.prod(shape, dtype=np.int64))
    words = -(-count * dt.itemsize // 4)
    blocks = max(-(-words // 4), 1)
    k = [reshape(slice_in_dim(key, i, i + 1), ()) for i in range(4)]
    b = (blocks,)
    counter = [iota(_U32, blocks), _c(0, b), broadcast_in_dim(k[2], b, ()),
               broadcast_in_dim(k[3], b, ())]
    out = _philox(counter, [broadcast_in_dim(k[0], b, ()), broadcast_in_dim(k[1], b, ())])
    flat = reshape(concatenate([reshape(o, (blocks, 1)) for o in out], 1), (4 * blocks,))
    bits = _as_dtype(slice_in_dim(flat, 0, words), dt, count)
    new_key = concatenate([slice_in_dim(key, 0, 2),
                           reshape(add(k[2], full((), blocks % 2 ** 32, _U32)), (1,)),
                           slice_in_dim(key, 3, 4)], 0)
    return new_key, reshape(bits, shape)


def _as_dtype(words, dt, count):
    """`count` values of unsigned `dt` from uint32 `words` (little-endian bytes)."""
    if dt.itemsize == 4:
        return words
    if dt.itemsize == 8:
        pairs = reshape(words, (count, 2))
        lo = convert_element_type(reshape(slice_in_dim(pairs, 0, 1, 1, 1), (count,)), dt)
        hi = convert_element_type(reshape(slice_in_dim(pairs, 1, 2, 1, 1), (count,)), dt)
        return add(lo, shift_left(hi, full((), 32, dt)))
    per = 4 // dt.itemsize
    n = get_aval(words).shape[0]
    parts = [shift_right_logical(words, full((), 8 * dt.itemsize * i, _U32))
             for i in range(per)]
    lanes = concatenate([reshape(p, (n, 1)) for p in parts], 1)
    mask = full((), (1 << (8 * dt.itemsize)) - 1, _U32)
    small = convert_element_type(bitwise_and(lanes, mask), dt)
    return slice_in_dim(reshape(small, (n * per,)), 0, count)


# --- rng_uniform ------------------------------------------------------------------------------
_GENERATOR = np.random.default_rng()  # XLA's RngUniform is stateful: this is its state


def rng_uniform(a, b, shape):
    """Random numbers uniform in [a, b) (scalars of one dtype) of `shape`, different at every
    call, also under jit: XLA's stateful RngUniform (JAX discourages it: use
    funcgrad.random).

    Example:
        >>> rng_uniform(0.0, 1.0, (3,)).shape
        (3,)
    """
    a = a if isinstance(a, ArrayBase) else to_array(a)
    b = b if isinstance(b, ArrayBase) else to_array(b)
    return rng_uniform_p.bind(a, b, shape=static_ints("rng_uniform", shape, "shape"))


def _rng_uniform_abstract(a, b, *, shape):
    if a.dtype != b.dtype or a.shape != () or b.shape != () or a.dtype.kind not in "fiu":
        raise errors.op_error("rng_uniform", f"a and b must be scalars of one numeric dtype, "
                              f"got {a} and {b}", cls=errors.FuncgradTypeError)
    return ShapedArray(shape, a.dtype, False)


def _rng_uniform_impl(a, b, *, shape):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu":
        return _GENERATOR.integers(a, b, size=shape, dtype=a.dtype, endpoint=False)
    u = _GENERATOR.random(size=shape).astype(a.dtype)
    return np.minimum(a + (b - a) * u, np.nextafter(b, a))


def _rng_uniform_jvp(primals, out, tangents, *, shape):
    a, b = primals
    ta, tb = (ad.instantiate(t) for t in tangents)
    frac = div(sub(out, a), sub(b, a))  # the draw u, read back from the output
    return add(ta, mul(sub(tb, ta), frac))


def _rng_uniform_batch(args, dims, *, shape):
    """One draw of (batch,) + shape in [0, 1), scaled per example."""
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    dt = get_aval(args[0]).dtype
    a, b = (broadcast_in_dim(batching.bdim_at_front(x, d, size), (size,) + shape, (0,))
            for x, d in zip(args, dims))
    ft = dt if dt.kind == "f" else np.dtype(np.float64)
    u = rng_uniform_p.bind(full((), 0, ft), full((), 1, ft), shape=(size,) + shape)
    if dt.kind == "f":
        return add(a, mul(sub(b, a), u)), 0
    span = convert_element_type(sub(b, a), ft)
    return add(a, convert_element_type(floor(mul(span, u)), dt)), 0


rng_uniform_p = Primitive("rng_uniform")
rng_uniform_p.def_impl(_rng_uniform_impl)
rng_uniform_p.def_abstract_eval(_rng_uniform_abstract)
rng_uniform_p.effectful = True
ad.jvp_rules[rng_uniform_p] = _rng_uniform_jvp
batching.batch_rules[rng_uniform_p] = _rng_uniform_batch

