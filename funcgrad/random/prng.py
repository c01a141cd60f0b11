"""The Threefry-2x32 generator on raw key data: the cipher, JAX's counter layout, random bits,
split and fold_in.

Everything here is a function of a raw `uint32[2]` key (an Array or a tracer) written with
lax integer ops, so every transform handles it with no special rule and jit fuses the 20
rounds into one kernel. JAX's default "partitionable" layout (`jax_threefry_partitionable`,
the default since JAX 0.5) is the contract: the numbers equal `jax.random`'s bit for bit.
Typed keys, argument checks and the public functions live in `keys.py`; this module imports
only lax and the array layer.
"""

import math

import numpy as np

from funcgrad import lax
from funcgrad.errors import FuncgradValueError, op_error

U32 = np.dtype(np.uint32)
UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: U32, 64: np.dtype(np.uint64)}
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


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


def key_words(key):
    """The two words of a key: a raw `uint32[2]` key's, as rank-0 arrays, or a pair of word
    arrays `(k1, k2)` as given. Inside samplers keys travel as such pairs (no array is
    packed and unpacked again, so loops over keys stay fused kernels): rank-0 words are one
    key; words of shape S are a batch of keys, one value drawn from each (`shape` is `()`)."""
    if isinstance(key, tuple):
        return key
    return (lax.reshape(lax.slice(key, (0,), (1,)), ()),
            lax.reshape(lax.slice(key, (1,), (2,)), ()))


def pack(y1, y2):
    """Stack two word arrays of shape S into raw keys of shape S + (2,)."""
    shape = tuple(y1.shape) + (1,)
    return lax.concatenate([lax.reshape(y1, shape), lax.reshape(y2, shape)], len(shape) - 1)


def _counters(shape):
    """JAX's `iota_2x32_shape`: (hi, lo) words of the row-major 64-bit index of each element.
    The hi words are zero for any array that fits in memory; it is returned as a rank-0 zero."""
    size = math.prod(shape)
    if size >= 2**32:
        raise op_error("random", f"cannot draw {size} values (shape {shape}) at once; the "
                       "counter layout supports fewer than 2**32", cls=FuncgradValueError)
    if not shape:
        return np.uint32(0), np.uint32(0)
    # computed, not a constant: a program kept in the cache holds no array of the draw's size
    return np.uint32(0), lax.reshape(lax.iota(U32, size), shape)


def hash_counters(key, shape):
    """The two hashed words of every element of `shape` under a raw key."""
    k1, k2 = key_words(key)
    return threefry2x32(k1, k2, *_counters(shape))


def random_bits(key, bit_width, shape):
    """Uniform unsigned integers of `bit_width` bits (8, 16, 32 or 64) and `shape`."""
    y1, y2 = hash_counters(key, shape)
    if bit_width == 64:
        hi = lax.convert_element_type(y1, np.uint64)
        return lax.bitwise_or(lax.mul(hi, np.uint64(2**32)),
                              lax.convert_element_type(y2, np.uint64))
    out = lax.bitwise_xor(y1, y2)
    return out if bit_width == 32 else lax.convert_element_type(out, UINT[bit_width])


def split2(key, n=2):
    """`n` keys split from `key` (a raw key or a pair of words), as a list of word pairs:
    the words of `split(key, n)`'s rows, and for a batch of keys the same for each."""
    k1, k2 = key_words(key)
    if k1.ndim:
        return [threefry2x32(k1, k2, np.uint32(0), np.uint32(i)) for i in range(n)]
    y1, y2 = hash_counters((k1, k2), (n,))
    return [(lax.reshape(lax.slice(y1, (i,), (i + 1,)), ()),
             lax.reshape(lax.slice(y2, (i,), (i + 1,)), ())) for i in range(n)]
