"""`pad` of funcgrad.numpy: constant, edge, reflect, symmetric and wrap modes, built from
lax.pad, slices, reversals and concatenations (axis by axis, as NumPy pads).
"""

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.numpy._util import (
    asarray_operand,
    broadcast_shapes,
    broadcast_to_shape,
    convert,
    dtype_of,
    shape_of,
    static_array,
)
from funcgrad.numpy.shape import _slice_axis

__all__ = ["pad"]


def _pad_widths(pad_width, nd):
    pw = static_array("pad", pad_width, "pad_width")
    if pw.size == 0:
        pw = pw.astype(np.int64)
    if dtypes.kind(pw.dtype) not in "iu":
        raise errors.op_error("pad", f"pad_width must be integers, got "
                                     f"{errors.short_repr(pad_width)}")
    if nd == 0:
        return []
    try:
        pw = np.broadcast_to(pw, (nd, 2))
    except ValueError:
        raise errors.op_error("pad", f"pad_width {errors.short_repr(pad_width)} does not fit an "
                                     f"array with "
                              f"{nd} dimensions", cls=errors.FuncgradValueError) from None
    if (pw < 0).any():
        raise errors.op_error("pad", f"pad_width must be non-negative, got "
                                     f"{errors.short_repr(pad_width)}",
                              cls=errors.FuncgradValueError)
    return [(int(lo), int(hi)) for lo, hi in pw]


def pad(array, pad_width, mode="constant", **kwargs):
    """Pad `array` along each axis.

    Args:
        array: array-like.
        pad_width: an int, a (before, after) pair, or one pair per axis.
        mode: 'constant' (with `constant_values`, a scalar or per-axis pairs; default 0),
            'edge', 'reflect' (mirror without the edge), 'symmetric' (with the edge) or
            'wrap'. Pads larger than the axis repeat the reflection, as in NumPy.

    Raises:
        FuncgradValueError: for negative or misshaped widths, an unsupported mode, or a
            non-constant pad of an empty axis.

    Example:
        >>> fnp.pad(fnp.array([1, 2, 3]), (1, 2), mode="reflect")
        Array([2, 1, 2, 3, 2, 1], dtype=int32)
    """
    a = asarray_operand("pad", array)
    s = shape_of(a)
    widths = _pad_widths(pad_width, len(s))
    if mode == "constant":
        return _pad_constant(a, widths, kwargs.get("constant_values", 0))
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        for ax, (lo, hi) in enumerate(widths):
            if (lo or hi) and shape_of(a)[ax] == 0:
                raise errors.op_error("pad", f"cannot pad axis {ax} of size 0 in mode "
                                      f"{errors.short_repr(mode)}", cls=errors.FuncgradValueError)
            a = _PAD_AXIS[mode](a, ax, lo, hi)
        return a
    raise errors.op_error("pad", f"unsupported mode {errors.short_repr(mode)}; use 'constant', "
                                 f"'edge', "
                          "'reflect', 'symmetric' or 'wrap'", cls=errors.FuncgradValueError)


def _pad_constant(a, widths, values):
    dt = dtype_of(a)
    v = convert(asarray_operand("pad", values, dt), dt)  # traced values too (grad flows)
    if not shape_of(v):
        return lax.pad(a, v, tuple((lo, hi, 0) for lo, hi in widths))
    n = len(widths)
    if broadcast_shapes("pad", shape_of(v), (n, 2)) != (n, 2):
        raise errors.op_error("pad", f"constant_values of shape {shape_of(v)} do not fit an "
                              f"array with {n} dimensions", cls=errors.FuncgradValueError)
    v = broadcast_to_shape(v, (n, 2))
    for ax, (lo, hi) in enumerate(widths):
        for side, width in enumerate((lo, hi)):
            value = lax.reshape(lax.slice(v, (ax, side), (ax + 1, side + 1)), ())
            cfg = [(0, 0, 0)] * n
            cfg[ax] = (width, 0, 0) if side == 0 else (0, width, 0)
            a = lax.pad(a, value, tuple(cfg))
    return a


def _edge_block(a, ax, first, count):
    s = shape_of(a)
    n = s[ax]
    edge = _slice_axis(a, 0 if first else n - 1, 1 if first else n, ax)
    return lax.broadcast_in_dim(edge, s[:ax] + (count,) + s[ax + 1:], tuple(range(len(s))))


def _pad_edge(a, ax, lo, hi):
    parts = ([_edge_block(a, ax, True, lo)] if lo else []) + [a] + (
        [_edge_block(a, ax, False, hi)] if hi else [])
    return lax.concatenate(parts, ax) if len(parts) > 1 else a


def _pad_reflect(a, ax, lo, hi, offset=1):
    # reflect (offset 1, edge not repeated) or symmetric (offset 0); larger pads repeat the
    # reflection of the already padded array, as NumPy does
    n = shape_of(a)[ax]
    if offset == 1 and n == 1:
        return _pad_edge(a, ax, lo, hi)
    while lo > 0:
        k = min(lo, n - offset)
        block = lax.rev(_slice_axis(a, offset, offset + k, ax), (ax,))
        a = lax.concatenate([block, a], ax)
        lo -= k
    while hi > 0:
        cur = shape_of(a)[ax]
        k = min(hi, n - offset)
        block = lax.rev(_slice_axis(a, cur - k - offset, cur - offset, ax), (ax,))
        a = lax.concatenate([a, block], ax)
        hi -= k
    return a


def _pad_wrap(a, ax, lo, hi):
    n = shape_of(a)[ax]
    parts = []
    left = lo
    while left > 0:
        k = min(left, n)
        parts.insert(0, _slice_axis(a, n - k, n, ax))
        left -= k
    parts.append(a)
    right = hi
    while right > 0:
        k = min(right, n)
        parts.append(_slice_axis(a, 0, k, ax))
        right -= k
    return lax.concatenate(parts, ax) if len(parts) > 1 else a


_PAD_AXIS = {"edge": _pad_edge, "reflect": _pad_reflect, "wrap": _pad_wrap,
             "symmetric": lambda a, ax, lo, hi: _pad_reflect(a, ax, lo, hi, offset=0)}
