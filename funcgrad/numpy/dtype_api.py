"""Dtype names and queries of funcgrad.numpy: `float32`, `int32`, ... (callable like JAX's
scalar types: `fnp.float32(3)` is an Array), `result_type`, `promote_types`, `can_cast`,
`issubdtype`, `finfo`, `iinfo`.

The dtype lattice itself lives in `funcgrad.dtypes`; this module only exposes it.
"""

import numpy as np

from funcgrad import dtypes as _dtypes
from funcgrad import errors

__all__ = [
    "bool_", "can_cast", "complex64", "complex128", "complexfloating",
    "dtype", "finfo", "float16", "float32", "float64", "float_", "floating", "generic",
    "iinfo", "inexact", "int8", "int16", "int32", "int64", "int_", "integer", "isdtype",
    "issubdtype", "number", "promote_types", "result_type", "signedinteger", "uint8",
    "uint16", "uint32", "uint64", "uint", "unsignedinteger", "complex_",
]


class _ScalarType(type):
    """The metaclass of `fnp.float32` & co.: calling the type makes a funcgrad array, and
    `np.dtype(fnp.float32)` works through the `dtype` attribute."""

    def __call__(cls, x):
        from funcgrad.numpy.creation import asarray
        return asarray(x, dtype=cls.dtype)

    def __repr__(cls):
        return f"funcgrad.numpy.{cls.__name__}"

    def __eq__(cls, other):
        try:
            return cls.dtype == np.dtype(other)
        except TypeError:
            return False

    def __hash__(cls):
        return hash(cls.dtype)


def _scalar_type(name, np_type):
    return _ScalarType(name, (object,), {"dtype": np.dtype(np_type), "__module__": __name__})


bool_ = _scalar_type("bool_", np.bool_)
int8, int16, int32, int64 = (_scalar_type(n, t) for n, t in (
    ("int8", np.int8), ("int16", np.int16), ("int32", np.int32), ("int64", np.int64)))
uint8, uint16, uint32, uint64 = (_scalar_type(n, t) for n, t in (
    ("uint8", np.uint8), ("uint16", np.uint16), ("uint32", np.uint32), ("uint64", np.uint64)))
float16, float32, float64 = (_scalar_type(n, t) for n, t in (
    ("float16", np.float16), ("float32", np.float32), ("float64", np.float64)))
complex64, complex128 = _scalar_type("complex64", np.complex64), _scalar_type(
    "complex128", np.complex128)
int_, uint, float_, complex_ = int64, uint64, float64, complex128

generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
complexfloating, integer = np.complexfloating, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
finfo, iinfo, dtype = np.finfo, np.iinfo, np.dtype


def _unwrap(t):
    return t.dtype if isinstance(t, _ScalarType) else t


def _dtype(name, x):
    """`np.dtype(x)`; an error naming `name` for what is not a dtype (numpy's own message may
    call a failing __repr__)."""
    try:
        return np.dtype(_unwrap(x))
    except Exception:
        raise errors.op_error(name, f"{type(x).__name__} {errors.short_repr(x)} is not a "
                              "dtype") from None


def _dtype_or_kind(name, x):
    """A dtype, or one of numpy's abstract kinds (`fnp.floating`), for `issubdtype`."""
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return _dtype(name, x)


def issubdtype(arg1, arg2):
    """NumPy's issubdtype, accepting funcgrad's scalar types."""
    return np.issubdtype(_dtype_or_kind("issubdtype", arg1), _dtype_or_kind("issubdtype", arg2))


def isdtype(dtype, kind):
    """Array-API `isdtype`: 'bool', 'signed integer', 'unsigned integer', 'integral',
    'real floating', 'complex floating', 'numeric', a dtype, or a tuple of those."""
    try:
        return np.isdtype(_dtype("isdtype", dtype), kind)
    except (TypeError, ValueError) as e:
        raise errors.op_error("isdtype", f"invalid kind {errors.short_repr(kind)} ({e})"
                              ) from None


def result_type(*args):
    """The dtype of combining arrays, dtypes and Python scalars by JAX's promotion rules.

    Example:
        >>> fnp.result_type(fnp.int32, 1.0)
        dtype('float32')
    """
    return _dtypes.result_type(*[_unwrap(a) for a in args])


def promote_types(a, b):
    """The promoted dtype of two dtypes (both strongly typed), as `jnp.promote_types`."""
    return _dtypes.promote_types((_dtype("promote_types", a), False),
                                 (_dtype("promote_types", b), False))[0]


def can_cast(from_, to, casting="safe"):
    """NumPy's can_cast on dtypes (funcgrad arrays are read through their dtype)."""
    from_ = from_.dtype if isinstance(getattr(from_, "dtype", None), np.dtype) else from_
    return np.can_cast(_dtype("can_cast", from_), _dtype("can_cast", to), casting)
