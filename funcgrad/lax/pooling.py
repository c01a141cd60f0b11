"""Max/min pooling over windows that tile the operand, with no gather and no scatter.

When every window is its own block of the operand (strides equal to the window, no padding,
no dilation: the common `MaxPool2d(k)`), the derivative of `reduce_window_max`/`min` (JAX's
`select_and_gather_add`, transposed to `select_and_scatter_add`) is a product with the
one-hot mask of each window's first extremal element in the block layout
`(o0, w0, o1, w1, ...)`: the gradient is the cotangent broadcast over each block where the
mask is set, zero elsewhere: elementwise work that fuses. The mask is built offset by offset
from strided slices (one small kernel), which numpy runs far faster than reductions over tiny
window axes; the eager reduction runs the same way. `convolution.py` calls it; it imports only lax.
"""

import math
from typing import NamedTuple

import numpy as np

from funcgrad import lax

__all__ = []


class Layout(NamedTuple):
    crop: tuple  # the part of each axis the windows cover (a VALID tail is left out)
    block: tuple  # the cropped operand's block shape: (o, w) per axis, (o,) where w == 1
    axes: tuple  # the window axes of the block shape
    window: tuple  # the window dimensions


def blocked(shape, window_dimensions, window_strides, padding, base_dilation,
            window_dilation):
    """The `Layout` of windows that tile an operand of `shape` without overlap, else None."""
    if any(p != (0, 0) for p in padding) or any(d != 1 for d in base_dilation +
                                               window_dilation):
        return None
    if window_strides != window_dimensions or 0 in window_dimensions:
        return None
    outs = [n // w for n, w in zip(shape, window_dimensions)]
    if 0 in outs:
        return None
    block, axes = [], []
    for o, w in zip(outs, window_dimensions):
        block.append(o)
        if w != 1:
            axes.append(len(block))
            block.append(w)
    crop = tuple(o * w for o, w in zip(outs, window_dimensions))
    return Layout(crop, tuple(block), tuple(axes), tuple(window_dimensions))


def to_blocks(x, layout):
    """The lax value `x` cropped to the windows and reshaped into blocks."""
    if tuple(x.shape) != layout.crop:
        x = lax.slice(x, (0,) * len(layout.crop), layout.crop)
    return lax.reshape(x, layout.block)


MAX_UNROLLED = 16  # windows of more elements keep select_and_gather_add


def _strided(x, k, window, out_shape):
    """The elements at offset `k` of every window (shape `out_shape`)."""
    if isinstance(x, np.ndarray):
        return x[tuple(slice(o, o + n * w, w) for o, n, w in zip(k, out_shape, window))]
    return lax.slice(x, k, tuple(o + (n - 1) * w + 1 for o, n, w in zip(k, out_shape, window)),
                     window)


def reduce_blocks(x, ufunc, layout, out_shape):
    """The eager window reduction (`np.maximum`/`np.minimum`) of the numpy array `x`: the
    windows' elements combined offset by offset, in row-major window order."""
    window = layout.window
    ks = list(np.ndindex(*window))
    out = np.array(_strided(x, ks[0], window, out_shape))
    for k in ks[1:]:
        ufunc(out, _strided(x, k, window, out_shape), out=out)
    return out


def _interleave(pieces, window):
    """The inverse of `_strided` for all offsets at once, as block-shaped data: `pieces[k]`
    (row-major over the window offsets) placed at offset k of every window, in the block
    layout `(o0, w0, o1, w1, ...)` (unit windows have no block axis)."""
    for d in reversed(range(len(window))):  # axes before d are not expanded yet: o_d is at d
        if window[d] != 1:
            w = window[d]
            pieces = [lax.concatenate([lax.expand_dims(p, (d + 1,)) for p in pieces[i:i + w]],
                                      d + 1) for i in range(0, len(pieces), w)]
    return pieces[0]


def first_choice_mask(x, out, layout):
    """The boolean mask, in the block shape, of each window's selected element: the first
    (row-major in the window) element equal to the window's extremum `out`, or its first NaN
    when it has one (numpy's argmax/argmin, which `select_and_gather_add` uses)."""
    window, out_shape = layout.window, tuple(out.shape)
    taken, chosen = None, []
    for k in np.ndindex(*window):
        xk = _strided(x, k, window, out_shape)
        hit = lax.bitwise_or(lax.eq(xk, out), lax.ne(xk, xk))
        chosen.append(hit if taken is None else lax.bitwise_and(hit, lax.bitwise_not(taken)))
        taken = hit if taken is None else lax.bitwise_or(taken, hit)
    return _interleave(chosen, window)


def unrolled(layout):
    """Whether the window is small enough for `chooser_jvp`."""
    return math.prod(layout.window) <= MAX_UNROLLED


def chooser_jvp(t, x, out, layout):
    """The tangent of the selected element of every window: `sum(where(mask, t_blocks, 0))`
    (an inf or NaN tangent elsewhere in the window stays out). Its transpose, the gradient, is
    `where(mask, ct, 0)` with `ct` broadcast over the blocks. Only the sign of a zero may
    differ from select_and_gather_add/select_and_scatter_add (a -0.0 tangent sums to +0.0; a
    -0.0 cotangent stays -0.0 where the scatter's `0 + ct` gives +0.0)."""
    tb = to_blocks(t, layout)
    masked = lax.select_n(first_choice_mask(x, out, layout), lax.full_like(tb, 0), tb)
    return lax.reduce_sum(masked, layout.axes)
