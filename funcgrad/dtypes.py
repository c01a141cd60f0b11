"""The dtype policy: canonical dtypes, weak types and JAX's type-promotion lattice.

With `enable_x64` off (the default) 64-bit dtypes canonicalize to 32-bit ones, as in
JAX. Python scalars are *weakly typed*: `x_f32 * 2.0` stays float32. This module owns
those rules and nothing else; it imports only numpy, funcgrad.config and funcgrad.errors.
"""

import numpy as np

from funcgrad import errors
from funcgrad.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

_SHORT = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    float16: "f16", float32: "f32", float64: "f64", complex64: "c64", complex128: "c128",
}
_NARROW = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def short_name(dtype):
    """'f32' for float32, as printed in the IR."""
    return _SHORT.get(dtype, str(dtype))


def is_float(dtype):
    return dtype.kind == "f"


# JAX's dtype of the gradient of an integer or bool input under `grad(..., allow_int=True)`:
# a zero-size void, so such a gradient holds no data.
float0 = np.dtype([("float0", np.void, 0)])


def is_inexact(dtype):
    return dtype.kind in "fc"


def is_integer(dtype):
    return dtype.kind in "iu"


def default_float():
    return float64 if config.enable_x64 else float32


def default_int():
    return int64 if config.enable_x64 else int32


def default_uint():
    return uint64 if config.enable_x64 else uint32


def default_complex():
    return complex128 if config.enable_x64 else complex64


def to_inexact(dtype):
    """The inexact dtype an integer or bool `dtype` becomes in float arithmetic (JAX's rule:
    float32 for bool and integers up to 32 bits, even with x64; the default float for 64-bit
    integers); an inexact dtype is returned as it is.

    Example:
        >>> to_inexact(int8), to_inexact(float16)
        (dtype('float32'), dtype('float16'))
    """
    if dtype.kind in "fc":
        return dtype
    return default_float() if dtype.itemsize == 8 else float32


def canonicalize(dtype):
    """The dtype an array of `dtype` gets in funcgrad (64-bit narrowed unless x64)."""
    try:
        dtype = np.dtype(dtype)
    except Exception:  # numpy's message may call a failing __repr__ of the object
        raise TypeError(f"{errors.short_repr(dtype)} ({type(dtype).__name__}) is not a dtype; "
                        f"use one of {', '.join(str(d) for d in _SHORT)}") from None
    if dtype not in _SHORT:
        raise TypeError(f"funcgrad does not support dtype {dtype}; use one of "
                        f"{', '.join(str(d) for d in _SHORT)}")
    if not config.enable_x64:
        return _NARROW.get(dtype, dtype)
    return dtype


def scalar_dtype(x):
    """(dtype, weak_type) of a Python scalar."""
    t = type(x)
    if t is bool:
        return bool_, False
    if t is int:
        return default_int(), True
    if t is float:
        return default_float(), True
    if t is complex:
        return default_complex(), True
    raise TypeError(f"not a Python scalar: {x!r}")


# --- JAX's type promotion lattice ------------------------------------------------------
# Nodes are dtypes plus the weak kinds "i*", "f*", "c*" of Python scalars.
_LATTICE = {
    bool_: ["i*"],
    "i*": [uint8, int8],
    uint8: [uint16, int16], uint16: [uint32, int32], uint32: [uint64, int64], uint64: ["f*"],
    int8: [int16], int16: [int32], int32: [int64], int64: ["f*"],
    "f*": [float16, "c*"], float16: [float32], float32: [float64, complex64],
    float64: [complex128], "c*": [complex64], complex64: [complex128], complex128: [],
}


# `config.numpy_dtype_promotion = "strict"`: a Python scalar joins arrays of its kind (or a
# higher kind); arrays of different dtypes do not join at all (JAX's strict lattice).
_INTS = [uint8, uint16, uint32, uint64, int8, int16, int32, int64]
_STRICT_LATTICE = {**{t: [] for t in _SHORT}, "i*": ["f*", *_INTS],
                   "f*": ["c*", float16, float32, float64], "c*": [complex64, complex128]}


def _upper_sets(lattice):
    ups = {}
    for node in lattice:
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(lattice[n])
        ups[node] = seen
    return ups


_UP = _upper_sets(_LATTICE)
_UP_STRICT = _upper_sets(_STRICT_LATTICE)
_join_cache = {}


class TypePromotionError(errors.FuncgradValueError):
    """Operands whose dtypes have no implicit promotion (with `numpy_dtype_promotion` set to
    "strict"), as JAX's `jax.dtypes.TypePromotionError`."""


def _join(a, b):
    key = (a, b)
    r = _join_cache.get(key)
    if r is None:
        common = _UP[a] & _UP[b]
        r = next(n for n in common if _UP[n] >= common)
        _join_cache[key] = r
    return r


def _join_strict(a, b):
    common = _UP_STRICT[a] & _UP_STRICT[b]
    least = [n for n in common if _UP_STRICT[n] >= common]
    if not least:
        names = {"i*": "<class 'int'>", "f*": "<class 'float'>", "c*": "<class 'complex'>"}
        raise TypePromotionError(
            f"Input dtypes {tuple(names.get(n, str(n)) for n in (a, b))} have no available "
            "implicit dtype promotion path when jax_numpy_dtype_promotion=strict. Try "
            "explicitly casting inputs to the desired output type, or set "
            f"jax_numpy_dtype_promotion=standard.\n{errors.where()}")
    return least[0]


def _node(dtype, weak):
    if weak:
        return {"i": "i*", "u": "i*", "f": "f*", "c": "c*"}.get(dtype.kind, dtype)
    return dtype


_promote_cache = {}
config.on_change(lambda name, value: _promote_cache.clear())


def promote_types(*dtypes_weak):
    """Result (dtype, weak) of combining `(dtype, weak)` pairs by JAX's lattice.

    Example:
        >>> promote_types((float32, False), (float32, True))
        (dtype('float32'), False)
    """
    r = _promote_cache.get(dtypes_weak)
    if r is not None:
        return r
    node = _node(*dtypes_weak[0])
    join = _join_strict if config.numpy_dtype_promotion == "strict" else _join
    for dt, weak in dtypes_weak[1:]:
        node = join(node, _node(dt, weak))
    if node == "i*":
        r = (default_int(), True)
    elif node == "f*":
        r = (default_float(), True)
    elif node == "c*":
        r = (default_complex(), True)
    else:
        r = (canonicalize(node), False)
    _promote_cache[dtypes_weak] = r
    return r


def result_type(*args, return_weak_type_flag=False):
    """The promoted dtype of arrays, dtypes and Python scalars, as `jnp.result_type`; with
    `return_weak_type_flag`, `(dtype, weak_type)`.

    Example:
        >>> result_type(1.0), result_type(1.0, return_weak_type_flag=True)
        (dtype('float32'), (dtype('float32'), True))
    """
    from funcgrad.core import get_aval

    pairs = []
    for a in args:
        if isinstance(a, (np.dtype, type)) and not isinstance(a, (bool, int, float, complex)):
            pairs.append((canonicalize(a), False))
        elif isinstance(a, str):
            pairs.append((canonicalize(np.dtype(a)), False))
        else:
            aval = get_aval(a)
            pairs.append((aval.dtype, aval.weak_type))
    out = promote_types(*pairs)
    return out if return_weak_type_flag else out[0]


# --- jax.dtypes: the public names -----------------------------------------------------------
# (`float0`, `result_type` and `TypePromotionError` are above; `finfo`/`iinfo` are
# funcgrad.numpy's, reached through the module's `__getattr__`.)

class extended(np.generic):  # noqa: N801  (JAX's name)
    """The category of dtypes that are not NumPy's (typed PRNG keys): for `issubdtype`."""


class prng_key(extended):  # noqa: N801  (JAX's name)
    """The category of the dtypes of typed PRNG keys (`random.key`): for `issubdtype`.

    Example:
        >>> issubdtype(fnp.float32, prng_key)
        False
    """


def is_extended(dtype):
    """Whether `dtype` is an extended (non-NumPy) dtype, such as a typed key's."""
    return category_of(dtype) is not None


def category_of(dtype):
    """The `extended` subclass an extended dtype belongs to (`prng_key` for a typed key's,
    which names its generator in `.impl`), or None for anything else."""
    if isinstance(dtype, (np.dtype, type, str)) or dtype is None:
        return None
    kind = getattr(dtype, "type", None)
    if isinstance(kind, type) and issubclass(kind, extended):
        return kind
    return prng_key if isinstance(getattr(dtype, "impl", None), str) else None


def _dtype_or_kind(x):
    """A NumPy dtype or abstract kind (`np.floating`) for `issubdtype`: funcgrad's scalar
    types (`fnp.float32`) by their dtype, arrays by theirs."""
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    dt = getattr(x, "dtype", None)
    return dt if isinstance(dt, np.dtype) else np.dtype(x)


def issubdtype(a, b):
    """Whether dtype `a` is `b` or lies below it in NumPy's hierarchy of dtypes and kinds,
    extended dtypes included (`issubdtype(key.dtype, prng_key)` is True).

    Example:
        >>> issubdtype(fnp.float32, fnp.floating), issubdtype(fnp.int8, fnp.floating)
        (True, False)
    """
    cat_a, cat_b = category_of(a), category_of(b)
    if cat_a is not None or cat_b is not None:
        if cat_a is None:
            return False
        if cat_b is not None:  # two extended dtypes
            return a == b
        return isinstance(b, type) and issubclass(cat_a, b)
    return bool(np.issubdtype(_dtype_or_kind(a), _dtype_or_kind(b)))


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """The dtype funcgrad gives arrays of `dtype`: 64-bit types narrowed to 32 bits unless
    `enable_x64`, Python types to their defaults (`float` -> float32), as JAX's.

    Raises:
        ValueError: an extended dtype (a typed key's) without `allow_extended_dtype`.

    Example:
        >>> canonicalize_dtype(np.float64), canonicalize_dtype(int)
        (dtype('float32'), dtype('int32'))
    """
    if is_extended(dtype):
        if not allow_extended_dtype:
            raise ValueError(f"Internal: canonicalize_dtype called on extended dtype {dtype} "
                             "with allow_extended_dtype=False")
        return dtype
    if dtype is bool or dtype is int or dtype is float or dtype is complex:
        return scalar_dtype(dtype())[0]
    dt = np.dtype(dtype)
    return _NARROW.get(dt, dt) if not config.enable_x64 else dt


def scalar_type_of(x):
    """The Python scalar type (bool, int, float or complex) of the values of `x`.

    Example:
        >>> scalar_type_of(fnp.ones(2)), scalar_type_of(np.int8(1))
        (<class 'float'>, <class 'int'>)
    """
    dt = x.dtype if isinstance(getattr(x, "dtype", None), np.dtype) else None
    if dt is None:
        dt = scalar_dtype(x)[0] if type(x) in (bool, int, float, complex) else np.asarray(x).dtype
    kinds = {"b": bool, "i": int, "u": int, "f": float, "c": complex}
    if dt.kind not in kinds:
        raise TypeError(f"Value {errors.short_repr(x)} with dtype {dt} is not a valid funcgrad "
                        "array type. Only arrays of numeric types are supported.")
    return kinds[dt.kind]


def itemsize_bits(dtype):
    """The bits one element of `dtype` occupies (8 for bool).

    Example:
        >>> itemsize_bits(float32), itemsize_bits(bool_)
        (32, 8)
    """
    if is_extended(dtype):
        raise ValueError(f"unexpected input: dtype={dtype}")
    return np.dtype(_dtype_or_kind(dtype)).itemsize * 8


def __getattr__(name):
    if name in ("finfo", "iinfo"):  # one home: funcgrad.numpy's (loaded on first use)
        from funcgrad.numpy import dtype_api
        return getattr(dtype_api, name)
    raise AttributeError(f"module 'funcgrad.dtypes' has no attribute {name!r}")
