"""Keys: raw `uint32[2]` keys (`PRNGKey`), typed keys (`key`, dtype `key<fry>`), and the
functions on keys (`split`, `fold_in`, `key_data`, `wrap_key_data`, `key_impl`, `key_dtype`,
`clone`).

A typed key array is a `PRNGKeyArray`: a thin pytree node over the two `uint32` words of its
keys, two arrays of the key array's own shape. Being a pytree whose leaves have its shape is
what lets typed keys pass through `jit`, `vmap` (any `in_axes`/`out_axes`), `scan`, `cond`
and `tree_map` with no special rule; the differences from JAX's key arrays are that
`tree_leaves(keys)` shows the two word arrays and that `funcgrad.numpy` functions do not take
typed keys (`key_data` gives their `uint32[..., 2]` data). Samplers take either kind; `split`
and `fold_in` return the kind they were given.
"""

import math

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, lax, tree_util
from funcgrad.errors import FuncgradTypeError, FuncgradValueError, op_error, short_repr
from funcgrad.random import prng
from funcgrad.random.common import check_shape, compiled

_IMPL = "threefry2x32"
_JAX_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32", "threefry4x32")


class KeyDtype:
    """The dtype of typed keys (JAX's `key<fry>`): it names the generator, Threefry-2x32.

    Example:
        >>> key_dtype()
        key<fry>
    """

    __slots__ = ("impl",)
    itemsize = 8  # two uint32 words per key
    kind = "V"

    def __init__(self, impl=_IMPL):
        self.impl = impl

    @property
    def name(self):
        return "key<fry>"

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, KeyDtype) and other.impl == self.impl

    def __hash__(self):
        return hash(("KeyDtype", self.impl))


_DTYPE = KeyDtype()


class PRNGKeyArray:
    """An array of typed keys (from `key`, `split` or `wrap_key_data`): shape `S`, dtype
    `key<fry>`, over two `uint32` word arrays of shape `S` (see the module docstring).

    Example:
        >>> k = key(0)
        >>> k.shape, k.dtype, split(k, 3).shape
        ((), key<fry>, (3,))
    """

    __slots__ = ("_words",)
    __array_priority__ = 1000
    dtype = _DTYPE
    itemsize = _DTYPE.itemsize

    def __init__(self, words):
        self._words = tuple(words)  # no checks: pytree unflattening passes arbitrary leaves

    def _map(self, fn):
        return PRNGKeyArray(fn(w) for w in self._words)

    @property
    def shape(self):
        return tuple(self._words[0].shape)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d key array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx):
        return self._map(lambda w: w[idx])

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(
            shape[0], (int, np.integer)) else shape
        return self._map(lambda w: fnp.reshape(w, shape))

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis=None):
        return self._map(lambda w: fnp.squeeze(w, axis))

    @property
    def T(self):  # noqa: N802  (numpy's name)
        return self._map(fnp.transpose)

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        (a1, a2), (b1, b2) = self._words, other._words
        return (a1 == b1) & (a2 == b2)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else ~eq

    __hash__ = None

    def __array__(self, dtype=None, copy=None):
        raise FuncgradTypeError("a typed key array cannot become a NumPy array; "
                                "funcgrad.random.key_data(keys) gives its uint32 words")

    def block_until_ready(self):
        return self

    def __repr__(self):
        if not all(type(w).__name__ == "Array" for w in self._words):
            return (f"PRNGKeyArray({self.shape}, dtype=key<fry>) overlaying "
                    f"{short_repr(self._words)}")
        return (f"Array({self.shape}, dtype=key<fry>) overlaying:\n"
                f"{np.stack([np.asarray(w) for w in self._words], -1)}")


tree_util.register_pytree_node(PRNGKeyArray, lambda k: (k._words, None),
                               lambda _, words: PRNGKeyArray(words))


# --- the kind of a key argument ---------------------------------------------------------------
def unwrap(op, key, batched=False):
    """`(data, typed)` of a key argument: for typed keys their pair of word arrays, else the
    `uint32[..., 2]` raw key array (both forms are keys to `prng`), and whether it was typed.
    Unless `batched`, it must be a single key."""
    if isinstance(key, PRNGKeyArray):
        if not batched and key.shape != ():
            raise op_error(f"random.{op}", f"expected a single key, got a key array of shape "
                           f"{key.shape}", cls=FuncgradValueError,
                           hint="to use a batch of keys, vmap over them")
        return key._words, True
    try:
        data = fnp.asarray(key)
    except (TypeError, ValueError):
        raise op_error(f"random.{op}", f"expected a PRNG key, got {short_repr(key)}",
                       hint="make keys with funcgrad.random.key(seed) or PRNGKey(seed)") from None
    if data.dtype != prng.U32 or data.shape[-1:] != (2,) or (not batched and data.ndim != 1):
        hint = ("keys come from funcgrad.random.PRNGKey(seed); to use a batch of keys, "
                "vmap over them") if data.ndim > 1 else "make keys with PRNGKey(seed)"
        raise op_error(f"random.{op}", f"expected a single key, a uint32[2] array; got "
                       f"{data.dtype}{list(data.shape)}", hint=hint)
    return data, False


def _raw(data):
    """Raw `uint32[..., 2]` key data from either form."""
    return fnp.stack(data, axis=-1) if isinstance(data, tuple) else data


def _resolve_impl(op, impl):
    name = impl.impl if isinstance(impl, KeyDtype) else impl
    if name is None or name == _IMPL or name == _DTYPE.name:
        return _IMPL
    if isinstance(name, str) and name in _JAX_IMPLS:
        raise op_error(f"random.{op}", f"the PRNG implementation {name!r} is not available: "
                       "funcgrad implements threefry2x32 (JAX's default) only",
                       cls=FuncgradValueError)
    raise op_error(f"random.{op}", f"unrecognized PRNG implementation {short_repr(impl)}; "
                   f"did you mean one of {', '.join(repr(n) for n in _JAX_IMPLS)}?",
                   cls=FuncgradValueError)


# --- making keys --------------------------------------------------------------------------------
def _seed_words(op, seed):
    """The `(hi, lo)` words of a key from an integer seed (numpy scalars for a Python int,
    else arrays or tracers)."""
    if isinstance(seed, PRNGKeyArray):
        raise op_error(f"random.{op}", "expected a scalar seed, got a PRNG key")
    if isinstance(seed, (bool, float, complex)):
        raise op_error(f"random.{op}", f"the seed must be an integer, got {short_repr(seed)}")
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, np.ndarray):
        wide = dtypes.canonicalize(np.int64) == np.int64
        s = int(seed) % 2**64 if wide else int(seed) % 2**32
        return np.uint32(s >> 32), np.uint32(s & 0xFFFFFFFF)
    seed = fnp.asarray(seed)
    if seed.ndim != 0 or dtypes.kind(seed.dtype) not in "iu":
        raise op_error(f"random.{op}", f"the seed must be an integer scalar, got "
                       f"{seed.dtype}{list(seed.shape)}", hint="vmap over a batch of seeds")
    if seed.dtype.itemsize == 8:  # integer conversions wrap: this reads the two's complement
        u = lax.convert_element_type(seed, np.uint64)
        hi = lax.convert_element_type(lax.div(u, np.uint64(2**32)), prng.U32)
        return hi, lax.convert_element_type(u, prng.U32)
    lo = lax.convert_element_type(seed, prng.U32)
    return lax.full_like(lo, 0), lo


def PRNGKey(seed, *, impl=None):  # noqa: N802  (JAX's name)
    """A raw key from an integer seed: the `uint32[2]` words `[hi, lo]` of the seed.

    A 32-bit seed (or a Python int while x64 is off, taken modulo 2**32 as JAX does) gives
    `[0, seed mod 2**32]`; a 64-bit seed (x64 on) gives its high and low words.

    Args:
        seed: a Python int or an integer scalar array (may be traced).
        impl: the generator; only "threefry2x32" (JAX's default) exists in funcgrad.

    Returns:
        A `uint32[2]` key.

    Raises:
        TypeError: when `seed` is not an integer scalar.

    Example:
        >>> np.asarray(PRNGKey(42)).tolist()
        [0, 42]
    """
    _resolve_impl("PRNGKey", impl)
    hi, lo = _seed_words("PRNGKey", seed)
    if isinstance(lo, np.uint32):
        return fnp.asarray(np.array([hi, lo], prng.U32))
    return prng.pack(hi, lo)


def key(seed, *, impl=None, dtype=None):
    """A typed key (shape `()`, dtype `key<fry>`) from an integer seed: the words of
    `PRNGKey(seed)` as one key.

    Args:
        seed: a Python int or an integer scalar array (may be traced).
        impl: the generator ("threefry2x32", the only one in funcgrad).
        dtype: the same as `impl`, as a key dtype (`key_dtype()`) or its name.

    Returns:
        A `PRNGKeyArray` of shape `()`.

    Example:
        >>> key(42)
        Array((), dtype=key<fry>) overlaying:
        [ 0 42]
    """
    if impl is not None and dtype is not None:
        raise op_error("random.key", "give `impl` or `dtype`, not both", cls=FuncgradValueError)
    _resolve_impl("key", impl if dtype is None else dtype)
    return PRNGKeyArray(fnp.asarray(w) for w in _seed_words("key", seed))


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over raw key data: a `uint32[..., 2]` array gives keys of shape `...`.

    Example:
        >>> wrap_key_data(key_data(split(key(0), 3))).shape
        (3,)
    """
    if impl is not None and dtype is not None:
        raise op_error("random.wrap_key_data", "give `impl` or `dtype`, not both",
                       cls=FuncgradValueError)
    _resolve_impl("wrap_key_data", impl if dtype is None else dtype)
    if isinstance(key_bits_array, PRNGKeyArray):
        raise op_error("random.wrap_key_data", "expected uint32 key data, got typed keys",
                       hint="key_data(keys) gives the data of typed keys")
    data = unwrap("wrap_key_data", key_bits_array, batched=True)[0]
    return PRNGKeyArray((data[..., 0], data[..., 1]))


def key_data(keys):
    """The raw `uint32[..., 2]` words of `keys` (typed keys, or raw keys returned as they are).

    Example:
        >>> np.asarray(key_data(key(42))).tolist()
        [0, 42]
    """
    return _raw(unwrap("key_data", keys, batched=True)[0])


def key_impl(keys):
    """The name of the generator behind `keys`: "threefry2x32".

    Example:
        >>> key_impl(key(0))
        'threefry2x32'
    """
    unwrap("key_impl", keys, batched=True)
    return _IMPL


def key_dtype(impl_spec=None):
    """The dtype of typed keys of a generator (`key<fry>` for "threefry2x32").

    Example:
        >>> key(0).dtype == key_dtype()
        True
    """
    _resolve_impl("key_dtype", impl_spec)
    return _DTYPE


def clone(key):
    """A key that may be used again (JAX's key-reuse checker); keys are values: the identity.

    Example:
        >>> clone(key(0)).shape
        ()
    """
    unwrap("clone", key, batched=True)
    return key


# --- new keys from a key ----------------------------------------------------------------------
def _as_kind(words, typed):
    """A body's new keys, given as words: words for typed keys, packed for raw ones."""
    return words if typed else prng.pack(*words)


@compiled
def _split(key, *, shape, typed):
    return _as_kind(prng.hash_counters(key, shape), typed)


def split(key, num=2):
    """Split a key into new independent keys of shape `num` (an int or a shape); raw keys give
    raw keys (`uint32[*num, 2]`), typed keys give typed keys.

    Example:
        >>> np.asarray(split(PRNGKey(0))).tolist()
        [[1797259609, 2579123966], [928981903, 3453687069]]
    """
    data, typed = unwrap("split", key)
    out = _split(data, shape=check_shape("split", num), typed=typed)
    return PRNGKeyArray(out) if typed else out


@compiled
def _fold_in(key, data, *, typed):
    k1, k2 = prng.key_words(key)
    d = lax.convert_element_type(data, prng.U32)
    return _as_kind(prng.threefry2x32(k1, k2, np.uint32(0), d), typed)


def fold_in(key, data):
    """A new key from `key` and a 32-bit integer `data` (e.g. a step or layer index).

    Example:
        >>> np.asarray(fold_in(PRNGKey(0), 1)).shape
        (2,)
    """
    raw, typed = unwrap("fold_in", key)
    if isinstance(data, (int, np.integer)) and not isinstance(data, np.ndarray):
        d = np.uint32(int(data) % 2**32)
    else:
        d = fnp.asarray(data)
        if d.ndim != 0 or dtypes.kind(d.dtype) not in "iub":
            raise op_error("random.fold_in", f"data must be an integer scalar, got "
                           f"{d.dtype}{list(d.shape)}", hint="vmap over a batch of data")
    out = _fold_in(raw, d, typed=typed)
    return PRNGKeyArray(out) if typed else out
