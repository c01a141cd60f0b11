"""Reductions of funcgrad.numpy: sum, mean, var, std, max, min, prod, argmax, all, any,
cumulative sums and products, NaN-ignoring variants, ptp, average, median.

`axis` is None, an int (negative counts from the end) or a tuple; `keepdims` keeps the
reduced axes with size 1. Dtypes follow JAX: sums of bools and small integers give the
default integer, means and variances of integers give the default float.
"""

import builtins

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array
from funcgrad.numpy._util import (
    all_axes,
    asarray_operand,
    broadcast_to_shape,
    canonical_axes,
    canonical_axis,
    check_no_out,
    convert,
    dtype_of,
    select,
    shape_of,
    user_dtype,
    weak_scalar,
)
from funcgrad.numpy.logic import _as_bool, isnan
from funcgrad.numpy.math import _scalar_like

__all__ = [
    "all", "amax", "amin", "any", "argmax", "argmin", "average", "count_nonzero", "cumprod",
    "cumsum", "cumulative_prod", "cumulative_sum", "max", "mean", "median", "min", "nanargmax",
    "nanargmin", "nanmax", "nanmean", "nanmin", "nanprod", "nanstd", "nansum", "nanvar",
    "prod", "ptp", "std", "sum", "var",
]

_reduce_sum_bind = lax.reduce_sum_p.bind
_div_bind = lax.div_p.bind


def _fast_axes(v, axis):
    """The axes of an eager fast path (None: all; an in-range int), or None to fall back."""
    if axis is None:
        return all_axes(v.ndim)
    if type(axis) is int:
        nd = v.ndim
        if 0 <= axis < nd:
            return (axis,)
        if -nd <= axis < 0:
            return (axis + nd,)
    return None


def _fast_reduce(bind, a, axis, keepdims):
    """`bind(a, axes=...)` for an Array `a` and a simple `axis`, or None to fall back."""
    v = a._value
    axes = _fast_axes(v, axis)
    if axes is None:
        return None
    r = bind(a, axes=axes)
    return _keep(r, v.shape, axes) if keepdims else r


def _keep(r, shape, axes):
    """Re-insert the reduced `axes` of `shape` with size 1 (keepdims)."""
    return lax.reshape(r, tuple(1 if i in axes else s for i, s in enumerate(shape)))


def _sum_dtype(dt):
    """JAX's accumulation dtype: bools and narrow integers widen to the default int/uint."""
    if dtypes.kind(dt) == "b":
        return dtypes.default_int()
    if dtypes.kind(dt) == "i" and dt.itemsize < dtypes.default_int().itemsize:
        return dtypes.default_int()
    if dtypes.kind(dt) == "u" and dt.itemsize < dtypes.default_uint().itemsize:
        return dtypes.default_uint()
    return dt


def _upcast_f16(dt):
    """JAX's computation dtype of a sum, product, mean or variance of `dt` (with no dtype
    given): float16 and bfloat16 accumulate in float32, and the result is rounded once."""
    return dtypes.float32 if dt == dtypes.float16 or dt.name == "bfloat16" else dt


def _prepare(name, a, axis, dtype, out, where, identity, acc_dtype=_sum_dtype, upcast=False):
    """(operand converted to the computation dtype with `where` masked out, axes, its shape,
    the result dtype). The computation dtype is the result dtype, or with `upcast` (and no
    `dtype` given) float32 for float16 and bfloat16 (`_upcast_f16`)."""
    check_no_out(name, out)
    a = asarray_operand(name, a)
    shape = shape_of(a)
    axes = canonical_axes(name, axis, len(shape))
    result = acc_dtype(dtype_of(a)) if dtype is None else user_dtype(dtype)
    dt = _upcast_f16(result) if upcast and dtype is None else result
    a = convert(a, dt, a.weak_type)
    if where is not None:
        mask = broadcast_to_shape(_as_bool(name, where), shape)
        a = select(mask, _identity(identity, dt, a), a)
    return a, axes, shape, result


def _identity(kind, dt, like):
    if kind == "max":
        v = dtypes.lowest(dt)
    elif kind == "min":
        v = dtypes.highest(dt)
    else:
        v = kind
    return Array(np.asarray(v, dt), like.weak_type)


def _finish(r, shape, axes, keepdims, initial, combine):
    if initial is not None:
        r = combine(r, initial)
    return _keep(r, shape, axes) if keepdims else r


# --- sum / prod -------------------------------------------------------------------------------

def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    """Sum of elements over `axis`.

    Args:
        a: array-like.
        axis: None (all axes), an int (negative counts from the end) or a tuple of ints.
        dtype: the accumulation and result dtype; by default bools and integers narrower
            than the default int sum in the default int (int32), other dtypes in their own.
        promote_integers: False keeps narrow integers in their own dtype (bools still sum
            in the default int), as in JAX.
        keepdims: keep the reduced axes with size 1.
        initial: a value added to the sum.
        where: a bool mask broadcastable to `a`; masked-out elements count as 0.

    Returns:
        The sums, of shape `a.shape` without (or, with keepdims, with size-1) reduced axes.

    Raises:
        FuncgradValueError: for an out-of-range or repeated axis.

    Example:
        >>> fnp.sum(fnp.ones((2, 3)), axis=0)
        Array([2., 2., 2.], dtype=float32)
    """
    if (type(a) is Array and dtype is None and initial is None and where is None
            and out is None and dtypes.kind(a._value.dtype) in "fc"
            and _upcast_f16(a._value.dtype) is a._value.dtype):
        r = _fast_reduce(_reduce_sum_bind, a, axis, keepdims)
        if r is not None:
            return r
    from funcgrad.numpy.math import add
    a, axes, shape, dt = _prepare("sum", a, axis, dtype, out, where, 0,
                                  _sum_dtype if promote_integers else _bool_to_int, upcast=True)
    r = _finish(lax.reduce_sum(a, axes), shape, axes, keepdims, initial, add)
    return convert(r, dt, r.weak_type)


def _bool_to_int(dt):
    return dtypes.default_int() if dtypes.kind(dt) == "b" else dt


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    """Product of elements over `axis` (bools, and with `promote_integers` narrow integers,
    in the default int)."""
    from funcgrad.numpy.math import multiply
    a, axes, shape, dt = _prepare("prod", a, axis, dtype, out, where, 1,
                                  _sum_dtype if promote_integers else _bool_to_int, upcast=True)
    r = _finish(lax.reduce_prod(a, axes), shape, axes, keepdims, initial, multiply)
    return convert(r, dt, r.weak_type)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum treating NaNs as zero."""
    a = _nan_to(a, 0)
    return sum(a, axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product treating NaNs as one."""
    return prod(_nan_to(a, 1), axis, dtype, out, keepdims, initial, where)


def _nan_to(a, value):
    a = asarray_operand("nan reduction", a)
    if dtypes.kind(dtype_of(a)) not in "fc":
        return a
    return select(isnan(a), a, _scalar_like(a, value))


# --- max / min --------------------------------------------------------------------------------

def _extremum(name, reduce, bool_reduce, combine, a, axis, out, keepdims, initial, where):
    if (type(a) is Array and initial is None and where is None and out is None
            and a._value.size and dtypes.kind(a._value.dtype) in "iuf"):
        r = _fast_reduce(reduce, a, axis, keepdims)
        if r is not None:
            return r
    a, axes, shape, _ = _prepare(name, a, axis, None, out, where, name[-3:],
                              acc_dtype=lambda d: d)
    if initial is None:
        if where is not None:
            raise errors.op_error(name, "reduction with `where` needs `initial`",
                                  cls=errors.FuncgradValueError)
        empty = [shape[i] for i in axes if shape[i] == 0]
        if empty:
            raise errors.op_error(name, f"zero-size array (shape {shape}) to reduction "
                                        f"operation {name} over axis {axis}, which has no "
                                        "identity", cls=errors.FuncgradValueError,
                                  hint="pass initial=...")
    r = (bool_reduce if dtypes.kind(dtype_of(a)) == "b" else reduce)(a, axes=axes)
    return _finish(r, shape, axes, keepdims, initial, combine)


def _complex_first_extremum(a, ax, largest):
    """Index along `ax` of the first largest (smallest) complex element in NumPy's order,
    (real, imag) lexicographically; the first NaN (in either part) wins, as in NumPy/JAX."""
    from funcgrad.numpy.math import imag, real
    extremum = max if largest else min
    r, i = real(a), imag(a)
    on_r = r == extremum(r, axis=ax, keepdims=True)
    fill = _scalar_like(i, -np.inf if largest else np.inf)
    hit = on_r & (i == extremum(select(on_r, fill, i), axis=ax, keepdims=True))
    nan = isnan(r) | isnan(i)
    hit = select(any(nan, axis=ax, keepdims=True), hit, nan)
    return lax.argmax(hit, ax, dtypes.default_int())


def _complex_extremum(name, a, axis, out, keepdims, initial, where, largest):
    from funcgrad.numpy.indexing import take_along_axis
    check_no_out(name, out)
    if initial is not None or where is not None:
        raise errors.op_error(name, "initial= and where= are not supported for complex input",
                              cls=errors.FuncgradValueError)
    shape = shape_of(a)
    axes = canonical_axes(name, axis, len(shape))
    if builtins.any(shape[d] == 0 for d in axes):
        raise errors.op_error(name, f"zero-size array (shape {shape}) to reduction operation "
                                    f"{name} over axis {axis}", cls=errors.FuncgradValueError)
    kept = [d for d in range(len(shape)) if d not in axes]
    flat = lax.reshape(lax.transpose(a, tuple(kept) + axes),
                       tuple(shape[d] for d in kept) + (int(np.prod([shape[d] for d in axes],
                                                                       dtype=np.int64)),))
    idx = _complex_first_extremum(flat, len(kept), largest)
    r = take_along_axis(flat, lax.expand_dims(idx, (len(kept),)), axis=-1)
    r = lax.reshape(r, tuple(shape[d] for d in kept))
    return _keep(r, shape, axes) if keepdims else r


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum over `axis` (NaN-propagating); empty reductions need `initial`. Complex
    numbers are ordered by (real, imag), as in NumPy and JAX."""
    from funcgrad.numpy.math import maximum
    a = asarray_operand("max", a)
    if dtypes.kind(dtype_of(a)) == "c":
        return _complex_extremum("max", a, axis, out, keepdims, initial, where, True)
    return _extremum("max", lax.reduce_max_p.bind, lax.reduce_or_p.bind, maximum, a, axis, out,
                     keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum over `axis` (NaN-propagating); empty reductions need `initial`. Complex
    numbers are ordered by (real, imag), as in NumPy and JAX."""
    from funcgrad.numpy.math import minimum
    a = asarray_operand("min", a)
    if dtypes.kind(dtype_of(a)) == "c":
        return _complex_extremum("min", a, axis, out, keepdims, initial, where, False)
    return _extremum("min", lax.reduce_min_p.bind, lax.reduce_and_p.bind, minimum, a, axis, out,
                     keepdims, initial, where)


amax, amin = max, min


def ptp(a, axis=None, out=None, keepdims=False):
    """Range (max - min) over `axis`."""
    from funcgrad.numpy.math import subtract
    return subtract(max(a, axis, out, keepdims), min(a, axis, None, keepdims))


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum ignoring NaNs (NaN where a slice is all NaN)."""
    return _nan_extremum(max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum ignoring NaNs (NaN where a slice is all NaN)."""
    return _nan_extremum(min, np.inf, a, axis, out, keepdims, initial, where)


def _nan_extremum(fn, fill, a, axis, out, keepdims, initial, where):
    a = asarray_operand(fn.__name__, a)
    if dtypes.kind(dtype_of(a)) not in "fc":
        return fn(a, axis, out, keepdims, initial, where)
    nan = isnan(a)
    r = fn(select(nan, a, _scalar_like(a, fill)), axis, out, keepdims, initial, where)
    return select(all(nan, axis, keepdims=keepdims), r, _scalar_like(r, np.nan))


# --- all / any --------------------------------------------------------------------------------

def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """True where every element over `axis` is nonzero."""
    a = _as_bool("all", a)
    a, axes, shape, _ = _prepare("all", a, axis, None, out, where, True, acc_dtype=lambda d: d)
    return _finish(lax.reduce_and(a, axes), shape, axes, keepdims, None, None)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """True where some element over `axis` is nonzero."""
    a = _as_bool("any", a)
    a, axes, shape, _ = _prepare("any", a, axis, None, out, where, False, acc_dtype=lambda d: d)
    return _finish(lax.reduce_or(a, axes), shape, axes, keepdims, None, None)


def count_nonzero(a, axis=None, keepdims=False):
    """The number of nonzero elements over `axis` (default int)."""
    return sum(_as_bool("count_nonzero", a), axis, dtypes.default_int(), keepdims=keepdims)


# --- mean / var / std -------------------------------------------------------------------------

def _inexact_dtype(dt):
    return dtypes.to_inexact(dt)


def _count(name, shape, axes, where, dt, keepdims):
    """The number of elements reduced: a Python int, or an array when `where` is given."""
    if where is None:
        return int(np.prod([shape[i] for i in axes], dtype=np.int64))
    mask = broadcast_to_shape(_as_bool(name, where), shape)
    return sum(mask, axes, dt, keepdims=keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean over `axis` (integers average in the default float).

    Example:
        >>> fnp.mean(fnp.arange(4))
        Array(1.5, dtype=float32)
    """
    if type(a) is Array and dtype is None and where is None and out is None:
        v = a._value
        fast = dtypes.kind(v.dtype) in "fc" and _upcast_f16(v.dtype) is v.dtype
        axes = _fast_axes(v, axis) if fast else None
        if axes is not None:
            n = v.size if len(axes) == v.ndim else v.shape[axes[0]]
            r = _div_bind(_reduce_sum_bind(a, axes=axes), weak_scalar(n, v.dtype))
            return _keep(r, v.shape, axes) if keepdims else r
    check_no_out("mean", out)
    a = asarray_operand("mean", a)
    dt = _inexact_dtype(dtype_of(a)) if dtype is None else user_dtype(dtype)
    a = convert(a, _inexact_dtype(_upcast_f16(dt) if dtype is None else dt), a.weak_type)
    shape = shape_of(a)
    axes = canonical_axes("mean", axis, len(shape))
    s = sum(a, axes, None, None, keepdims, None, where)
    n = _count("mean", shape, axes, where, dtype_of(a), keepdims)
    r = lax.div(s, _scalar_like(s, n) if type(n) is int else n)
    return convert(r, dt, r.weak_type)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """Mean ignoring NaNs."""
    a = asarray_operand("nanmean", a)
    if dtypes.kind(dtype_of(a)) not in "fc":
        return mean(a, axis, dtype, out, keepdims, where=where)
    valid = lax.bitwise_not(isnan(a))
    if where is not None:
        valid = lax.bitwise_and(valid, broadcast_to_shape(_as_bool("nanmean", where),
                                                          shape_of(a)))
    return mean(a, axis, dtype, out, keepdims, where=valid)


_mean = mean  # var and std take a parameter named `mean`, as in JAX


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Variance over `axis`: sum(|a - mean(a)|**2) / max(n - ddof, 0).

    Args:
        a: array-like; integers and bools are computed in the default float.
        axis, keepdims, where: as in `sum`.
        ddof: "delta degrees of freedom" (1 for the unbiased estimate); `correction` is
            its array-API name.
        dtype: the result dtype (default: the computation dtype).
        mean: the mean of `a` over `axis`, if already known, broadcastable to `a` (computed
            with keepdims=True), so it is not computed again (as in JAX).

    Example:
        >>> fnp.var(fnp.array([1.0, 2.0, 3.0, 4.0]), ddof=1)
        Array(1.6666666, dtype=float32)
    """
    check_no_out("var", out)
    if correction is not None:
        ddof = correction
    a = asarray_operand("var", a)
    comp = _upcast_f16(_inexact_dtype(dtype_of(a)))
    result = user_dtype(dtype) if dtype is not None else (
        np.finfo(comp).dtype if dtypes.kind(comp) == "c" else _inexact_dtype(dtype_of(a)))
    a = convert(a, comp, a.weak_type)
    shape = shape_of(a)
    axes = canonical_axes("var", axis, len(shape))
    computed_mean = mean is None
    mean = (_mean(a, axes, keepdims=True, where=where) if computed_mean
            else convert(asarray_operand("var", mean), comp, a.weak_type))
    centered = lax.sub(a, broadcast_to_shape(mean, shape))
    if computed_mean and where is None and _count("var", shape, axes, None, None, False) == 1:
        # one element: a - mean(a) is 0 whatever a is, so no derivative reaches `a` (not
        # 0 * inf = NaN through std's sqrt at 0: JAX's grad of std over a length-1 axis)
        centered = lax.stop_gradient(centered)
    if dtypes.kind(comp) == "c":
        sq = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        sq = lax.mul(centered, centered)
    s = sum(sq, axes, None, None, keepdims, None, where)
    n = _count("var", shape, axes, where, dtype_of(s), keepdims)
    if type(n) is int:
        denom = _scalar_like(s, builtins.max(n - ddof, 0))
    else:
        from funcgrad.numpy.math import maximum
        denom = maximum(lax.sub(n, _scalar_like(n, ddof)), _scalar_like(n, 0))
    r = lax.div(s, denom)
    return convert(r, result, r.weak_type)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """Standard deviation over `axis`: sqrt(var(a, axis, ddof=ddof)) (`mean` as in `var`)."""
    check_no_out("std", out)
    r = lax.sqrt(var(a, axis, None, None, ddof, keepdims, where=where, mean=mean,
                     correction=correction))
    return r if dtype is None else convert(r, user_dtype(dtype), r.weak_type)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """Variance ignoring NaNs (`mean`: as in `var`, the mean of the non-NaN elements)."""
    a = asarray_operand("nanvar", a)
    valid = lax.bitwise_not(isnan(a))
    if where is not None:
        valid = lax.bitwise_and(valid, broadcast_to_shape(_as_bool("nanvar", where),
                                                          shape_of(a)))
    return var(_nan_to(a, 0), axis, dtype, out, ddof, keepdims, where=valid, mean=mean)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    """Standard deviation ignoring NaNs (`mean`: as in `nanvar`)."""
    return lax.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where, mean))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted mean over `axis`; 1-D `weights` apply along a single `axis`.

    Example:
        >>> fnp.average(fnp.array([1.0, 2.0]), weights=fnp.array([3.0, 1.0]))
        Array(1.25, dtype=float32)
    """
    from funcgrad.numpy.math import multiply
    a = asarray_operand("average", a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if returned:
            shape = shape_of(a)
            n = int(np.prod([shape[i] for i in canonical_axes("average", axis, len(shape))]))
            return avg, lax.full(shape_of(avg), n, dtype_of(avg))
        return avg
    w = asarray_operand("average", weights)
    shape, wshape = shape_of(a), shape_of(w)
    if wshape != shape:
        if axis is None or type(axis) is not int or len(wshape) != 1:
            raise errors.op_error("average", f"weights of shape {wshape} differ from a's shape "
                                  f"{shape}: 1-D weights need a single int axis",
                                  cls=errors.FuncgradValueError)
        ax = canonical_axis("average", axis, len(shape))
        if wshape[0] != shape[ax]:
            raise errors.op_error("average", f"length of weights {wshape[0]} differs from "
                                  f"a.shape[{axis}] = {shape[ax]}",
                                  cls=errors.FuncgradValueError)
        w = lax.broadcast_in_dim(w, shape, (ax,))
    wsum = sum(w, axis, keepdims=keepdims)
    from funcgrad.numpy.math import true_divide
    avg = true_divide(sum(multiply(a, w), axis, keepdims=keepdims), wsum)
    if returned:
        return avg, convert(wsum, dtype_of(avg), wsum.weak_type)
    return avg


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median over `axis` (NaN if a reduced slice holds a NaN).

    Example:
        >>> fnp.median(fnp.array([[1.0, 3.0, 2.0], [4.0, 6.0, 5.0]]), axis=1)
        Array([2., 5.], dtype=float32)
    """
    check_no_out("median", out)
    a = asarray_operand("median", a)
    a = convert(a, _inexact_dtype(dtype_of(a)), a.weak_type)
    shape = shape_of(a)
    axes = canonical_axes("median", axis, len(shape))
    # move the reduced axes last and flatten them into one
    rest = [i for i in range(len(shape)) if i not in axes]
    moved = lax.transpose(a, tuple(rest) + axes) if rest + list(axes) != list(
        range(len(shape))) else a
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    flat = lax.reshape(moved, tuple(shape[i] for i in rest) + (n,))
    if n == 0:
        raise errors.op_error("median", f"of an empty reduction (shape {shape}, axis {axis})",
                              cls=errors.FuncgradValueError)
    srt = lax.sort(flat, dimension=len(rest))
    lo = _take_last(srt, (n - 1) // 2)
    hi = _take_last(srt, n // 2)
    med = lax.div(lax.add(lo, hi), _scalar_like(lo, 2))
    has_nan = isnan(_take_last(srt, n - 1))
    med = select(has_nan, med, _scalar_like(med, np.nan))
    return _keep(med, shape, axes) if keepdims else med


def _take_last(x, i):
    shape = shape_of(x)
    start = (0,) * (len(shape) - 1) + (i,)
    limit = shape[:-1] + (i + 1,)
    return lax.reshape(lax.slice(x, start, limit), shape[:-1])


# --- argmax / argmin --------------------------------------------------------------------------

def _arg_extremum(name, fn, a, axis, out, keepdims):
    check_no_out(name, out)
    a = asarray_operand(name, a)
    shape = shape_of(a)
    if axis is None:
        a = lax.reshape(a, (int(np.prod(shape, dtype=np.int64)),))
        ax = 0
    else:
        ax = canonical_axis(name, axis, len(shape))
    if shape_of(a)[ax] == 0:
        raise errors.op_error(name, f"attempt to get {name} of an empty sequence (shape "
                                    f"{shape}, axis {axis})", cls=errors.FuncgradValueError)
    if dtypes.kind(dtype_of(a)) == "c":  # (real, imag) order, as NumPy and JAX
        r = _complex_first_extremum(a, ax, fn is lax.argmax)
    else:
        r = fn(a, ax, dtypes.default_int())
    if not keepdims:
        return r
    axes = all_axes(len(shape)) if axis is None else (ax,)
    return _keep(r, shape, axes)


def argmax(a, axis=None, out=None, keepdims=None):
    """Index of the (first) maximum along `axis` (of the flattened array when None)."""
    return _arg_extremum("argmax", lax.argmax, a, axis, out, keepdims)


def argmin(a, axis=None, out=None, keepdims=None):
    """Index of the (first) minimum along `axis` (of the flattened array when None)."""
    return _arg_extremum("argmin", lax.argmin, a, axis, out, keepdims)


def nanargmax(a, axis=None, out=None, keepdims=None):
    """Index of the maximum ignoring NaNs."""
    return argmax(_nan_fill(a, -np.inf), axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    """Index of the minimum ignoring NaNs."""
    return argmin(_nan_fill(a, np.inf), axis, out, keepdims)


def _nan_fill(a, v):
    a = asarray_operand("nanarg", a)
    return select(isnan(a), a, _scalar_like(a, v)) if dtypes.kind(dtype_of(a)) == "f" else a


# --- cumulative -------------------------------------------------------------------------------

def _cumulative(name, fn, a, axis, dtype, out):
    check_no_out(name, out)
    a = asarray_operand(name, a)
    if axis is None:
        a = lax.reshape(a, (int(np.prod(shape_of(a), dtype=np.int64)),))
        axis = 0
    ax = canonical_axis(name, axis, len(shape_of(a)))
    if dtype is not None:
        dt = user_dtype(dtype)
    else:  # as JAX: only bool widens (to the default int); narrow integers keep their dtype
        dt = dtypes.default_int() if dtypes.kind(dtype_of(a)) == "b" else dtype_of(a)
    return fn(convert(a, dt, a.weak_type), axis=ax)


def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along `axis` (of the flattened array when None).

    Example:
        >>> fnp.cumsum(fnp.array([1, 2, 3]))
        Array([1, 3, 6], dtype=int32)
    """
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along `axis` (of the flattened array when None)."""
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, out)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API cumulative sum (`axis` may be omitted only for 1-D input)."""
    if dtype is None:  # the standard's (and JAX's) sum: narrow integers widen
        dtype = _sum_dtype(dtype_of(asarray_operand("cumulative_sum", x)))
    return _cumulative_api("cumulative_sum", cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Array-API cumulative product (`axis` may be omitted only for 1-D input)."""
    return _cumulative_api("cumulative_prod", cumprod, x, axis, dtype, include_initial, 1)


def _cumulative_api(name, fn, x, axis, dtype, include_initial, init):
    x = asarray_operand(name, x)
    nd = len(shape_of(x))
    if axis is None:
        if nd != 1:
            raise errors.op_error(name, f"axis must be given for a {nd}-D input",
                                  cls=errors.FuncgradValueError)
        axis = 0
    ax = canonical_axis(name, axis, nd)
    r = fn(x, ax, dtype)
    if not include_initial:
        return r
    first = lax.full(shape_of(r)[:ax] + (1,) + shape_of(r)[ax + 1:], init, dtype_of(r))
    return lax.concatenate([first, r], ax)
