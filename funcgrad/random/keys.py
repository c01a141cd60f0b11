"""Keys: raw `uint32[2]` keys (`PRNGKey`), typed keys (`key`, dtype `key<fry>`), and the
functions on keys (`split`, `fold_in`, `key_data`, `wrap_key_data`, `key_impl`, `key_dtype`,
`clone`).

A typed key array is a `PRNGKeyArray`: a thin pytree node over its raw data, a
`uint32[*shape, 2]` array, whose own shape is that data's without the last axis. Being a pytree
is what lets typed keys pass through `jit`, `vmap`, `scan` and `grad` with no special rule;
the price is that `tree_leaves(key)` shows the raw data (JAX shows the key) and that
`funcgrad.numpy` functions do not take typed keys (use `key_data`). Samplers take either kind;
`split` and `fold_in` return the kind they were given.
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
    `key<fry>`, over raw data of shape `S + (2,)` (see the module docstring).

    Example:
        >>> k = key(0)
        >>> k.shape, k.dtype, split(k, 3).shape
        ((), key<fry>, (3,))
    """

    __slots__ = ("_base",)
    __array_priority__ = 1000
    dtype = _DTYPE
    itemsize = _DTYPE.itemsize

    def __init__(self, base):
        self._base = base  # no checks: pytree unflattening passes arbitrary leaves

    @property
    def shape(self):
        return tuple(self._base.shape[:-1])

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
        return PRNGKeyArray(self._base[_data_index(idx, self.ndim)])

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        size = self.size
        shape = tuple(size // max(1, -math.prod(shape)) if d == -1 else d for d in shape)
        return PRNGKeyArray(fnp.reshape(self._base, (*shape, 2)))

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis=None):
        axes = tuple(i for i, d in enumerate(self.shape) if d == 1) if axis is None else axis
        return PRNGKeyArray(fnp.squeeze(self._base, axes))

    @property
    def T(self):  # noqa: N802  (numpy's name)
        perm = (*range(self.ndim - 1, -1, -1), self.ndim)
        return PRNGKeyArray(fnp.transpose(self._base, perm))

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return fnp.all(self._base == other._base, axis=-1)

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
        base = self._base
        if not hasattr(base, "aval") or type(base).__name__ != "Array":
            return f"PRNGKeyArray({self.shape}, dtype=key<fry>) overlaying {short_repr(base)}"
        return f"Array({self.shape}, dtype=key<fry>) overlaying:\n{np.asarray(base)}"


def _data_index(idx, ndim):
    """An index of a key array, extended to its data (which has one more, last, axis)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(i is Ellipsis for i in idx):
        return (*idx, slice(None))
    used = sum(1 for i in idx if i is not None)
    return (*idx, *(slice(None),) * (ndim - used), slice(None))


tree_util.register_pytree_node(PRNGKeyArray, lambda k: ((k._base,), None),
                               lambda _, children: PRNGKeyArray(children[0]))


# --- the kind of a key argument ---------------------------------------------------------------
def unwrap(op, key, batched=False):
    """`(raw data, typed)` of a key argument: its `uint32[..., 2]` words and whether it was a
    typed key. Unless `batched`, it must be a single key."""
    if isinstance(key, PRNGKeyArray):
        data, typed = key._base, True
        if not batched and data.shape != (2,):
            raise op_error(f"random.{op}", f"expected a single key, got a key array of shape "
                           f"{tuple(data.shape[:-1])}", cls=FuncgradValueError,
                           hint="to use a batch of keys, vmap over them")
        return data, typed
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


def wrap(data, typed):
    """Raw key data back as the kind of key the caller gave."""
    return PRNGKeyArray(data) if typed else data


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
    if isinstance(seed, PRNGKeyArray):
        raise op_error("random.PRNGKey", "expected a scalar seed, got a PRNG key")
    if isinstance(seed, (bool, float, complex)):
        raise op_error("random.PRNGKey", f"the seed must be an integer, got {short_repr(seed)}")
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, np.ndarray):
        wide = dtypes.canonicalize(np.int64) == np.int64
        s = int(seed) % 2**64 if wide else int(seed) % 2**32
        return fnp.asarray(np.array([s >> 32, s & 0xFFFFFFFF], prng.U32))
    seed = fnp.asarray(seed)
    if seed.ndim != 0 or seed.dtype.kind not in "iu":
        raise op_error("random.PRNGKey", f"the seed must be an integer scalar, got "
                       f"{seed.dtype}{list(seed.shape)}", hint="vmap over a batch of seeds")
    if seed.dtype.itemsize == 8:  # integer conversions wrap: this reads the two's complement
        u = lax.convert_element_type(seed, np.uint64)
        hi = lax.convert_element_type(lax.div(u, np.uint64(2**32)), prng.U32)
        return prng.pack(hi, lax.convert_element_type(u, prng.U32))
    lo = lax.convert_element_type(seed, prng.U32)
    return prng.pack(lax.full_like(lo, 0), lo)


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
    return PRNGKeyArray(PRNGKey(seed))


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
    return PRNGKeyArray(unwrap("wrap_key_data", key_bits_array, batched=True)[0])


def key_data(keys):
    """The raw `uint32[..., 2]` words of `keys` (typed keys, or raw keys returned as they are).

    Example:
        >>> np.asarray(key_data(key(42))).tolist()
        [0, 42]
    """
    return unwrap("key_data", keys, batched=True)[0]


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
@compiled
def _split(key, *, shape):
    return prng.split(key, shape)


def split(key, num=2):
    """Split a key into new independent keys of shape `num` (an int or a shape); raw keys give
    raw keys (`uint32[*num, 2]`), typed keys give typed keys.

    Example:
        >>> np.asarray(split(PRNGKey(0))).tolist()
        [[1797259609, 2579123966], [928981903, 3453687069]]
    """
    data, typed = unwrap("split", key)
    return wrap(_split(data, shape=check_shape("split", num)), typed)


@compiled
def _fold_in(key, data):
    return prng.fold_in(key, lax.convert_element_type(data, prng.U32))


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
        if d.ndim != 0 or d.dtype.kind not in "iub":
            raise op_error("random.fold_in", f"data must be an integer scalar, got "
                           f"{d.dtype}{list(d.shape)}", hint="vmap over a batch of data")
    return wrap(_fold_in(raw, d), typed)
