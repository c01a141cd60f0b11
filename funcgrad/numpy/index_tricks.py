"""NumPy's index tricks on funcgrad arrays: `mgrid`, `ogrid` (grids from slices), `r_`, `c_`
(concatenation by indexing), `s_`, `index_exp` (index expressions), `fill_diagonal`,
`mask_indices`.

`mgrid[a:b:step]` counts with `arange`; a complex step `nj` asks for n points with both ends
included (`linspace`). `r_` / `c_` take slices, scalars, arrays (traced ones too) and a
leading directive string "axis[,ndmin[,trans1d]]" as NumPy's; NumPy's matrix directives
"r" / "c" are refused (JAX has no matrices either).
"""

import numpy as np

from funcgrad import errors, lax
from funcgrad.numpy._util import asarray_operand, dtype_of, promote, shape_of, static_int
from funcgrad.numpy.creation import arange, linspace, meshgrid
from funcgrad.numpy.searching import nonzero
from funcgrad.numpy.shape import concatenate, reshape, stack, transpose

__all__ = ["c_", "fill_diagonal", "index_exp", "mask_indices", "mgrid", "ogrid", "r_", "s_"]

s_ = np.s_
index_exp = np.index_exp


def _range_of(name, s):
    """The 1-D array a slice stands for: arange, or linspace for a complex step."""
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        num = int(abs(step))
        return linspace(start, s.stop, num)
    if s.stop is None:
        raise errors.op_error(name, f"a slice needs a stop, got {s}",
                              cls=errors.FuncgradValueError)
    return arange(start, s.stop, step)


class _Grid:
    """`mgrid` (dense: one stacked array) or `ogrid` (sparse: broadcastable arrays)."""

    def __init__(self, sparse, name):
        self.sparse, self.name = sparse, name

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _range_of(self.name, key)
        ranges = [_range_of(self.name, k) for k in key]
        if not ranges:
            return arange(0)
        ranges = promote(self.name, ranges, broadcast=False)
        grids = meshgrid(*ranges, indexing="ij", sparse=self.sparse)
        return list(grids) if self.sparse else stack(grids, 0)

    def __repr__(self):
        return f"funcgrad.numpy.{self.name}"


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


class _AxisConcatenator:
    """`r_` (axis 0, at least 1-D) and `c_` (axis -1, at least 2-D, 1-D arrays as columns)."""

    def __init__(self, name, axis, ndmin, trans1d):
        self.name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        parts = []
        for k, item in enumerate(key):
            if isinstance(item, str):
                if k:
                    raise errors.op_error(self.name, "special directives must be the first "
                                          "entry", cls=errors.FuncgradValueError)
                axis, ndmin, trans1d = self._directive(item, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                arr = _range_of(self.name, item)
                arr = self._lift(arr, 1, ndmin, trans1d)
            else:
                arr = asarray_operand(self.name, item)
                arr = self._lift(arr, len(shape_of(arr)), ndmin, trans1d)
            parts.append(arr)
        if not parts:
            return arange(0)
        return concatenate(parts, axis=axis)

    def _directive(self, item, ndmin, trans1d):
        if item in ("r", "c"):
            raise errors.op_error(self.name, "NumPy's matrix directives 'r' and 'c' are not "
                                  "supported (funcgrad, like JAX, has no matrix type)",
                                  cls=errors.FuncgradValueError)
        try:
            vec = [int(v) for v in item.split(",")]
        except ValueError:
            raise errors.op_error(self.name, f"unknown directive {errors.short_repr(item)}; use "
                                  "'axis[,ndmin[,trans1d]]'",
                                  cls=errors.FuncgradValueError) from None
        return vec[0], (vec[1] if len(vec) > 1 else ndmin), (vec[2] if len(vec) > 2
                                                              else trans1d)

    @staticmethod
    def _lift(arr, item_ndim, ndmin, trans1d):
        """`arr` with leading unit axes up to `ndmin`, its axes then moved as NumPy's
        `trans1d` says (where its original axes go among the new ones)."""
        shape = shape_of(arr)
        if len(shape) >= ndmin:
            return arr
        arr = reshape(arr, (1,) * (ndmin - len(shape)) + shape)
        if trans1d != -1 and item_ndim < ndmin:
            k2, k1 = ndmin - item_ndim, trans1d
            if k1 < 0:
                k1 += k2 + 1
            axes = list(range(ndmin))
            arr = transpose(arr, axes[:k1] + axes[k2:] + axes[k1:k2])
        return arr

    def __repr__(self):
        return f"funcgrad.numpy.{self.name}"


r_ = _AxisConcatenator("r_", 0, 1, -1)
c_ = _AxisConcatenator("c_", -1, 2, 0)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """`a` (at least 2-D, all axes equal beyond 2-D) with its main diagonal set to `val`
    (repeated cyclically when shorter); `wrap` continues below a tall matrix every n + 1
    rows, as NumPy. funcgrad arrays are immutable: pass `inplace=False` (as in JAX).

    Example:
        >>> fnp.fill_diagonal(fnp.zeros((2, 3)), 5.0, inplace=False)
        Array([[5., 0., 0.],
               [0., 5., 0.]], dtype=float32)
    """
    if inplace:
        raise errors.op_error("fill_diagonal", "funcgrad arrays are immutable: it cannot "
                              "fill in place", cls=errors.FuncgradValueError,
                              hint="use a = fnp.fill_diagonal(a, val, inplace=False)")
    a = asarray_operand("fill_diagonal", a)
    shape = shape_of(a)
    if len(shape) < 2 or (len(shape) > 2 and len(set(shape)) != 1):
        raise errors.op_error("fill_diagonal", f"needs a 2-D array or one whose axes are all "
                              f"equal, got shape {shape}", cls=errors.FuncgradValueError)
    n = min(shape)
    if len(shape) == 2:
        rows, cols = shape
        end = rows * cols if wrap or rows <= cols else cols * cols
        flat_idx = np.arange(0, end, cols + 1)
    else:
        flat_idx = np.arange(n) * sum(n ** k for k in range(len(shape)))
    val = lax.convert_element_type(asarray_operand("fill_diagonal", val), dtype_of(a))
    vals = reshape(val, (-1,))
    count = len(flat_idx)
    if shape_of(vals)[0] != count:
        reps = -(-count // max(shape_of(vals)[0], 1))
        vals = concatenate([vals] * reps)[:count]
    flat = reshape(a, (-1,)).at[flat_idx].set(vals)
    return reshape(flat, shape)


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices where `mask_func(ones((n, n)), k)` (e.g. `triu`) is nonzero.

    Example:
        >>> fnp.mask_indices(3, fnp.triu, 1)
        (Array([0, 0, 1], dtype=int32), Array([1, 2, 2], dtype=int32))
    """
    n = static_int("mask_indices", n, "n")
    a = mask_func(lax.full((n, n), 1, np.dtype(np.int32)), k)
    return nonzero(a, size=size)
