"""Counting into bins: `bincount`, `digitize`, `histogram_bin_edges`, `histogram`,
`histogram2d`, `histogramdd`.

Bin indices come from `searchsorted`, counts from a scatter-add (`x.at[i].add`), so the
weights (and bin edges, through the densities) are differentiable and everything traces
under jit once the number of bins is static. JAX's rules: negative values count in bin 0 of
`bincount`, values beyond `length` are dropped; a sample equal to the last edge falls in the
last bin. Imports sibling numpy modules.
"""

import builtins

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import concrete_value
from funcgrad.numpy._util import (
    asarray_operand,
    convert,
    dtype_of,
    promote,
    shape_of,
    static_array,
    static_int,
)
from funcgrad.numpy.calculus import diff
from funcgrad.numpy.creation import linspace, place, zeros
from funcgrad.numpy.logic import where
from funcgrad.numpy.math import multiply, subtract, true_divide
from funcgrad.numpy.reductions import max, min, sum
from funcgrad.numpy.searching import ravel_multi_index, searchsorted
from funcgrad.numpy.shape import flip, ravel, reshape, stack

__all__ = ["bincount", "digitize", "histogram", "histogram2d", "histogram_bin_edges",
           "histogramdd"]


def bincount(x, weights=None, minlength=0, *, length=None, out_sharding=None):
    """How often each value 0, 1, ... occurs in the 1-D integer `x` (summing `weights`
    instead of ones). The result has `length` entries (static; by default, eagerly,
    `max(minlength, x.max() + 1)`); negative values count as 0, values beyond are dropped.

    Example:
        >>> fnp.bincount(fnp.array([1, 1, 3]))
        Array([0, 2, 0, 1], dtype=int32)
    """
    x = asarray_operand("bincount", x)
    if dtype_of(x).kind == "b":
        x = convert(x, dtypes.default_int())
    if dtype_of(x).kind not in "iu":
        raise errors.op_error("bincount", f"x must have an integer type, got {dtype_of(x)}",
                              cls=errors.FuncgradTypeError)
    if len(shape_of(x)) != 1:
        raise errors.op_error("bincount", f"only 1-dimensional input is supported, got shape "
                              f"{shape_of(x)}", cls=errors.FuncgradValueError)
    minlength = static_int("bincount", minlength, "minlength")
    if length is None:
        known = concrete_value(x)
        if known is None:
            raise errors.op_error("bincount", f"x {x.aval} is traced, so the number of bins "
                                  "is unknown", cls=errors.ConcretizationTypeError,
                                  hint="pass a static length=N, as in JAX")
        known = np.asarray(known)
        length = builtins.max(minlength, known.size and int(builtins.max(0, known.max())) + 1)
    else:
        length = static_int("bincount", length, "length")
    if weights is None:
        w = lax.full(shape_of(x), 1, dtypes.default_int())
    else:
        w = asarray_operand("bincount", weights)
        if shape_of(w) != shape_of(x):
            raise errors.op_error("bincount", f"weights (shape {shape_of(w)}) must have the "
                                  f"shape of x {shape_of(x)}", cls=errors.FuncgradValueError)
    idx = where(x < 0, 0, x)
    out = zeros(length, dtype_of(w)).at[idx].add(w, mode="drop")
    return place("bincount", out, None, out_sharding)


def digitize(x, bins, right=False, *, method=None):
    """The index of the bin of each `x` among the monotonic `bins` (NumPy's `digitize`:
    `bins[i-1] <= x < bins[i]` for increasing bins, or `<` / `<=` swapped with `right`).

    Example:
        >>> fnp.digitize(fnp.array([0.5, 1.0, 2.5]), fnp.array([0.0, 1.0, 2.0]))
        Array([1, 2, 3], dtype=int32)
    """
    x, bins = promote("digitize", [x, bins], broadcast=False)
    if len(shape_of(bins)) != 1:
        raise errors.op_error("digitize", f"bins must be 1-dimensional, got shape "
                              f"{shape_of(bins)}", cls=errors.FuncgradValueError)
    kw = {} if method is None else {"method": method}
    n = shape_of(bins)[0]
    if n == 0:
        return lax.full(shape_of(x), 0, dtypes.default_int())
    side = "left" if right else "right"
    up = searchsorted(bins, x, side=side, **kw)
    down = n - searchsorted(flip(bins), x, side=side, **kw)
    return where(bins[-1] >= bins[0], up, down)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges `histogram` uses: `bins` + 1 evenly spaced edges over `range` (default
    the data's min and max, widened by 0.5 each way when they are equal), or `bins` itself
    when it is an array of edges.

    Example:
        >>> fnp.histogram_bin_edges(fnp.array([0.0, 1.0, 4.0]), bins=4)
        Array([0., 1., 2., 3., 4.], dtype=float32)
    """
    (a,) = promote("histogram_bin_edges", [a], inexact=True, broadcast=False)
    if isinstance(bins, str):
        raise errors.op_error("histogram_bin_edges", f"string bins ("
                                                     f"{errors.short_repr(bins)}) are not "
                              "supported (as in JAX)", cls=errors.FuncgradValueError)
    if not isinstance(bins, int) and shape_of(asarray_operand("histogram", bins)):
        edges = asarray_operand("histogram_bin_edges", bins)
        return convert(edges, dtype_of(a)) if dtype_of(edges).kind != "f" else edges
    bins = static_int("histogram_bin_edges", bins, "bins")
    if range is None:
        lo, hi = min(a), max(a)
    else:
        r = static_array("histogram_bin_edges", range, "range")
        if r.dtype.kind not in "biuf":
            raise errors.op_error("histogram_bin_edges", f"range must be real numbers, got "
                                  f"dtype {r.dtype}", cls=errors.FuncgradTypeError)
        r = r.astype(np.float64)
        if r.shape != (2,) or not r[0] <= r[1]:
            raise errors.op_error("histogram_bin_edges", f"range must be (min, max) with min "
                                  f"<= max, got {range}", cls=errors.FuncgradValueError)
        lo, hi = convert(float(r[0]), dtype_of(a)), convert(float(r[1]), dtype_of(a))
    same = lo == hi
    lo, hi = where(same, subtract(lo, 0.5), lo), where(same, lo + 0.5, hi)
    return linspace(lo, hi, bins + 1, dtype=dtype_of(a))


def histogram(a, bins=10, range=None, weights=None, density=None):
    """`(counts, bin_edges)` of the flattened `a` over `bins` (see `histogram_bin_edges`):
    half-open bins `[edge_i, edge_{i+1})`, the last one closed; `weights` sum instead of
    ones; `density` divides by the total and the bin widths.

    Example:
        >>> fnp.histogram(fnp.array([0.0, 1.0, 1.5, 4.0]), bins=4)[0]
        Array([1, 2, 0, 1], dtype=int32)
    """
    (a,) = promote("histogram", [a], inexact=True, broadcast=False)
    a = ravel(a)
    edges = histogram_bin_edges(a, bins, range)
    if weights is None:
        w = lax.full(shape_of(a), 1, dtypes.default_int())
    else:
        w = ravel(asarray_operand("histogram", weights))
        if shape_of(w) != shape_of(a):
            raise errors.op_error("histogram", f"weights must have the size of a "
                                  f"({shape_of(a)[0]}), got {shape_of(w)}",
                                  cls=errors.FuncgradValueError)
    n = shape_of(edges)[0]
    idx = _bin_index(a, edges)
    counts = zeros(n, dtype_of(w)).at[idx].add(w, mode="drop")[1:]
    if density:
        (counts,) = promote("histogram", [counts], inexact=True, broadcast=False)
        counts = true_divide(true_divide(counts, diff(edges)), sum(counts))
    return counts, edges


def _bin_index(a, edges):
    """1 + the bin of each value (0 below the first edge, len(edges) above the last)."""
    n = shape_of(edges)[0]
    idx = searchsorted(edges, a, side="right")
    return where(a == edges[-1], n - 1, idx)


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """`(counts, x_edges, y_edges)` of the points (x[i], y[i]) (see `histogramdd`).

    Example:
        >>> fnp.histogram2d(fnp.array([0.0, 1.0]), fnp.array([0.0, 1.0]), bins=2)[0]
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    x, y = promote("histogram2d", [x, y], inexact=True, broadcast=False)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):  # one array of edges for both
        bins = [bins, bins]
    counts, (ex, ey) = histogramdd(stack([x, y], axis=1), bins, range, weights, density)
    return counts, ex, ey


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """`(counts, [edges per dimension])` of the points in the rows of `sample` (N, D); each
    dimension binned as `histogram` does (`bins`: one count or edge array, or one per
    dimension; `range`: one (min, max) per dimension or None).

    Example:
        >>> fnp.histogramdd(fnp.array([[0.0, 0.0], [1.0, 1.0]]), bins=2)[0]
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    (sample,) = promote("histogramdd", [sample], inexact=True, broadcast=False)
    if len(shape_of(sample)) != 2:
        raise errors.op_error("histogramdd", f"sample must be 2-D (N, D), got shape "
                              f"{shape_of(sample)}", cls=errors.FuncgradValueError)
    num, dim = shape_of(sample)
    if isinstance(bins, int) or not _per_dimension(bins, dim):
        bins = [bins] * dim
    ranges = [None] * dim if range is None else list(range)
    if len(ranges) != dim:
        raise errors.op_error("histogramdd", f"range needs one (min, max) per dimension "
                              f"({dim}), got {len(ranges)}", cls=errors.FuncgradValueError)
    edges, idx, sizes = [], [], []
    for d in builtins.range(dim):
        e = histogram_bin_edges(sample[:, d], bins[d], ranges[d])
        edges.append(e)
        idx.append(_bin_index(sample[:, d], e))
        sizes.append(shape_of(e)[0] + 1)
    flat = ravel_multi_index(tuple(idx), tuple(sizes), mode="clip")
    w = None if weights is None else ravel(asarray_operand("histogramdd", weights))
    total = int(np.prod(sizes))
    counts = bincount(flat, w, length=total)
    counts = reshape(counts, tuple(sizes))
    counts = counts[tuple(builtins.slice(1, -1) for _ in builtins.range(dim))]
    (counts,) = promote("histogramdd", [counts], inexact=True, broadcast=False)
    if density:
        widths = [diff(e) for e in edges]
        vol = widths[0]
        for wd in widths[1:]:
            vol = multiply(vol[..., None], wd)
        counts = true_divide(true_divide(counts, sum(counts)), vol)
    return counts, edges


def _per_dimension(bins, dim):
    """Whether `bins` gives one entry per dimension (a list of counts or edge arrays)."""
    if isinstance(bins, (list, tuple)):
        return len(bins) == dim and all(isinstance(b, int) or np.ndim(b) == 1 or hasattr(
            b, "shape") for b in bins)
    return False

