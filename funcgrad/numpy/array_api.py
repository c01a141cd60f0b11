"""The Array API standard (2023.12) names of funcgrad.numpy that NumPy spells differently:
`acos`...`atanh`, `atan2`, `astype(x, dtype, copy=, device=)`, `clip(x, min=, max=)`,
`from_dlpack`, and `__array_namespace_info__()`. Each is an alias or a thin wrapper with the
standard's signature over the NumPy-style function; nothing here computes on its own.

Device arguments (`device=`) accept None, a `funcgrad.Device` or a name such as "cpu"
(`creation.place`). Imports the sibling numpy modules only.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Array, ArrayBase, to_array
from funcgrad.numpy import math, shape
from funcgrad.numpy._util import asarray_operand
from funcgrad.numpy.creation import place

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "acos", "acosh", "asin", "asinh",
    "atan", "atan2", "atanh", "from_dlpack",
]  # and `astype`, `clip`, which funcgrad.numpy binds after NumPy's

__array_api_version__ = "2023.12"
_VERSIONS = ("2021.12", "2022.12", "2023.12")

acos, asin, atan, atan2 = math.arccos, math.arcsin, math.arctan, math.arctan2
acosh, asinh, atanh = math.arccosh, math.arcsinh, math.arctanh


# --- thin wrappers ----------------------------------------------------------------------------

def astype(x, dtype, /, *, copy=False, device=None):
    """`x` converted to `dtype` (the Array API's signature; funcgrad arrays are immutable, so
    `copy` only decides whether an unchanged `x` may be returned as is: by default it is, as
    in JAX).

    Example:
        >>> fnp.astype(fnp.arange(3), fnp.float32)
        Array([0., 1., 2.], dtype=float32)
    """
    out = shape.astype(x, dtype)
    if copy and out is x and type(x) is Array:
        out = Array(x._value.copy(), x.weak_type)
    return place("astype", out, device)


def clip(x, /, min=None, max=None):
    """`x` clipped to `[min, max]` (either may be None: then that side is open); `min`/`max`
    may be arrays that broadcast. The result has the promoted dtype of `x` and the bounds, as
    in JAX (`clip(int32_array, -1.5, 2)` is float32; the standard leaves mixed kinds to the
    library). Positional calls `clip(a, a_min, a_max)` work as NumPy's.

    Example:
        >>> fnp.clip(fnp.arange(5), 1, 3)
        Array([1, 1, 2, 3, 3], dtype=int32)
    """
    x = asarray_operand("clip", x)
    if min is None and max is None:
        return x
    return math.clip(x, min, max)


def from_dlpack(x, /, *, device=None, copy=None):
    """A funcgrad array from any object with `__dlpack__` (a NumPy array, a torch tensor,
    another funcgrad array); with `copy=False` no copy is made (an error when one is needed,
    e.g. to canonicalize float64 with x64 off), with `copy=True` always one.

    Example:
        >>> fnp.from_dlpack(np.arange(3.0, dtype=np.float32))
        Array([0., 1., 2.], dtype=float32)
    """
    if isinstance(x, ArrayBase):
        out = x if not copy or type(x) is not Array else Array(x._value.copy(), x.weak_type)
        return place("from_dlpack", out, device)
    if not hasattr(x, "__dlpack__"):
        raise errors.op_error("from_dlpack", f"{type(x).__name__} does not support DLPack "
                              "(no __dlpack__ method)", hint="use fnp.asarray for other data")
    dev_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
    if int(dev_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
        from funcgrad.devices import cuda_provider
        value = cuda_provider().cupy.from_dlpack(x)
    else:
        try:
            value = np.from_dlpack(x, copy=copy)
        except (BufferError, ValueError, TypeError, RuntimeError) as e:
            raise errors.op_error("from_dlpack", f"cannot import {type(x).__name__} ({e})",
                                  cls=errors.FuncgradValueError) from None
    if copy is False and dtypes.canonicalize(value.dtype) != value.dtype:
        raise errors.op_error("from_dlpack", f"copy=False, but {value.dtype} must be copied to "
                              f"{dtypes.canonicalize(value.dtype)} (x64 is off)",
                              cls=errors.FuncgradValueError,
                              hint="pass copy=None or enable x64")
    return place("from_dlpack", to_array(value), device)


# --- __array_namespace_info__ -----------------------------------------------------------------

_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "real floating": "f",
          "complex floating": "c", "integral": "iu", "numeric": "iufc"}
_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "complex64", "complex128")


class ArrayNamespaceInfo:
    """What `fnp.__array_namespace_info__()` returns: the inspection API of the standard."""

    def capabilities(self):
        """Eager boolean indexing and data-dependent shapes (`unique_*`, `nonzero`) work;
        under jit they need a static `size=`."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        """The device new arrays are created on (the CPU)."""
        from funcgrad.devices import devices
        return devices()[0]

    def devices(self):
        """The CPU device, then the GPUs when CUDA can run here."""
        from funcgrad.devices import cuda_provider, devices
        return devices("cpu") + (devices("cuda") if cuda_provider().problem() is None else [])

    def default_dtypes(self, *, device=None):
        """The default dtypes (64-bit with x64 on)."""
        f, i = dtypes.default_float(), dtypes.default_int()
        c = np.dtype(np.complex128 if f == np.float64 else np.complex64)
        return {"real floating": f, "complex floating": c, "integral": i, "indexing": i}

    def dtypes(self, *, device=None, kind=None):
        """The dtypes of `kind` (None: all; a kind name; a tuple of them) by name; 64-bit
        ones only with x64 on."""
        names = [n for n in _NAMES if dtypes.canonicalize(np.dtype(n)) == np.dtype(n)]
        if kind is None:
            return {n: np.dtype(n) for n in names}
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not all(isinstance(k, str) and k in _KINDS for k in kinds):
            raise errors.op_error("dtypes", f"unknown kind {errors.short_repr(kind)}; kinds "
                                  f"are {sorted(_KINDS)}", cls=errors.FuncgradValueError)
        letters = "".join(_KINDS[k] for k in kinds)
        return {n: np.dtype(n) for n in names if dtypes.kind(np.dtype(n)) in letters}


def __array_namespace_info__():
    """The Array API inspection namespace.

    Example:
        >>> fnp.__array_namespace_info__().default_dtypes()["indexing"]
        dtype('int32')
    """
    return ArrayNamespaceInfo()
