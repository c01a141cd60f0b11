"""Concrete arrays: `Array` wraps a numpy array plus its weak-type bit.

`ArrayBase` is the common base of `Array` and tracers; funcgrad.numpy installs the
operators and methods (`+`, `@`, `.T`, `.sum()`, `.at[...]`) on it at import time, so
the same methods work on concrete values and inside every transform.
"""

import numpy as np

from funcgrad import dtypes
from funcgrad.core.ir import ShapedArray

# Array types of other devices (e.g. cupy.ndarray) -> the provider that moves them to the
# host (`to_host`) and names their device; filled by funcgrad.devices.
_device_types = {}


def register_device_type(cls, provider):
    _device_types[cls] = provider


def device_provider(value):
    """The provider of a device array value, None for numpy (and other host) values."""
    return _device_types.get(type(value))


def host_value(v):
    """`v` as a numpy value (copied from its device when it lives on one)."""
    if type(v) is np.ndarray:
        return v
    provider = _device_types.get(type(v))
    return provider.to_host(v) if provider is not None else np.asarray(v)


class ArrayBase:
    """Base class of funcgrad arrays and tracers (`isinstance(x, ArrayBase)`)."""

    __slots__ = ()
    __array_priority__ = 100


class Array(ArrayBase):
    """A concrete funcgrad array: an immutable array value and a weak-type bit. The value is
    a numpy array on the CPU or a device array (a `cupy.ndarray` on a GPU, see
    `funcgrad.device_put`); converting with `numpy.asarray` copies it to the host.

    Example:
        >>> import funcgrad.numpy as fnp
        >>> fnp.arange(3.0) * 2
        Array([0., 2., 4.], dtype=float32)
    """

    __slots__ = ("_value", "weak_type", "_sharding", "__weakref__")

    def __init__(self, value, weak_type=False):
        self._value = value
        self.weak_type = weak_type

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)

    @property
    def aval(self):
        v = self._value
        return ShapedArray(v.shape, v.dtype, self.weak_type)

    def __array__(self, dtype=None, copy=None):
        # NumPy 2 trusts `copy`: `np.array(x)` (copy=True) must get a new, writable array;
        # `np.asarray(x)` gets a read-only view of the immutable value, as of a JAX array
        v = self._value
        if copy:
            return np.array(host_value(v), dtype=dtype, copy=True)
        v = np.asarray(v).view() if type(v) is np.ndarray else host_value(v)
        v.flags.writeable = False
        return v if dtype is None else v.astype(dtype)

    def __repr__(self):
        v = host_value(self._value)
        body = np.array2string(v, separator=", ", prefix="Array(")
        return f"Array({body}, dtype={v.dtype})"

    def __str__(self):
        return str(host_value(self._value))

    def __bool__(self):
        return bool(host_value(self._value))

    def __int__(self):
        return int(host_value(self._value))

    def __float__(self):
        return float(host_value(self._value))

    def __complex__(self):
        return complex(host_value(self._value))

    def __index__(self):
        return host_value(self._value).__index__()

    def __len__(self):
        if self._value.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self._value.shape[0]

    def __hash__(self):
        raise TypeError("funcgrad arrays are unhashable; pass a Python value as a static "
                        "argument instead")

    def item(self):
        return host_value(self._value).item()

    def tolist(self):
        return host_value(self._value).tolist()

    def block_until_ready(self):
        provider = _device_types.get(type(self._value))
        if provider is not None:
            provider.synchronize()
        return self

    @property
    def device(self):
        """The `funcgrad.devices.Device` holding this array (its sharding, when several do).
        `_sharding`, unset unless the array was placed (`device_put`, a `pmap` output), is
        kept by `funcgrad.sharding`, which also installs `.sharding` and `.devices()`."""
        sharding = getattr(self, "_sharding", None)
        if sharding is not None:
            placed = sharding.device_set
            return next(iter(placed)) if len(placed) == 1 else sharding
        from funcgrad.devices import device_of
        return device_of(self._value)

    def __reduce__(self):
        return (Array, (self._value, self.weak_type))


def to_array(x):
    """Convert an array-like (numpy array, Python scalar, nested list) to an `Array`.

    64-bit numpy inputs are canonicalized (to 32-bit unless x64 is on); Python scalars
    become weakly typed. A list holding a tracer is no constant: its `__array__` raises
    `TracerArrayConversionError` (funcgrad.numpy's `asarray_operand` stacks such lists).
    """
    t = type(x)
    if t is Array:
        return x
    if t is bool or t is int or t is float or t is complex:
        dt, weak = dtypes.scalar_dtype(x)
        if t is int:
            _check_int_range(x, dt)
        return Array(np.asarray(x, dt), weak)
    if isinstance(x, (np.ndarray, np.generic)):
        dt = dtypes.canonicalize(x.dtype)
        v = x if (dt == x.dtype and t is np.ndarray) else np.asarray(x, dt)
        return Array(v, False)
    if isinstance(x, ArrayBase):
        raise TypeError("to_array of a tracer")
    if t in _device_types or hasattr(x, "__cuda_array_interface__"):
        return _device_array(x)
    if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        v = np.asarray(x)
        if v.dtype == object:
            raise TypeError(f"cannot convert {type(x).__name__} of mixed or non-numeric "
                            "values to a funcgrad array")
        return to_array(v)
    raise TypeError(f"{type(x).__name__} is not a valid funcgrad array type; expected an "
                    "array, a Python scalar or a (nested) list of numbers")


def _device_array(x):
    """A device array (e.g. a `cupy.ndarray`) as an Array on its device, dtype canonical."""
    if type(x) not in _device_types:
        from funcgrad.devices import cuda_provider
        _ = cuda_provider().cupy  # importing it registers cupy.ndarray
    if type(x) not in _device_types:
        raise TypeError(f"{type(x).__name__} is a device array type funcgrad does not know")
    dt = dtypes.canonicalize(x.dtype)
    return Array(x if dt == x.dtype else _device_types[type(x)].asarray(x, dt), False)


def _check_int_range(x, dt):
    info = dtypes.iinfo(dt)
    if not info.min <= x <= info.max:
        raise OverflowError(f"Python int {x} is too large for {dt} (enable_x64 allows int64)")
