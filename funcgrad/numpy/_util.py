"""Shared helpers of funcgrad.numpy: operand conversion, dtype promotion, broadcasting, axes.

Everything here works on static metadata (shapes, dtypes, Python scalars) and emits lax
primitives; nothing computes on array values with numpy. The helpers are on the eager hot
path, so they avoid isinstance chains and cache what depends only on shapes and dtypes.
"""

import operator
from math import copysign

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.config import config
from funcgrad.core import Array, ArrayBase, concrete_value, to_array
from funcgrad.core.array import host_value
from funcgrad.devices import own_buffer

_PY_SCALARS = (bool, int, float, complex)
_BCAST_CACHE = {}
_ALL_AXES = [tuple(range(n)) for n in range(33)]
_bcast_bind = lax.broadcast_in_dim_p.bind
_select_bind = lax.select_n_p.bind
_convert_bind = lax.convert_element_type_p.bind


def all_axes(ndim):
    """(0, 1, ..., ndim-1), cached."""
    return _ALL_AXES[ndim] if ndim < 33 else tuple(range(ndim))


def asarray_operand(name, x, dtype=None):
    """`x` as an `Array` or tracer: the one conversion of every array-like argument of
    funcgrad.numpy. Python scalars and array-likes become Arrays; a (nested) list or tuple
    holding traced values is stacked (`stack_sequence`), so derivatives flow through it. With
    `dtype`, an array-like is converted to `dtype` by NumPy (one rounding); an Array or tracer
    is returned as it is. A NumPy array is copied when the Array would share its memory: the
    caller may write to it later, and a view op's result would change (JAX copies too)."""
    if isinstance(x, ArrayBase):
        return x
    try:
        out = to_array(x) if dtype is None else to_array(np.asarray(x, dtype))
        return own_buffer(out, x) if type(x) is np.ndarray else out
    except errors.TracerArrayConversionError:  # raised by a tracer inside the list
        if not isinstance(x, (list, tuple)):
            raise
        out = stack_sequence(name, x)
        return out if dtype is None else convert(out, dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise errors.op_error(name, f"cannot use {type(x).__name__} {_short_repr(x)} as an "
                              f"array ({e})") from None


_short_repr = errors.short_repr


def stack_sequence(name, seq):
    """A (nested) list or tuple holding arrays or traced values as one array, built with lax
    so that derivatives flow through its entries (autograd's behaviour; JAX raises instead).
    The dtype is the promotion of all entries (Python scalars weak), the result not weakly
    typed, as `jnp.array` of such a list; entries of different shapes are an error naming
    `name`.

    Example:
        >>> stack_sequence("sum", [fnp.ones(2), [0, 1]])
        Array([[1., 1.], [0., 1.]], dtype=float32)
    """
    leaves = []
    _sequence_leaves(name, seq, leaves)
    dt, _ = dtypes.promote_types(*[parts(a)[1:] for a in leaves]) if leaves else (
        dtypes.default_float(), False)
    return _stacked(name, seq, iter(leaves), dt)


def _sequence_leaves(name, seq, out):
    for e in seq:
        if isinstance(e, (list, tuple)):
            _sequence_leaves(name, e, out)
        else:
            out.append(e if type(e) in _PY_SCALARS else asarray_operand(name, e))


def _stacked(name, seq, leaves, dt):
    items = [_stacked(name, e, leaves, dt) if isinstance(e, (list, tuple))
             else convert(next(leaves), dt) for e in seq]
    if not items:
        return lax.full((0,), 0, dt)
    shapes = [shape_of(a) for a in items]
    if any(s != shapes[0] for s in shapes):
        raise errors.op_error(name, "cannot stack a list whose entries have different shapes "
                              f"{', '.join(str(s) for s in shapes)}",
                              cls=errors.FuncgradValueError,
                              hint="give every entry of a (nested) list the same shape")
    dims = all_axes(len(shapes[0]) + 1)[1:]
    return lax.concatenate([_bcast_bind(a, shape=(1,) + shapes[0], broadcast_dimensions=dims)
                            for a in items], 0)


def parts(x):
    """(shape, dtype, weak_type) of an Array, tracer or Python scalar."""
    t = type(x)
    if t is Array:
        v = x._value
        return v.shape, v.dtype, x.weak_type
    if t in _PY_SCALARS:
        return ((),) + dtypes.scalar_dtype(x)
    a = x.aval
    return a.shape, a.dtype, a.weak_type


def shape_of(x):
    t = type(x)
    if t is Array:
        return x._value.shape
    return x.aval.shape if t not in _PY_SCALARS else ()


def dtype_of(x):
    t = type(x)
    if t is Array:
        return x._value.dtype
    return x.aval.dtype if t not in _PY_SCALARS else dtypes.scalar_dtype(x)[0]


def broadcast_shapes(name, *shapes):
    """NumPy's broadcast of `shapes`; a FuncgradValueError naming `name` and the shapes."""
    r = _BCAST_CACHE.get(shapes)
    if r is not None:
        return r
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(-nd, 0):
        size = 1
        for s in shapes:
            if len(s) >= -i:
                d = s[i]
                if d != 1:
                    if size != 1 and d != size:
                        raise errors.op_error(
                            name, "operands could not be broadcast together with shapes "
                            + " ".join(str(tuple(s)) for s in shapes),
                            cls=errors.FuncgradValueError,
                            hint="NumPy broadcasting aligns trailing axes; each pair of sizes "
                                 "must be equal or one of them 1")
                    size = d
        out.append(size)
    r = tuple(out)
    if len(_BCAST_CACHE) < 4096:
        _BCAST_CACHE[shapes] = r
    return r


def _trailing_dims(rank, nd):
    """broadcast_dimensions aligning a rank-`rank` operand with the last axes of rank `nd`."""
    return _ALL_AXES[nd][nd - rank:] if nd < 33 else tuple(range(nd - rank, nd))


def broadcast_to_shape(x, shape):
    """`x` broadcast (NumPy rules, already checked) to `shape` with one broadcast_in_dim."""
    s = shape_of(x)
    if type(shape) is not tuple:
        shape = tuple(shape)
    if s == shape:
        return x
    return _bcast_bind(x, shape=shape, broadcast_dimensions=_trailing_dims(len(s), len(shape)))


_WEAK_SCALARS = {}


def weak_scalar(x, dtype):
    """A weakly typed rank-0 Array of Python scalar `x`, cached (Arrays are immutable)."""
    if x or type(x) is not float or copysign(1.0, x) > 0:  # -0.0 must not hit 0.0's entry
        key = (x, dtype)
        a = _WEAK_SCALARS.get(key)
        if a is None:
            a = Array(np.asarray(x, dtype), True)
            if x == x and len(_WEAK_SCALARS) < 1024:
                _WEAK_SCALARS[key] = a
        return a
    return Array(np.asarray(x, dtype), True)


def scalar_array(x, dtype, weak, name="asarray"):
    """A Python scalar as a rank-0 Array of `dtype` (a literal under tracing)."""
    try:
        if weak:
            return weak_scalar(x, dtype)
        return Array(np.asarray(x, dtype), weak)
    except OverflowError:
        raise errors.op_error(name, f"Python scalar {errors.short_repr(x)} does not fit in {dtype}",
                              cls=OverflowError) from None


def convert(x, dtype, weak=False):
    """`x` (array, tracer or Python scalar) as `dtype` with weak type `weak`."""
    if type(x) in _PY_SCALARS:
        return scalar_array(x, dtype, weak)
    if dtype_of(x) == dtype and x.weak_type == weak:
        return x
    return lax.convert_element_type(x, dtype, weak_type=weak)


def promote_dtypes(name, *dtypes_weak):
    """`dtypes.promote_types` for operation `name`: a `TypePromotionError` names it and the
    user's line."""
    try:
        return dtypes.promote_types(*dtypes_weak)
    except dtypes.TypePromotionError as e:
        raise errors.op_error(name, str(e), cls=dtypes.TypePromotionError) from None


def promote(name, args, inexact=False, broadcast=True):
    """Operands converted to their common dtype (JAX's lattice) and broadcast to one shape.

    Python scalars are weak; with `inexact` an integer/bool result becomes a float (JAX's
    `to_inexact`: true_divide, sin). Rank-0 operands are left rank-0: lax elementwise ops
    broadcast them. Returns a list (a tuple for two operands, see `promote2`).
    """
    if len(args) == 2:
        return promote2(name, args[0], args[1], inexact, broadcast)
    args = [a if type(a) in _PY_SCALARS else asarray_operand(name, a) for a in args]
    ps = [parts(a) for a in args]
    dt, weak = promote_dtypes(name, *[(p[1], p[2]) for p in ps])
    if inexact:
        dt = dtypes.to_inexact(dt)
    if broadcast and len({len(p[0]) for p in ps if p[0]}) > 1:
        check_rank_promotion(name, [p[0] for p in ps])
    shape = broadcast_shapes(name, *[p[0] for p in ps]) if broadcast else None
    return [_fit(name, a, s, d, dt, weak, shape) for a, (s, d, _) in zip(args, ps)]


def check_rank_promotion(name, shapes):
    """`config.numpy_rank_promotion`: "warn" or "raise" when operands of different nonzero
    ranks broadcast (JAX's messages); "allow" (the default) does nothing."""
    mode = config._values["numpy_rank_promotion"]
    if mode == "allow":
        return
    shapes = " ".join(str(tuple(s)) for s in shapes)
    if mode == "raise":
        raise errors.FuncgradValueError(
            f"Operands could not be broadcast together for {name} on shapes {shapes} and with "
            f"the config option jax_numpy_rank_promotion='raise'.\n{errors.where()}\n  hint: "
            "broadcast explicitly (x[None, :], fnp.broadcast_to) or set it to 'allow'.")
    import warnings
    warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {shapes}. "
                  "Set the jax_numpy_rank_promotion config option to 'allow' to disable this "
                  "warning.", stacklevel=3)


def _fit(name, a, s, d, dt, weak, shape):
    """Operand `a` (shape s, dtype d) converted to `dt` and broadcast to `shape` (if given)."""
    if type(a) in _PY_SCALARS:
        return scalar_array(a, dt, weak, name)
    if d != dt:
        a = _convert_bind(a, new_dtype=dt, weak_type=weak)
    if shape is not None and s and s != shape:
        a = _bcast_bind(a, shape=shape, broadcast_dimensions=_trailing_dims(len(s), len(shape)))
    return a


def promote2(name, x, y, inexact=False, broadcast=True):
    """`promote` for two operands (the common case), without intermediate lists."""
    x_in = x
    tx, ty = type(x), type(y)
    if tx is Array:
        v = x._value
        sx, dx, wx = v.shape, v.dtype, x.weak_type
    else:
        if tx not in _PY_SCALARS:
            x = asarray_operand(name, x)
        sx, dx, wx = parts(x)
    if ty is Array:
        v = y._value
        sy, dy, wy = v.shape, v.dtype, y.weak_type
    else:
        if ty not in _PY_SCALARS:
            y = asarray_operand(name, y)
        sy, dy, wy = parts(y)
    dt, weak = promote_dtypes(name, (dx, wx), (dy, wy))
    if inexact:
        dt = dtypes.to_inexact(dt)
    if not broadcast:
        shape = None
    elif sx == sy or not sy:
        shape = sx
    elif not sx:
        shape = sy
    else:
        if len(sx) != len(sy):
            check_rank_promotion(name, (sx, sy))
        shape = broadcast_shapes(name, sx, sy)
    if (dx is dt and dy is dt and (shape is None or ((sx == shape or not sx)
                                                     and (sy == shape or not sy)))
            and tx not in _PY_SCALARS and ty not in _PY_SCALARS):
        return x, y
    x = _fit(name, x, sx, dx, dt, weak, shape)
    return x, (x if y is x_in else _fit(name, y, sy, dy, dt, weak, shape))


def canonical_axis(name, axis, ndim):
    """A non-negative axis in [0, ndim); FuncgradValueError naming `name` otherwise."""
    try:
        a = operator.index(axis)
    except TypeError:
        raise errors.op_error(name, f"axis must be an int, got {_short_repr(axis)}",
                              cls=errors.FuncgradTypeError) from None
    if not -ndim <= a < ndim:
        raise errors.op_error(name, f"axis {axis} is out of bounds for an array of "
                              f"dimension {ndim}", cls=errors.FuncgradAxisError)
    return a + ndim if a < 0 else a


def axis_tuple(name, axis):
    """`axis` (an int or a sequence of ints, not None) as a tuple of ints, not yet checked
    against a rank; a FuncgradTypeError naming `name` otherwise."""
    if isinstance(axis, (tuple, list)):
        return tuple(static_int(name, a, "each axis") for a in axis)
    return (static_int(name, axis, "axis"),)


def canonical_axes(name, axis, ndim):
    """`axis` (None, int or sequence) as a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return all_axes(ndim)
    if type(axis) is int:
        if 0 <= axis < ndim:
            return (axis,)
        return (canonical_axis(name, axis, ndim),)
    if isinstance(axis, (tuple, list)):
        axes = tuple(sorted(canonical_axis(name, a, ndim) for a in axis))
        if len(set(axes)) != len(axes):
            raise errors.op_error(name, f"repeated axis in {tuple(axis)}",
                                  cls=errors.FuncgradValueError)
        return axes
    return (canonical_axis(name, axis, ndim),)


def check_no_out(name, out):
    if out is not None:
        raise errors.op_error(name, "the `out` argument is not supported: funcgrad arrays are "
                              "immutable", hint="use the returned array (or x.at[...].set)")


def static_int(name, x, what):
    """A Python int from a static value; a clear error for traced values."""
    from funcgrad.core import is_concrete
    if isinstance(x, ArrayBase) and not is_concrete(x):
        raise errors.ConcretizationTypeError(
            f"{name}: {what} must be static (a Python int), got a traced value {x.aval}\n"
            f"{errors.where(errors.user_frame(2))}\n"
            "  hint: shapes in funcgrad are static; pass a Python int (mark it static under "
            "jit with static_argnums)")
    try:
        return operator.index(x)
    except TypeError:
        raise errors.op_error(name, f"{what} must be an int, got {_short_repr(x)}") from None


def static_array(name, x, what):
    """A static array-like argument (`pad_width`, `repeats`) as a numpy array. Traced values
    in it (also inside lists) give their known values under eager grad (define-by-run); one
    without a known value (under jit or vmap) is a ConcretizationTypeError naming `name`."""
    try:
        return np.asarray(x)  # numbers, lists of them, Arrays
    except errors.TracerArrayConversionError:
        return np.asarray(_known(name, x, what))


def _known(name, x, what):
    if isinstance(x, (list, tuple)):
        return [_known(name, e, what) for e in x]
    if not isinstance(x, ArrayBase):
        return x
    v = concrete_value(x)
    if v is None:
        raise errors.ConcretizationTypeError(
            f"{name}: {what} must be static, got a traced value {x.aval}\n"
            f"{errors.where(errors.user_frame(2))}\n"
            "  hint: pass Python numbers (mark the argument static under jit with "
            "static_argnums)")
    return host_value(v)


def static_shape(name, shape):
    """A shape argument (int or sequence of ints) as a tuple of Python ints."""
    if isinstance(shape, (int, np.integer, ArrayBase)):
        shape = (shape,)
    try:
        entries = tuple(shape)
    except TypeError:
        raise errors.op_error(name, f"shape must be an int or a sequence of ints, got "
                              f"{_short_repr(shape)}") from None
    out = tuple(static_int(name, s, "a shape entry") for s in entries)
    if any(s < 0 for s in out):
        raise errors.op_error(name, f"negative dimensions are not allowed: {out}",
                              cls=errors.FuncgradValueError)
    return out


def user_dtype(dtype):
    """A dtype argument canonicalized (64-bit narrowed unless x64), or None."""
    return None if dtype is None else dtypes.canonicalize(dtype)


def select(pred, on_false, on_true):
    """`lax.select_n(pred, on_false, on_true)` after broadcasting all three to one shape.

    `on_false` and `on_true` must already share a dtype (Arrays or tracers).
    """
    shapes = (shape_of(pred), shape_of(on_false), shape_of(on_true))
    if len({len(s) for s in shapes if s}) > 1:
        check_rank_promotion("where", shapes)
    shape = broadcast_shapes("where", *shapes)
    return _select_bind(broadcast_to_shape(pred, shape), broadcast_to_shape(on_false, shape),
                        broadcast_to_shape(on_true, shape))


def full_like_of(x, value, dtype=None):
    """An array of `x`'s shape (and dtype unless given) filled with the Python `value`."""
    dt = dtype_of(x) if dtype is None else dtype
    return lax.full(shape_of(x), value, dt)
