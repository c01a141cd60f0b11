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
    # (bfloat16, the float8s, int4... are `__getattr__`'s: ml_dtypes is loaded on first use)
    # the long tail (issue 28): NumPy's other scalar names
    "ComplexWarning", "bool", "cdouble", "character", "csingle", "double", "flexible",
    "object_", "single",
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
        # as `jnp.float32`: equal to itself, numpy's scalar type and (through the reflected
        # `np.dtype.__eq__`) the dtype; never to None or a string (`np.dtype(None)` is float64)
        return cls is other or cls.dtype.type == _unwrap(other)

    def __hash__(cls):
        return hash(cls.dtype.type)  # as numpy's scalar type, which it equals


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


class _DtypeType(type):
    """`fnp.dtype`'s metaclass: the class stands for `np.dtype` (isinstance, issubclass,
    attributes), and calling it also reads the narrow types' names."""

    def __call__(cls, dtype, align=False, copy=False, **kwargs):  # np.dtype's signature
        dtype = _dtypes.as_dtype(dtype) if isinstance(dtype, str) else dtype
        return np.dtype(dtype, align, copy, **kwargs)

    def __instancecheck__(cls, x):
        return isinstance(x, np.dtype)

    def __subclasscheck__(cls, c):
        return issubclass(c, np.dtype)

    def __getattr__(cls, name):
        return getattr(np.dtype, name)

    def __repr__(cls):
        return repr(np.dtype)


class dtype(metaclass=_DtypeType):  # noqa: N801  (NumPy's name)
    """NumPy's `np.dtype`, as `jnp.dtype`; a narrow type's name ("bfloat16", "int4") loads
    ml_dtypes first (numpy knows those names only once it is imported).

    Example:
        >>> fnp.dtype("bfloat16"), isinstance(fnp.dtype("float32"), fnp.dtype)
        (dtype(bfloat16), True)
    """


def narrow_scalar_type(name):
    """`fnp.bfloat16` & co. (ml_dtypes' types, as in JAX), made on first use: ml_dtypes is
    loaded then (`dtypes.load_narrow`), never at import. None for a name that is none."""
    t = _dtypes.narrow_type(name)
    if t is None:
        return None
    globals()[name] = _scalar_type(name, t)
    return globals()[name]


def __getattr__(name):
    t = narrow_scalar_type(name) if name in _dtypes.NARROW_NAMES else None
    if t is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return t


def _unwrap(t):
    return t.dtype if isinstance(t, _ScalarType) else t


def _dtype(name, x):
    """`np.dtype(x)`; an error naming `name` for what is not a dtype (numpy's own message may
    call a failing __repr__)."""
    try:
        return _dtypes.as_dtype(_unwrap(x))
    except Exception:
        raise errors.op_error(name, f"{type(x).__name__} {errors.short_repr(x)} is not a "
                              "dtype") from None


def _dtype_or_kind(name, x):
    """A dtype, or one of numpy's abstract kinds (`fnp.floating`), for `issubdtype`."""
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return _dtype(name, x)


class finfo:
    """Machine limits of a floating dtype, as the Array API says: `bits` (int), `eps`, `max`,
    `min`, `smallest_normal` (Python floats) and `dtype` (the real dtype: float32 for
    complex64); NumPy's other fields (`tiny`, `resolution`, `precision`, `nmant`, ...) pass
    through. Takes a dtype, a scalar type or an array.

    Example:
        >>> fnp.finfo(fnp.complex64).dtype, fnp.finfo(fnp.float32).eps
        (dtype('float32'), 1.1920928955078125e-07)
    """

    def __init__(self, dtype):
        dt = _info_dtype("finfo", dtype, "fc")
        info = _dtypes._finfo(dt)
        self._np = info
        self.bits, self.dtype = int(info.bits), np.dtype(info.dtype)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.smallest_normal = float(info.smallest_normal)

    def __getattr__(self, name):
        return getattr(self.__dict__["_np"], name)

    def __repr__(self):
        return f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, " \
               f"smallest_normal={self.smallest_normal}, dtype={self.dtype})"


class iinfo:
    """Machine limits of an integer dtype, as the Array API says: `bits`, `max`, `min`
    (Python ints) and `dtype`. Takes a dtype, a scalar type or an array.

    Example:
        >>> fnp.iinfo(fnp.int8).min
        -128
    """

    def __init__(self, int_type):
        dt = _info_dtype("iinfo", int_type, "iu")
        info = _dtypes._iinfo(dt)
        self.bits, self.dtype = int(info.bits), np.dtype(info.dtype)
        self.max, self.min = int(info.max), int(info.min)
        self.kind = info.kind

    def __repr__(self):
        return f"iinfo(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype})"


def _info_dtype(name, x, kinds):
    """The dtype `finfo`/`iinfo` describe: an array's, or `x` read as a dtype."""
    dt = getattr(x, "dtype", None)
    dt = dt if isinstance(dt, np.dtype) and not isinstance(x, np.dtype) else _dtype(name, x)
    if _dtypes.kind(dt) not in kinds:
        what, other = ("a floating", "iinfo") if "f" in kinds else ("an integer", "finfo")
        raise errors.op_error(name, f"dtype {dt} is not {what} dtype", hint=f"use {other}")
    return dt


def issubdtype(arg1, arg2):
    """NumPy's issubdtype, accepting funcgrad's scalar types; as in JAX, bfloat16 and the
    float8s are `floating`, int4 & co. `signedinteger`/`unsignedinteger`.

    Example:
        >>> fnp.issubdtype(fnp.bfloat16, fnp.floating), fnp.issubdtype(fnp.bfloat16, fnp.float16)
        (True, False)
    """
    a, b = _dtype_or_kind("issubdtype", arg1), _dtype_or_kind("issubdtype", arg2)
    return _dtypes.issubdtype(a, b)


def isdtype(dtype, kind):
    """Array-API `isdtype`: 'bool', 'signed integer', 'unsigned integer', 'integral',
    'real floating', 'complex floating', 'numeric', a dtype, or a tuple of those."""
    kind = tuple(map(_unwrap, kind)) if isinstance(kind, tuple) else _unwrap(kind)
    dt = _dtype("isdtype", dtype)
    if dt.num >= 256:  # an ml_dtypes type: asked as the numpy type standing in for its kind
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if any(isinstance(k, np.dtype) or isinstance(k, type) for k in kinds):
            return any(dt == np.dtype(k) for k in kinds if not isinstance(k, str)) or (
                isdtype(_dtypes.STAND_IN[_dtypes.kind(dt)], tuple(k for k in kinds
                                                            if isinstance(k, str))))
        dt = np.dtype(_dtypes.STAND_IN[_dtypes.kind(dt)])
    try:
        return np.isdtype(dt, kind)
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
    """The dtype a binary operation promotes dtypes `a` and `b` to, as `jnp.promote_types`:
    by JAX's lattice, the Python types `int`, `float`, `complex` weakly typed, and the result
    not canonicalized (`promote_types(int, int)` is int64).

    Raises:
        TypePromotionError: for dtypes with no implicit promotion (a float8 and bfloat16).

    Example:
        >>> fnp.promote_types(fnp.bfloat16, fnp.float16), fnp.promote_types("uint8", int)
        (dtype('float32'), dtype('uint8'))
    """
    node = _dtypes.join_nodes(*(_promotion_node(x) for x in (a, b)))
    return np.dtype(_PYTHON_TYPE_OF_NODE.get(node, node))


_NODE_OF_PYTHON_TYPE = {int: "i*", float: "f*", complex: "c*"}
_PYTHON_TYPE_OF_NODE = {v: k for k, v in _NODE_OF_PYTHON_TYPE.items()}


def _promotion_node(x):
    for t, node in _NODE_OF_PYTHON_TYPE.items():
        if x is t:
            return node
    dt = _dtype("promote_types", x)
    _dtypes.canonicalize(dt)  # a dtype funcgrad has (the error names the others)
    return dt


def can_cast(from_, to, casting="safe"):
    """NumPy's can_cast on dtypes (funcgrad arrays are read through their dtype)."""
    from_ = from_.dtype if isinstance(getattr(from_, "dtype", None), np.dtype) else from_
    return np.can_cast(_dtype("can_cast", from_), _dtype("can_cast", to), casting)


# --- NumPy's other scalar names (the long tail, issue 28) -------------------------------------
# `bool` is set through globals() so that this module's own code keeps the builtin's name
globals()["bool"] = _scalar_type("bool", np.bool_)
double, single, cdouble, csingle = float64, float32, complex128, complex64
object_, character, flexible = np.object_, np.character, np.flexible
ComplexWarning = np.exceptions.ComplexWarning
