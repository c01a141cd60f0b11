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


def _upper_sets():
    ups = {}
    for node in _LATTICE:
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(_LATTICE[n])
        ups[node] = seen
    return ups


_UP = _upper_sets()
_join_cache = {}


def _join(a, b):
    key = (a, b)
    r = _join_cache.get(key)
    if r is None:
        common = _UP[a] & _UP[b]
        r = next(n for n in common if _UP[n] >= common)
        _join_cache[key] = r
    return r


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
    for dt, weak in dtypes_weak[1:]:
        node = _join(node, _node(dt, weak))
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


def result_type(*args):
    """The promoted dtype of arrays, dtypes and Python scalars, as `jnp.result_type`."""
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
    return promote_types(*pairs)[0]
