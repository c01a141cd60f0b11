"""Array creation of funcgrad.numpy: array/asarray, zeros/ones/full/empty and their `_like`
forms, arange, linspace, logspace, eye, identity, tri/tril/triu, meshgrid, indices.

Python data is converted once (`funcgrad.core.to_array`, canonicalizing 64-bit dtypes
unless x64); generated arrays come from lax (`full`, `iota`), so they appear in traced IR.
Every function takes the Array API's `device=` (None, a `funcgrad.Device` or a name like
"cpu"; see `place`), and `asarray` its `copy=`.
"""

import math as pymath

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array, ArrayBase, get_aval, is_concrete, placement, to_array
from funcgrad.devices import own_buffer
from funcgrad.lax.elementwise import float_to_int
from funcgrad.numpy._util import (
    asarray_operand,
    broadcast_shapes,
    broadcast_to_shape,
    convert,
    dtype_of,
    promote,
    select,
    shape_of,
    stack_sequence,
    static_array,
    static_int,
    static_shape,
    user_dtype,
)

__all__ = [  # (`place` is for the sibling modules, not exported)
    "arange", "array", "asarray", "empty", "empty_like", "eye", "full", "full_like",
    "identity", "indices", "linspace", "logspace", "meshgrid", "ones", "ones_like", "tri",
    "tril", "triu", "zeros", "zeros_like",
]


# --- devices -----------------------------------------------------------------------------------

def place(name, x, device, out_sharding=None):
    """`x` on `device` (None: where it is), or where JAX's `out_sharding` says (None or one
    device: `core.placement`; not both). A traced `x` stays as it is once the device is
    checked: placement is a property of concrete arrays."""
    if out_sharding is not None:
        if device is not None:
            raise errors.op_error(name, "specifying both device and out_sharding is an error "
                                  "(as in JAX)", cls=errors.FuncgradValueError)
        return placement.place(name, x, out_sharding)
    if device is None:
        return x
    from funcgrad.devices import _resolve, device_put
    try:
        d = _resolve(device)
    except (errors.FuncgradError, ValueError) as e:
        raise errors.op_error(name, f"invalid device {errors.short_repr(device)} ({e})",
                              cls=errors.FuncgradValueError,
                              hint="pass None, 'cpu' or a device from fnp.__array_namespace_info__"
                              "().devices()") from None
    return device_put(x, d) if type(x) is Array else x


# --- conversion -------------------------------------------------------------------------------

def array(object, dtype=None, copy=True, order="K", ndmin=0, *, device=None,
          out_sharding=None):
    """A funcgrad array from an array, a Python scalar (weakly typed) or nested sequences
    (which may hold funcgrad arrays and tracers, stacked). With `copy=True` (the default)
    the result never shares memory with `object`: changing a NumPy array afterwards does not
    change it; `copy=False` may share a NumPy array's buffer.

    Example:
        >>> fnp.array([[1, 2], [3, 4]]).dtype
        dtype('int32')
    """
    out = _convert("array", object, user_dtype(dtype), True if copy else False)
    nd = len(shape_of(out))
    if ndmin > nd:
        out = lax.reshape(out, (1,) * (ndmin - nd) + shape_of(out))
    return place("array", out, device, out_sharding)


def _convert(name, object, dt, copy):
    """`object` as an Array (or tracer) of dtype `dt` (None: its own). `copy` is the Array API's
    mode: True gives a new buffer always, None copies a buffer the caller may still write to
    (a NumPy or device array: funcgrad arrays are immutable, as JAX's), False shares it."""
    if isinstance(object, ArrayBase):
        out = object
        if copy and type(object) is Array and (dt is None or dt == object.dtype):
            out = Array(object._value.copy(), object.weak_type)  # donation-safe
    elif isinstance(object, (list, tuple)) and _holds_arrays(object):
        out = stack_sequence("array", object)
    else:
        try:
            out = to_array(object) if dt is None else Array(_host_array(object, dt), False)
        except (TypeError, ValueError) as e:
            raise errors.op_error(name, f"cannot convert {type(object).__name__} to a "
                                  f"funcgrad array ({e})") from None
        except OverflowError as e:
            raise errors.op_error(name, f"{e}", cls=errors.FuncgradOverflowError,
                                  hint="choose a wider dtype (enable_x64 allows 64 bits)"
                                  ) from None
        if copy is not False:
            out = own_buffer(out, object)
    return out if dt is None else convert(out, dt, False)


def _host_array(obj, dt):
    """Python/numpy data as a numpy array of `dt`; floats become integers as
    `lax.convert_element_type` converts them (saturating, NaN -> 0), not as numpy casts."""
    v = np.asarray(obj)
    if dtypes.kind(v.dtype) in "fc" and dtypes.kind(dt) in "iu":
        return float_to_int(v.real, dt)
    if v.dtype == object:
        raise TypeError(f"{type(obj).__name__} of mixed or non-numeric values")
    return np.asarray(obj, dt)


def _holds_arrays(seq):
    for o in seq:
        if isinstance(o, ArrayBase) or (isinstance(o, (list, tuple)) and _holds_arrays(o)):
            return True
    return False


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
    """`a` as a funcgrad array. `copy=None` copies what the caller could still change (a
    NumPy or device array, as JAX does) and never a funcgrad array of the requested dtype;
    `copy=True` always gives a new buffer; `copy=False` shares a NumPy array's buffer and
    raises when a copy is needed (the Array API's modes).

    Float64 NumPy input becomes float32 unless x64 is on; Python scalars stay weakly typed.

    Example:
        >>> fnp.asarray([1.0, 2.0], copy=True).dtype
        dtype('float32')
    """
    if copy is False:
        _check_no_copy(a, dtype)
    if type(a) is Array and dtype is None and not copy:
        return place("asarray", a, device, out_sharding)
    return place("asarray", _convert("asarray", a, user_dtype(dtype), copy), device,
                 out_sharding)


def _check_no_copy(a, dtype):
    """The Array API's `asarray(..., copy=False)`: an error when `a` cannot be used as is."""
    if not isinstance(a, (ArrayBase, np.ndarray)):
        raise errors.op_error("asarray", f"copy=False, but a {type(a).__name__} must be copied "
                              "into a new array", cls=errors.FuncgradValueError,
                              hint="pass copy=None (copy only when needed)")
    have = dtype_of(a) if isinstance(a, ArrayBase) else a.dtype
    want = dtypes.canonicalize(have if dtype is None else dtype)
    if want != have:
        why = " (x64 is off)" if dtype is None or want != np.dtype(dtype) else ""
        raise errors.op_error("asarray", f"copy=False, but {type(a).__name__} of {have} must be "
                              f"copied to {want}{why}", cls=errors.FuncgradValueError,
                              hint="pass copy=None (copy only when needed)")


# --- filled arrays ------------------------------------------------------------------------------

def _fill_dtype(dtype):
    return dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    """An array of zeros (float32 unless `dtype`); `device`/`out_sharding` as in `place`."""
    return place("zeros", lax.full(static_shape("zeros", shape), 0, _fill_dtype(dtype)), device,
                 out_sharding)


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    """An array of ones (float32 unless `dtype`)."""
    return place("ones", lax.full(static_shape("ones", shape), 1, _fill_dtype(dtype)), device,
                 out_sharding)


def empty(shape, dtype=None, *, device=None, out_sharding=None):
    """Like `zeros`: funcgrad arrays are immutable, so "uninitialized" is zeros."""
    return place("empty", zeros(shape, dtype), device, out_sharding)


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    """An array of `shape` filled with `fill_value` (an array fill value broadcasts).

    Example:
        >>> fnp.full((2, 2), 7)
        Array([[7, 7],
               [7, 7]], dtype=int32)
    """
    shape = static_shape("full", shape)
    if isinstance(fill_value, (bool, int, float, complex, np.generic)):
        return place("full", lax.full(shape, fill_value, None if dtype is None
                                      else dtypes.canonicalize(dtype)), device, out_sharding)
    v = asarray(fill_value, dtype)
    from funcgrad.numpy.shape import broadcast_to
    return place("full", broadcast_to(v, shape), device, out_sharding)


def _like(name, a, fill, dtype, shape, device, out_sharding):
    a = asarray_operand(name, a)
    shape = None if shape is None else static_shape(name, shape)
    out = lax.full_like(a, fill, None if dtype is None else dtypes.canonicalize(dtype), shape)
    return place(name, out, device, out_sharding)


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Zeros with the shape and dtype of `a` (unless given)."""
    return _like("zeros_like", a, 0, dtype, shape, device, out_sharding)


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Ones with the shape and dtype of `a` (unless given)."""
    return _like("ones_like", a, 1, dtype, shape, device, out_sharding)


def empty_like(prototype, dtype=None, shape=None, *, device=None, out_sharding=None):
    """Like `zeros_like`."""
    return _like("empty_like", prototype, 0, dtype, shape, device, out_sharding)


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    """`fill_value` with the shape and dtype of `a` (unless given)."""
    if isinstance(fill_value, (bool, int, float, complex, np.generic)):
        return _like("full_like", a, fill_value, dtype, shape, device, out_sharding)
    a = asarray_operand("full_like", a)
    return full(shape_of(a) if shape is None else shape, fill_value,
                dtype_of(a) if dtype is None else dtype, device=device,
                out_sharding=out_sharding)


# --- ranges -------------------------------------------------------------------------------------

def _static_number(name, x):
    if isinstance(x, ArrayBase):
        if not is_concrete(x):
            raise errors.ConcretizationTypeError(
                f"{name}: arguments must be static (Python numbers), got a traced value "
                f"{x.aval}\n{errors.where(errors.user_frame(3))}\n"
                "  hint: the length of the result must be known when tracing; pass Python "
                "numbers or mark the argument static under jit")
        return static_array(name, x, "each argument").item()
    return x


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    """Evenly spaced values in [start, stop) with `step` (static numbers).

    Example:
        >>> fnp.arange(1, 7, 2)
        Array([1, 3, 5], dtype=int32)
    """
    return place("arange", _arange(start, stop, step, dtype), device, out_sharding)


def _arange(start, stop, step, dtype):
    given = [v for v in (start, stop, step) if v is not None]
    start, stop, step = (_static_number("arange", v) for v in (start, stop, step))
    if any(isinstance(v, (complex, np.complexfloating)) for v in (start, stop, step)):
        raise errors.op_error("arange", "start, stop and step must be real numbers",
                              cls=errors.FuncgradTypeError, hint="use linspace for complex ranges")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise errors.op_error("arange", "step must not be zero", cls=errors.FuncgradValueError)
    # JAX's: the promoted dtype of the arguments (Python numbers weak, NumPy scalars and arrays
    # keep theirs: arange(np.int16(3)) is int16)
    dt = _range_dtype(given) if dtype is None else dtypes.canonicalize(dtype)
    if dtypes.kind(dt) == "b":
        dt = dtypes.default_int()
    n = max(pymath.ceil((stop - start) / step), 0)
    if dtypes.kind(dt) in "iu" and all(float(v).is_integer() for v in (start, step)):
        out = lax.iota(dt, n)
        if step != 1:
            out = lax.mul(out, Array(np.asarray(int(step), dt)))
        return lax.add(out, Array(np.asarray(int(start), dt))) if start else out
    comp = dt if dtypes.kind(dt) in "fc" else dtypes.default_float()
    out = lax.iota(comp if dtypes.kind(comp) == "f" else dtypes.default_float(), n)
    out = lax.add(lax.mul(out, Array(np.asarray(step, out.dtype))),
                  Array(np.asarray(start, out.dtype)))
    return out if dtype_of(out) == dt else lax.convert_element_type(out, dt)


def _range_dtype(args):
    """The promoted dtype of arange's arguments (Python numbers weak, by type alone)."""
    pairs = [dtypes.scalar_dtype(a) if type(a) in (bool, int, float) else
             (get_aval(a).dtype, get_aval(a).weak_type) for a in args]
    return dtypes.promote_types(*pairs)[0]


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """`num` evenly spaced samples from `start` to `stop` (inclusive unless endpoint=False);
    array `start`/`stop` broadcast and add the sample axis at `axis`.

    Example:
        >>> fnp.linspace(0.0, 1.0, 5)
        Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    out = _linspace(start, stop, num, endpoint, retstep, dtype, axis)
    if retstep:
        return place("linspace", out[0], device), out[1]
    return place("linspace", out, device)


def _linspace(start, stop, num, endpoint, retstep, dtype, axis):
    num = static_int("linspace", num, "num")
    if num < 0:
        raise errors.op_error("linspace", f"number of samples {num} must be non-negative",
                              cls=errors.FuncgradValueError)
    start, stop = promote("linspace", (start, stop), inexact=True)
    both = broadcast_shapes("linspace", shape_of(start), shape_of(stop))
    start, stop = broadcast_to_shape(start, both), broadcast_to_shape(stop, both)
    comp = dtype_of(start)
    dt = comp if dtype is None else dtypes.canonicalize(dtype)
    bshape = shape_of(start)
    div = (num - 1) if endpoint else num
    step = lax.div(lax.sub(stop, start), Array(np.asarray(max(div, 1), comp)))
    shape = (num,) + bshape
    real = np.empty(0, comp).real.dtype  # iota is real: a complex range steps from 0, 1, ...
    iota = lax.broadcasted_iota(real, shape, 0)
    iota = iota if real == comp else lax.convert_element_type(iota, comp)
    if bshape:
        start_b = lax.broadcast_in_dim(start, shape, tuple(range(1, len(shape))))
        step_b = lax.broadcast_in_dim(step, shape, tuple(range(1, len(shape))))
        stop_b = lax.broadcast_in_dim(stop, (1,) + bshape, tuple(range(1, len(shape))))
    else:
        start_b, step_b = start, step
        stop_b = lax.reshape(stop, (1,))
    out = lax.add(lax.mul(iota, step_b), start_b) if num > 1 or not endpoint else \
        broadcast_to_shape(start, shape)
    if endpoint and num > 1:
        lim = list(shape)
        lim[0] = num - 1
        out = lax.concatenate([lax.slice(out, (0,) * len(shape), tuple(lim)), stop_b], 0)
    if dtypes.kind(dt) in "iu":
        out = lax.floor(out)
    out = out if dtype_of(out) == dt else lax.convert_element_type(out, dt)
    if axis != 0 and bshape:
        from funcgrad.numpy.shape import moveaxis
        out = moveaxis(out, 0, axis)
    if retstep:
        return out, step if div > 0 else Array(np.asarray(np.nan, comp))
    return out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """`base ** linspace(start, stop, num)`."""
    from funcgrad.numpy.math import power
    exps = linspace(start, stop, num, endpoint, dtype=None, axis=axis)
    out = power(base, exps)
    return out if dtype is None else convert(out, dtypes.canonicalize(dtype), False)


# --- matrices -----------------------------------------------------------------------------------

def _tri_mask(n, m, k):
    """Bool (n, m) mask of j <= i + k."""
    idt = dtypes.default_int()
    rows = lax.broadcasted_iota(idt, (n, m), 0)
    cols = lax.broadcasted_iota(idt, (n, m), 1)
    return lax.ge(lax.add(rows, Array(np.asarray(k, idt))), cols)


def eye(N, M=None, k=0, dtype=None, *, device=None):
    """A 2-D array with ones on the k-th diagonal and zeros elsewhere.

    Example:
        >>> fnp.eye(2, 3, k=1)
        Array([[0., 1., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    n = static_int("eye", N, "N")
    m = n if M is None else static_int("eye", M, "M")
    k = max(-n, min(static_int("eye", k, "k"), m))  # beyond the array: no diagonal
    idt = dtypes.default_int()
    rows = lax.broadcasted_iota(idt, (n, m), 0)
    cols = lax.broadcasted_iota(idt, (n, m), 1)
    mask = lax.eq(lax.add(rows, Array(np.asarray(k, idt))), cols)
    return place("eye", lax.convert_element_type(mask, _fill_dtype(dtype)), device)


def identity(n, dtype=None):
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below the k-th diagonal of an N x M array, zeros above."""
    n = static_int("tri", N, "N")
    m = n if M is None else static_int("tri", M, "M")
    return lax.convert_element_type(_tri_mask(n, m, static_int("tri", k, "k")),
                                    _fill_dtype(dtype))


def _tri_select(name, m, k, lower):
    m = asarray_operand(name, m)
    s = shape_of(m)
    if len(s) < 2:
        raise errors.op_error(name, f"input must be at least 2-D, got shape {s}",
                              cls=errors.FuncgradValueError)
    mask = _tri_mask(s[-2], s[-1], static_int(name, k, "k") - (0 if lower else 1))
    zero = lax.full((), 0, dtype_of(m))
    mask = broadcast_to_shape(mask, s)
    return select(mask, zero, m) if lower else select(mask, m, zero)


def tril(m, k=0):
    """`m` with the elements above the k-th diagonal zeroed (on the last two axes)."""
    return _tri_select("tril", m, k, True)


def triu(m, k=0):
    """`m` with the elements below the k-th diagonal zeroed (on the last two axes)."""
    return _tri_select("triu", m, k, False)


# --- grids --------------------------------------------------------------------------------------

def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors ('xy': Cartesian, 'ij': matrix indexing).

    Example:
        >>> [g.shape for g in fnp.meshgrid(fnp.arange(3), fnp.arange(2))]
        [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise errors.op_error("meshgrid", f"indexing must be 'xy' or 'ij', got "
                                          f"{errors.short_repr(indexing)}",
                              cls=errors.FuncgradValueError)
    from funcgrad.numpy.shape import ravel
    xs = [ravel(asarray(x)) for x in xi]  # (a sparse grid may be a view: not of a NumPy array)
    n = len(xs)
    sizes = [shape_of(x)[0] for x in xs]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(xs):
        pos = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and n >= 2 else i
        if sparse:
            out.append(lax.reshape(x, tuple(shape_of(x)[0] if d == pos else 1
                                            for d in range(n))))
        else:
            out.append(lax.broadcast_in_dim(x, tuple(sizes), (pos,)))
    return out


def indices(dimensions, dtype=None, sparse=False):
    """An array (or, with sparse, a tuple) of index grids for an array of shape `dimensions`."""
    dims = static_shape("indices", dimensions)
    dt = dtypes.default_int() if dtype is None else dtypes.canonicalize(dtype)
    if sparse:
        return tuple(lax.reshape(lax.iota(dt, d), tuple(d if j == i else 1
                                                           for j in range(len(dims))))
                     for i, d in enumerate(dims))
    grids = [lax.broadcasted_iota(dt, dims, i) for i in range(len(dims))]
    if not grids:
        return lax.full((0,), 0, dt)
    return lax.concatenate([lax.reshape(g, (1,) + dims) for g in grids], 0)
