"""Operators and NumPy-style methods on `funcgrad.core.ArrayBase`, so that `x + y`, `x @ w`,
`x.T`, `x.sum(axis=0)`, `x.reshape(2, -1)` work alike on concrete arrays and tracers.

Importing funcgrad.numpy runs `install()`. Binary operators are the ufuncs themselves (no
extra Python frame); reflected ones swap their operands. Indexing (`__getitem__`, `.at`)
is installed by funcgrad.numpy.indexing; `__setitem__` explains how to update instead.
The Array API's `__array_namespace__`, `to_device` and DLPack export (`__dlpack__`,
`__dlpack_device__`) are here too.
"""

import numpy as np

from funcgrad import errors
from funcgrad.core import Array, ArrayBase
from funcgrad.core.trace import numpy_operators
from funcgrad.numpy import array_api, indexing, linalg, logic, math, reductions, searching
from funcgrad.numpy import shape as shp


def _reflected(fn):
    def op(self, other):
        return fn(other, self)
    op.__name__ = f"__r{fn.__name__}__"
    op.__doc__ = f"`{fn.__name__}(other, self)`."
    return op


def _eq(self, other):
    return NotImplemented if other is None or isinstance(other, str) else logic.equal(self, other)


def _ne(self, other):
    return (NotImplemented if other is None or isinstance(other, str)
            else logic.not_equal(self, other))


def _iter(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    return (shp.index_axis(self, i) for i in range(self.shape[0]))


def _format(self, spec):
    if not self.shape:
        return format(self.item(), spec)
    return format(str(self), spec)


def _reshape(self, *args, order="C", shape=None):
    """`x.reshape(2, 3)` or `x.reshape((2, 3))`, as ndarray.reshape."""
    new = shape if shape is not None else (args[0] if len(args) == 1 else args)
    return shp.reshape(self, new, order)


def _transpose(self, *axes):
    """`x.transpose()`, `x.transpose(1, 0)` or `x.transpose((1, 0))`, as ndarray.transpose."""
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return shp.transpose(self, axes or None)


def _clip(self, min=None, max=None):
    """`x.clip(min, max)`."""
    return math.clip(self, min, max)


def _astype(self, dtype, copy=False, device=None):
    """`x.astype(dtype)` (JAX's signature: an unchanged `x` is returned unless `copy`)."""
    return array_api.astype(self, dtype, copy=copy, device=device)


def _round(self, decimals=0):
    """`x.round(decimals)`."""
    return math.round(self, decimals)


def _flatten(self, order="C"):
    """`x.flatten()`: a 1-D copy (funcgrad arrays are immutable, so the same as ravel)."""
    return shp.ravel(self, order)


def _setitem(self, index, value):
    raise TypeError(f"funcgrad arrays are immutable; instead of x[idx] = y use "
                    f"x = x.at[idx].set(y) (array of shape {self.shape})")


def _array_namespace(self, /, *, api_version=None):
    """The Array API namespace of funcgrad arrays: `funcgrad.numpy`."""
    if api_version is not None and api_version not in array_api._VERSIONS:
        raise errors.op_error("__array_namespace__", f"unsupported api_version "
                              f"{errors.short_repr(api_version)}", cls=errors.FuncgradValueError,
                              hint=f"funcgrad.numpy implements {', '.join(array_api._VERSIONS)}")
    import funcgrad.numpy
    return funcgrad.numpy


def _to_device(self, device, /, *, stream=None):
    """`x` on `device` (a `Device` or a name like "cpu"); `stream` is accepted and unused."""
    return array_api.place("to_device", self, device)


def _dlpack_value(self, name):
    if type(self) is not Array:
        raise errors.op_error(name, f"a traced value {self.aval} has no buffer to export",
                              cls=errors.ConcretizationTypeError,
                              hint="export concrete arrays, outside jit/grad/vmap")
    return self._value


def _dlpack(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
    """Export the buffer by DLPack without a copy (unless `copy=True`): read-only to versioned
    consumers (`max_version >= (1, 0)`); a legacy consumer, which cannot be told so, must not
    write to it (as with JAX's arrays)."""
    v = _dlpack_value(self, "__dlpack__")
    kw = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
    if type(v) is not np.ndarray:  # a device array exports itself
        return v.__dlpack__(**{k: a for k, a in kw.items() if a is not None})
    if max_version is not None and max_version[0] >= 1:
        v = v.view()
        v.flags.writeable = False
    elif not v.flags.writeable and copy is None:
        v = v.copy()
    return v.__dlpack__(**kw)


def _dlpack_device(self, /):
    """`(device type, device id)` of the buffer, as DLPack numbers them (1: the CPU)."""
    v = _dlpack_value(self, "__dlpack_device__")
    return (1, 0) if type(v) is np.ndarray else v.__dlpack_device__()


_OPERATORS = {
    "__add__": math.add, "__radd__": _reflected(math.add),
    "__sub__": math.subtract, "__rsub__": _reflected(math.subtract),
    "__mul__": math.multiply, "__rmul__": _reflected(math.multiply),
    "__truediv__": math.true_divide, "__rtruediv__": _reflected(math.true_divide),
    "__floordiv__": math.floor_divide, "__rfloordiv__": _reflected(math.floor_divide),
    "__mod__": math.remainder, "__rmod__": _reflected(math.remainder),
    "__divmod__": math.divmod, "__rdivmod__": _reflected(math.divmod),
    "__pow__": math.power, "__rpow__": _reflected(math.power),
    "__matmul__": linalg.matmul, "__rmatmul__": _reflected(linalg.matmul),
    "__and__": logic.bitwise_and, "__rand__": _reflected(logic.bitwise_and),
    "__or__": logic.bitwise_or, "__ror__": _reflected(logic.bitwise_or),
    "__xor__": logic.bitwise_xor, "__rxor__": _reflected(logic.bitwise_xor),
    "__lshift__": logic.left_shift, "__rlshift__": _reflected(logic.left_shift),
    "__rshift__": logic.right_shift, "__rrshift__": _reflected(logic.right_shift),
    "__lt__": logic.less, "__le__": logic.less_equal, "__gt__": logic.greater,
    "__ge__": logic.greater_equal, "__eq__": _eq, "__ne__": _ne,
    "__neg__": math.negative, "__pos__": math.positive, "__abs__": math.abs,
    "__invert__": logic.bitwise_not, "__round__": lambda self, ndigits=None: math.round(
        self, ndigits or 0),
    "__iter__": _iter, "__format__": _format, "__setitem__": _setitem,
    "__array_namespace__": _array_namespace, "__dlpack__": _dlpack,
    "__dlpack_device__": _dlpack_device,
}

_METHODS = {
    "sum": reductions.sum, "mean": reductions.mean, "var": reductions.var,
    "std": reductions.std, "max": reductions.max, "min": reductions.min,
    "prod": reductions.prod, "argmax": reductions.argmax, "argmin": reductions.argmin,
    "all": reductions.all, "any": reductions.any, "cumsum": reductions.cumsum,
    "cumprod": reductions.cumprod, "ptp": reductions.ptp,
    "reshape": _reshape, "transpose": _transpose, "swapaxes": shp.swapaxes,
    "squeeze": shp.squeeze, "flatten": _flatten,
    "ravel": shp.ravel, "astype": _astype, "clip": _clip, "round": _round,
    "dot": linalg.dot, "conj": math.conjugate, "conjugate": math.conjugate,
    "diagonal": shp.diagonal, "trace": shp.trace, "repeat": shp.repeat,
    "copy": shp.copy, "sort": searching.sort, "argsort": searching.argsort,
    "take": indexing.take, "nonzero": searching.nonzero, "to_device": _to_device,
}

_PROPERTIES = {
    "T": shp.transpose, "mT": shp.matrix_transpose, "real": math.real, "imag": math.imag,
    "itemsize": lambda self: self.dtype.itemsize,
    "nbytes": lambda self: self.size * self.dtype.itemsize,
}


# The ufuncs NumPy's operators call: `ndarray + x` with a traced `x` runs numpy.add(ndarray, x),
# which the tracer's `__array_ufunc__` hands to these (any other NumPy call on it raises).
_OPERATOR_UFUNCS = {
    np.add: math.add, np.subtract: math.subtract, np.multiply: math.multiply,
    np.true_divide: math.true_divide, np.floor_divide: math.floor_divide,
    np.remainder: math.remainder, np.divmod: math.divmod, np.power: math.power,
    np.matmul: linalg.matmul, np.bitwise_and: logic.bitwise_and,
    np.bitwise_or: logic.bitwise_or, np.bitwise_xor: logic.bitwise_xor,
    np.left_shift: logic.left_shift, np.right_shift: logic.right_shift, np.less: logic.less,
    np.less_equal: logic.less_equal, np.greater: logic.greater,
    np.greater_equal: logic.greater_equal, np.equal: logic.equal, np.not_equal: logic.not_equal,
}


def install():
    """Put the operators, methods and properties above on `ArrayBase`."""
    for name, fn in {**_OPERATORS, **_METHODS}.items():
        setattr(ArrayBase, name, fn)
    for name, fn in _PROPERTIES.items():
        setattr(ArrayBase, name, property(fn))
    numpy_operators.update(_OPERATOR_UFUNCS)


install()
