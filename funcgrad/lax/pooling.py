"""Max/min pooling over windows that tile the operand, with no gather and no scatter.

When every window is its own block of the operand (strides equal to the window, no padding,
no dilation: the common `MaxPool2d(k)`), the derivative of `reduce_window_max`/`min` (JAX's
`select_and_gather_add`, transposed to `select_and_scatter_add`) is a product with the
one-hot mask of each window's selected element in the block layout `(o0, w0, o1, w1, ...)`:
the gradient is the cotangent broadcast over each block where the mask is set, zero
elsewhere, elementwise work that fuses into one kernel. The mask is one primitive,
`window_choice_mask` (one pass over the operand: a C routine on the native tier,
`backends/native/windows.py`; numpy below, window offset by offset), kept as the residual
of the forward pass. `convolution.py` calls it; it imports the core, the interpreters and lax.
"""

from typing import NamedTuple

import numpy as np

from funcgrad import lax
from funcgrad.core import Primitive, ShapedArray
from funcgrad.interpreters import ad, batching

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


def tiling(shape, window):
    """The `Layout` of windows `window` with strides `window` over `shape` (or None)."""
    nd = len(shape)
    return blocked(tuple(shape), tuple(window), tuple(window), ((0, 0),) * nd, (1,) * nd,
                   (1,) * nd)


def to_blocks(x, layout):
    """The lax value `x` cropped to the windows and reshaped into blocks."""
    if tuple(x.shape) != layout.crop:
        x = lax.slice(x, (0,) * len(layout.crop), layout.crop)
    return lax.reshape(x, layout.block)


# --- window_choice_mask ------------------------------------------------------------------------
def _better(kind, best, v):
    """Where `v` replaces the window's selection so far (numpy's argmax/argmin: the first
    extremal element, the first NaN winning)."""
    beats = np.greater(v, best) if kind == "max" else np.less(v, best)
    return np.equal(best, best) & (beats | np.not_equal(v, v))


def _choice_mask_impl(x, *, window_dimensions, select_prim):
    layout = tiling(x.shape, window_dimensions)
    window = layout.window
    mask = np.zeros(layout.crop, bool)
    taps = [tuple(slice(k, c, w) for k, c, w in zip(ks, layout.crop, window))
            for ks in np.ndindex(*window)]
    best = np.array(x[taps[0]])
    chosen = np.zeros(best.shape, np.int32)
    extremum = np.maximum if select_prim == "max" else np.minimum  # the value selected so far
    for t, tap in enumerate(taps[1:], 1):  # (arithmetic: numpy's masked selects are slower)
        v = x[tap]
        np.maximum(chosen, _better(select_prim, best, v) * np.int32(t), out=chosen)
        extremum(best, v, out=best)
    for t, tap in enumerate(taps):
        np.equal(chosen, t, out=mask[tap])
    return mask.reshape(layout.block)


def _choice_mask_abstract(x, *, window_dimensions, select_prim):
    return ShapedArray(tiling(x.shape, window_dimensions).block, np.dtype(bool))


def _choice_mask_batch(args, dims, *, window_dimensions, select_prim):
    x = batching.bdim_at_front(args[0], dims[0], args[0].shape[dims[0]])
    return choice_mask_p.bind(x, window_dimensions=(1,) + window_dimensions,
                              select_prim=select_prim), 0


choice_mask_p = Primitive("window_choice_mask")
choice_mask_p.def_impl(_choice_mask_impl)
choice_mask_p.def_abstract_eval(_choice_mask_abstract)
ad.defjvp_zero(choice_mask_p)
batching.batch_rules[choice_mask_p] = _choice_mask_batch


def chooser_jvp(t, x, layout, kind):
    """The tangent of the selected element of every window: `sum(where(mask, t_blocks, 0))`
    (an inf or NaN tangent elsewhere in the window stays out). Its transpose, the gradient, is
    `where(mask, ct, 0)` with `ct` broadcast over the blocks. Only the sign of a zero may
    differ from select_and_gather_add/select_and_scatter_add (a -0.0 tangent sums to +0.0; a
    -0.0 cotangent stays -0.0 where the scatter's `0 + ct` gives +0.0)."""
    tb = to_blocks(t, layout)
    mask = choice_mask_p.bind(x, window_dimensions=layout.window, select_prim=kind)
    masked = lax.select_n(mask, lax.full_like(tb, 0), tb)
    return lax.reduce_sum(masked, layout.axes)
