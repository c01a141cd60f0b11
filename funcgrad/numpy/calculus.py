"""Differences, integrals, products and interpolation along an axis: `diff`, `ediff1d`,
`gradient`, `trapezoid`, `cross`, `convolve`, `correlate`, `interp`, `unwrap`.

Compositions of lax slices, elementwise ops, `conv_general_dilated` and `searchsorted`, so
derivatives and batching come from those. NumPy's semantics, JAX's dtype policy.
"""

import numpy as np

from funcgrad import errors, lax
from funcgrad.numpy._util import (
    asarray_operand,
    canonical_axes,
    canonical_axis,
    convert,
    dtype_of,
    promote,
    shape_of,
    static_int,
)
from funcgrad.numpy.logic import not_equal, where
from funcgrad.numpy.math import (
    abs,
    add,
    conj,
    divide,
    mod,
    multiply,
    subtract,
    true_divide,
)
from funcgrad.numpy.reductions import cumsum, sum
from funcgrad.numpy.searching import searchsorted
from funcgrad.numpy.shape import (
    broadcast_arrays,
    broadcast_to,
    concatenate,
    flip,
    moveaxis,
    ravel,
    reshape,
    stack,
)

__all__ = ["convolve", "correlate", "cross", "diff", "ediff1d", "gradient", "interp",
           "trapezoid", "unwrap"]

_pi = np.pi


def _cut(a, start, stop, axis):
    return lax.slice_in_dim(a, start, stop, 1, axis)


# --- differences ------------------------------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along `axis`: `a[1:] - a[:-1]`, `n` times (not-equal for
    bool), after joining `prepend` / `append` (scalars broadcast) to `a`.

    Example:
        >>> fnp.diff(fnp.array([1, 4, 9, 16]))
        Array([3, 5, 7], dtype=int32)
    """
    a = asarray_operand("diff", a)
    n = static_int("diff", n, "n")
    if n < 0:
        raise errors.op_error("diff", f"order must be non-negative, got {n}",
                              cls=errors.FuncgradValueError)
    if not shape_of(a):
        raise errors.op_error("diff", "requires an input of at least one dimension",
                              cls=errors.FuncgradValueError)
    if n == 0:
        return a
    axis = canonical_axis("diff", axis, len(shape_of(a)))
    parts = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        e = asarray_operand("diff", extra)
        if not shape_of(e) and e is not a:
            s = list(shape_of(a))
            s[axis] = 1
            e = broadcast_to(e, tuple(s))
        parts.append(e)
    if len(parts) > 1:
        a = concatenate(parts, axis)
    for _ in range(n):
        m = shape_of(a)[axis]
        if m == 0:  # nothing left to difference (n may be huge)
            break
        hi, lo = _cut(a, min(1, m), m, axis), _cut(a, 0, max(m - 1, 0), axis)
        a = not_equal(hi, lo) if dtype_of(a).kind == "b" else subtract(hi, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of the flattened `ary`, with `to_begin` / `to_end` joined around.

    Example:
        >>> fnp.ediff1d(fnp.array([1, 2, 4]), to_begin=0)
        Array([0, 1, 2], dtype=int32)
    """
    d = diff(ravel(asarray_operand("ediff1d", ary)))
    parts = [ravel(asarray_operand("ediff1d", v)) for v in (to_begin,) if v is not None]
    parts += [d] + [ravel(asarray_operand("ediff1d", v)) for v in (to_end,) if v is not None]
    return concatenate(parts) if len(parts) > 1 else d


def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of sampled `f` by central differences inside, one-sided at the edges.

    `varargs` gives the spacing: nothing (1), one scalar or coordinate array for every
    axis, or one per axis. Returns one array per axis (a single array for one axis).

    Example:
        >>> fnp.gradient(fnp.array([1.0, 2.0, 4.0, 7.0]))
        Array([1. , 1.5, 2.5, 3. ], dtype=float32)
    """
    if edge_order is not None:
        raise errors.op_error("gradient", "edge_order is not supported (as in JAX); the "
                              "edges use first-order differences",
                              cls=errors.FuncgradValueError)
    a, *spacing = promote("gradient", [f, *varargs], inexact=True, broadcast=False)
    nd = len(shape_of(a))
    axes = canonical_axes("gradient", axis, nd) if axis is not None else tuple(range(nd))
    if isinstance(axis, int):
        axes = (canonical_axis("gradient", axis, nd),)
    if not spacing:
        spacing = [1.0] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    if len(spacing) != len(axes):
        raise errors.op_error("gradient", f"give one spacing for every axis ({len(axes)}), "
                              f"got {len(spacing)}", cls=errors.FuncgradValueError)
    out = [_gradient_axis(a, h, ax) for h, ax in zip(spacing, axes)]
    return out[0] if len(out) == 1 else out


def _gradient_axis(a, h, axis):
    n = shape_of(a)[axis]
    if n < 2:
        raise errors.op_error("gradient", f"needs at least 2 samples along axis {axis}, got "
                              f"shape {shape_of(a)}", cls=errors.FuncgradValueError)
    first = subtract(_cut(a, 1, 2, axis), _cut(a, 0, 1, axis))
    last = subtract(_cut(a, n - 1, n, axis), _cut(a, n - 2, n - 1, axis))
    if len(shape_of(h)) == 0:
        inner = divide(subtract(_cut(a, 2, n, axis), _cut(a, 0, n - 2, axis)),
                       multiply(h, 2.0))
        first, last = divide(first, h), divide(last, h)
    elif len(shape_of(h)) == 1 and shape_of(h)[0] == n:
        shape = [1] * len(shape_of(a))
        shape[axis] = n
        h = reshape(h, tuple(shape))
        first = divide(first, subtract(_cut(h, 1, 2, axis), _cut(h, 0, 1, axis)))
        last = divide(last, subtract(_cut(h, n - 1, n, axis), _cut(h, n - 2, n - 1, axis)))
        dx1 = subtract(_cut(h, 1, n - 1, axis), _cut(h, 0, n - 2, axis))
        dx2 = subtract(_cut(h, 2, n, axis), _cut(h, 1, n - 1, axis))
        s = add(dx1, dx2)
        inner = add(add(multiply(divide(-dx2, multiply(dx1, s)), _cut(a, 0, n - 2, axis)),
                        multiply(divide(subtract(dx2, dx1), multiply(dx1, dx2)),
                                 _cut(a, 1, n - 1, axis))),
                    multiply(divide(dx1, multiply(dx2, s)), _cut(a, 2, n, axis)))
    else:
        raise errors.op_error("gradient", f"a spacing must be a scalar or a 1-D array of the "
                              f"axis' length {n}, got shape {shape_of(h)}",
                              cls=errors.FuncgradValueError)
    return concatenate([first, inner, last], axis)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of sampled `y` along `axis` by the trapezoidal rule, at points `x` (or
    with spacing `dx`).

    Example:
        >>> fnp.trapezoid(fnp.array([1.0, 2.0, 3.0]))
        Array(4., dtype=float32)
    """
    if x is None:
        (y,) = promote("trapezoid", [y], inexact=True, broadcast=False)
        d = dx
    else:
        y, x = promote("trapezoid", [y, x], inexact=True, broadcast=False)
        if len(shape_of(x)) == 1:  # coordinates along `axis` only
            shape = [1] * len(shape_of(y))
            shape[canonical_axis("trapezoid", axis, len(shape))] = shape_of(x)[0] - 1
            d = reshape(diff(x), tuple(shape))
        else:
            d = diff(x, axis=axis)
    axis = canonical_axis("trapezoid", axis, len(shape_of(y)))
    n = shape_of(y)[axis]
    mid = multiply(add(_cut(y, 1, n, axis), _cut(y, 0, max(n - 1, 0), axis)), 0.5)
    return sum(multiply(d, mid), axis=axis)


# --- products ---------------------------------------------------------------------------------
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross products of 2- or 3-vectors along `axisa` / `axisb` (`axis` sets all three); the
    other axes broadcast. Two 2-vectors give the scalar z component, as NumPy.

    Example:
        >>> fnp.cross(fnp.array([1.0, 0.0, 0.0]), fnp.array([0.0, 1.0, 0.0]))
        Array([0., 0., 1.], dtype=float32)
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote("cross", [a, b], broadcast=False)
    a = moveaxis(a, canonical_axis("cross", axisa, len(shape_of(a))), -1)
    b = moveaxis(b, canonical_axis("cross", axisb, len(shape_of(b))), -1)
    na, nb = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise errors.op_error("cross", f"incompatible dimensions for cross product (dimension "
                              f"must be 2 or 3), got {na} and {nb}",
                              cls=errors.FuncgradValueError)
    a0, a1 = (lax.index_in_dim(a, i, -1, False) for i in (0, 1))
    b0, b1 = (lax.index_in_dim(b, i, -1, False) for i in (0, 1))
    if na == 2 and nb == 2:
        return subtract(multiply(a0, b1), multiply(a1, b0))
    a2 = lax.index_in_dim(a, 2, -1, False) if na == 3 else 0
    b2 = lax.index_in_dim(b, 2, -1, False) if nb == 3 else 0
    cz = subtract(multiply(a0, b1), multiply(a1, b0))
    cx = subtract(multiply(a1, b2), multiply(a2, b1))
    cy = subtract(multiply(a2, b0), multiply(a0, b2))
    c = stack(broadcast_arrays(cx, cy, cz), axis=-1)
    return moveaxis(c, -1, canonical_axis("cross", axisc, len(shape_of(c))))


def _conv1d(name, a, v, mode, precision, preferred_element_type):
    a = asarray_operand(name, a)
    v = asarray_operand(name, v)
    if len(shape_of(a)) != 1 or len(shape_of(v)) != 1:
        raise errors.op_error(name, f"only 1-dimensional inputs are supported, got shapes "
                              f"{shape_of(a)} and {shape_of(v)}", cls=errors.FuncgradValueError)
    if preferred_element_type is None:
        a, v = promote(name, [a, v], inexact=True, broadcast=False)
    else:
        a, v = promote(name, [a, v], broadcast=False)
    if not shape_of(a)[0] or not shape_of(v)[0]:
        raise errors.op_error(name, f"inputs cannot be empty, got shapes {shape_of(a)} and "
                              f"{shape_of(v)}", cls=errors.FuncgradValueError)
    reverse = False
    if name == "correlate":
        v = conj(v)
        if shape_of(a)[0] < shape_of(v)[0]:
            a, v, reverse = v, a, True
    else:
        if shape_of(a)[0] < shape_of(v)[0]:
            a, v = v, a
        v = flip(v)
    m = shape_of(v)[0]
    pads = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}
    if mode not in pads:
        raise errors.op_error(name, f"mode must be one of 'full', 'same', 'valid', got "
                              f"{errors.short_repr(mode)}", cls=errors.FuncgradValueError)
    out = lax.conv_general_dilated(reshape(a, (1, 1, -1)), reshape(v, (1, 1, -1)), (1,),
                                   [pads[mode]], precision=precision,
                                   preferred_element_type=preferred_element_type)
    out = reshape(out, (shape_of(out)[-1],))
    return flip(out) if reverse else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of two 1-D arrays (`mode`: "full", "same", "valid").

    Example:
        >>> fnp.convolve(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0, 0.5]))
        Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    return _conv1d("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of two 1-D arrays, `sum_n a[n + k] * conj(v[n])`.

    Example:
        >>> fnp.correlate(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.0, 1.0, 0.5]))
        Array([3.5], dtype=float32)
    """
    return _conv1d("correlate", a, v, mode, precision, preferred_element_type)


# --- interpolation and phase ------------------------------------------------------------------
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (`xp`, `fp`) (`xp` increasing) at `x`;
    `left` / `right` (default `fp[0]` / `fp[-1]`) outside; with `period`, `x` and `xp` are
    taken modulo it.

    Example:
        >>> fnp.interp(fnp.array([0.5, 2.5]), fnp.array([0.0, 1.0, 2.0]),
        ...            fnp.array([0.0, 10.0, 20.0]))
        Array([ 5., 20.], dtype=float32)
    """
    fp_c = dtype_of(asarray_operand("interp", fp)).kind == "c"
    x, xp = promote("interp", [x, xp], inexact=True, broadcast=False)
    (fp,) = promote("interp", [fp], inexact=True, broadcast=False)
    if len(shape_of(xp)) != 1 or shape_of(xp) != shape_of(fp) or not shape_of(xp)[0]:
        raise errors.op_error("interp", f"xp and fp must be 1-D of one non-zero length, got "
                              f"shapes {shape_of(xp)} and {shape_of(fp)}",
                              cls=errors.FuncgradValueError)
    if period is not None:
        if left is not None or right is not None:
            raise errors.op_error("interp", "left and right have no meaning with period",
                                  cls=errors.FuncgradValueError)
        period = abs(period)
        x, xp = mod(x, period), mod(xp, period)
        from funcgrad.numpy.searching import argsort
        order = argsort(xp)
        xp, fp = xp[order], fp[order]
        xp = concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    i = lax.clamp(1, searchsorted(xp, x, side="right"), shape_of(xp)[0] - 1)
    x0, x1, f0, f1 = xp[i - 1], xp[i], fp[i - 1], fp[i]
    dx = subtract(x1, x0)
    safe = where(dx == 0, 1.0, dx).astype(dtype_of(dx))
    w = true_divide(subtract(x, x0), safe)
    f = add(f0, multiply(convert(w, dtype_of(f0)) if fp_c else w, subtract(f1, f0)))
    f = where(dx == 0, f0, f)
    if period is None:
        lo = fp[0] if left is None else left
        hi = fp[-1] if right is None else right
        f = where(x < xp[0], lo, where(x > xp[-1], hi, f))
    return f.astype(dtype_of(fp))


def unwrap(p, discont=None, axis=-1, period=2 * _pi):
    """`p` with jumps between neighbours larger than `max(discont, period / 2)` along `axis`
    replaced by their complements modulo `period`.

    Example:
        >>> fnp.unwrap(fnp.array([0.0, 3.0, 6.5, 1.0]), period=fnp.pi * 2).round(3)
        Array([0.   , 3.   , 0.217, 1.   ], dtype=float32)
    """
    (p,) = promote("unwrap", [p], inexact=True, broadcast=False)
    axis = canonical_axis("unwrap", axis, len(shape_of(p)))
    half = period / 2 if not hasattr(period, "shape") else divide(period, 2)
    if discont is None:
        discont = half
    dd = diff(p, axis=axis)
    ddmod = subtract(mod(add(dd, half), period), half)
    ddmod = where((ddmod == -half) & (dd > 0), half, ddmod)
    correct = where(abs(dd) < discont, 0, subtract(ddmod, dd)).astype(dtype_of(p))
    n = shape_of(p)[axis]
    shape = list(shape_of(p))
    shape[axis] = 1
    zero = broadcast_to(lax.full((), 0, dtype_of(p)), tuple(shape))
    fixed = concatenate([zero, cumsum(correct, axis=axis)], axis)
    return add(p, fixed) if n else p
