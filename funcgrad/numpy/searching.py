"""Sorting, searching and index arithmetic for funcgrad.numpy: `sort`, `argsort`,
`searchsorted`, `nonzero`/`argwhere`/`flatnonzero` (concrete input or `size=`), and the index
helpers (`unravel_index`, `ravel_multi_index`, `ix_`, `diag_indices`, `tril_indices`...).

Split from `indexing.py` (which owns `x[idx]`, `.at[]` and `take`); imports lax and the
indexing helpers only.
"""


import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array, concrete_value, to_array
from funcgrad.numpy import _util
from funcgrad.numpy.indexing import _I32, _const, _floor_mod, _int_operand, _prod, take

__all__ = [
    "argsort", "argwhere", "diag_indices", "diag_indices_from", "flatnonzero", "ix_",
    "nonzero", "ravel_multi_index", "searchsorted", "sort", "tril_indices", "tril_indices_from",
    "triu_indices", "triu_indices_from", "unravel_index",
]


# --- sorting --------------------------------------------------------------------------------

def _sort_axis(name, a, axis):
    a = _util.asarray_operand(name, a)
    if axis is None:
        return lax.reshape(a, (a.size,)), 0
    return a, _util.canonical_axis(name, axis, a.ndim)


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """`a` sorted along `axis` (flattened when None); NaNs sort last, as in NumPy.

    Example:
        >>> sort(fnp.array([3., 1., 2.]))
        Array([1., 2., 3.], dtype=float32)
    """
    if order is not None:
        raise errors.op_error("sort", "the `order` argument is not supported")
    a, axis = _sort_axis("sort", a, axis)
    out = lax.sort((a,), dimension=axis, is_stable=stable, num_keys=1)[0]
    return lax.rev(out, (axis,)) if descending else out


def _index_dtype(name, dtype):
    """An integer dtype asked for by the user (None: the default int)."""
    if dtype is None:
        return dtypes.default_int()
    dt = _util.user_dtype(dtype)
    if dtypes.kind(dt) not in "iu":
        raise errors.op_error(name, f"dtype must be an integer dtype, got {dt}",
                              cls=errors.FuncgradValueError)
    return dt


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort `a` along `axis` (a multi-operand lax.sort of `a` and an iota), of
    integer `dtype` (default: the default int).

    With `descending`, equal elements keep their original order (stable).

    Example:
        >>> argsort(fnp.array([3., 1., 2.]))
        Array([1, 2, 0], dtype=int32)
    """
    if order is not None:
        raise errors.op_error("argsort", "the `order` argument is not supported")
    a, axis = _sort_axis("argsort", a, axis)
    if descending:
        a = lax.rev(a, (axis,))
    iota = lax.broadcasted_iota(_index_dtype("argsort", dtype), a.shape, axis)
    idx = lax.sort((a, iota), dimension=axis, is_stable=stable, num_keys=1)[1]
    if not descending:
        return idx
    last = _const(a.shape[axis] - 1, idx.dtype)
    return lax.sub(last, lax.rev(idx, (axis,)))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion points of `v` into the sorted 1-D `a` (NaNs order last, as in NumPy).

    Compares every `v` with every element of `a` (memory v.size * a.size) whatever JAX's
    `method` ('scan', 'scan_unrolled', 'sort' or 'compare_all') says: the results are the
    same.

    Example:
        >>> searchsorted(fnp.array([1., 2., 3.]), fnp.array([2., 5.]))
        Array([1, 3], dtype=int32)
    """
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise errors.op_error("searchsorted", f"invalid method {errors.short_repr(method)}",
                              cls=errors.FuncgradValueError,
                              hint="use 'scan', 'scan_unrolled', 'sort' or 'compare_all'")
    if side not in ("left", "right"):
        raise errors.op_error("searchsorted", f"side must be 'left' or 'right', got "
                                              f"{errors.short_repr(side)}",
                              cls=errors.FuncgradValueError)
    a, v = _util.promote("searchsorted", [a, v], broadcast=False)
    if a.ndim != 1:
        raise errors.op_error("searchsorted", f"a must be 1-D, got shape {a.shape}",
                              cls=errors.FuncgradValueError)
    if sorter is not None:
        a = take(a, sorter, mode="clip")
    n, nd = a.shape[0], v.ndim
    idt = dtypes.int32 if n <= np.iinfo(np.int32).max else dtypes.default_int()  # (JAX's)
    if n == 0:
        return lax.full(v.shape, 0, idt)
    shape = tuple(v.shape) + (n,)
    ab = lax.broadcast_in_dim(a, shape, (nd,))
    vb = lax.broadcast_in_dim(v, shape, tuple(range(nd)))
    before = _lt_total(ab, vb) if side == "left" else lax.bitwise_not(_lt_total(vb, ab))
    return lax.reduce_sum(lax.convert_element_type(before, idt), (nd,))


def _lt_total(x, y):
    """x < y in NumPy's sort order (NaN after every number)."""
    if dtypes.kind(x.dtype) not in "fc":
        return lax.lt(x, y)
    return lax.select_n(lax.ne(y, y), lax.lt(x, y), lax.eq(x, x))


# --- nonzero and friends --------------------------------------------------------------------

def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements of `a`, one array per axis.

    Without `size` the input must be concrete (the result shape depends on its values);
    with `size` the result has exactly `size` entries: truncated, or padded with
    `fill_value` (default 0; a scalar or one value per axis), and works under every
    transform.

    Example:
        >>> nonzero(fnp.array([0, 3, 0, 5]), size=3)
        (Array([1, 3, 0], dtype=int32),)
    """
    a = _util.asarray_operand("nonzero", a)
    if a.ndim == 0:
        raise errors.op_error("nonzero", "calling nonzero on 0-d arrays is not allowed",
                              cls=errors.FuncgradValueError, hint="use fnp.atleast_1d(x)")
    if size is None:
        v = concrete_value(a)
        if v is None:
            raise errors.op_error(
                "nonzero", f"the input {a.aval} is traced, so the number of nonzero elements "
                "(the output shape) is unknown", cls=errors.ConcretizationTypeError,
                hint="pass a static size=N (and optionally fill_value=...)")
        return tuple(to_array(i) for i in np.nonzero(v))
    size = _util.static_int("nonzero", size, "size")
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * a.ndim
    if len(fills) != a.ndim:
        raise errors.op_error("nonzero", f"fill_value must be a scalar or a tuple of length "
                              f"{a.ndim}, got {fill_value}", cls=errors.FuncgradValueError)
    dt, n = dtypes.default_int(), a.size
    if n == 0 or size == 0:
        return tuple(lax.full((size,), 0 if f is None else f, dt) for f in fills)
    mask = a if a.dtype == np.bool_ else lax.ne(a, _const(0, a.dtype))
    mask = lax.reshape(mask, (n,))
    key = lax.convert_element_type(lax.bitwise_not(mask), _I32)  # nonzeros first
    pos = lax.sort((key, lax.iota(_I32, n)), dimension=0, is_stable=True, num_keys=1)[1]
    pos = (lax.slice(pos, (0,), (size,)) if size <= n
           else lax.concatenate([pos, lax.full((size - n,), 0, _I32)], 0))
    valid = lax.lt(lax.iota(_I32, size), lax.reduce_sum(lax.convert_element_type(mask, _I32),
                                                        (0,)))
    out, stride = [], n
    for d, f in zip(a.shape, fills):
        stride //= d
        c = pos if stride == 1 else lax.div(pos, _const(stride, _I32))
        c = c if stride * d == n else lax.rem(c, _const(d, _I32))
        c = c if dt == _I32 else lax.convert_element_type(c, dt)
        out.append(lax.select_n(valid, lax.full((size,), 0 if f is None else f, dt), c))
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements of the flattened `a` (see `nonzero` for `size`)."""
    a = _util.asarray_operand("flatnonzero", a)
    return nonzero(lax.reshape(a, (a.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The nonzero indices of `a` as a (count, a.ndim) array (see `nonzero` for `size`).

    Example:
        >>> argwhere(fnp.array([[0, 1], [1, 0]]))
        Array([[0, 1],
               [1, 0]], dtype=int32)
    """
    a = _util.asarray_operand("argwhere", a)
    if a.ndim == 0:
        k = nonzero(lax.reshape(a, (1,)), size=size, fill_value=fill_value)[0].shape[0]
        return lax.full((k, 0), 0, dtypes.default_int())
    cols = nonzero(a, size=size, fill_value=fill_value)
    cols = [lax.reshape(c, (c.shape[0], 1)) for c in cols]
    return cols[0] if len(cols) == 1 else lax.concatenate(cols, 1)


# --- index arithmetic -----------------------------------------------------------------------

def unravel_index(indices, shape):
    """Coordinates in an array of `shape` of the flat `indices` (a tuple, one per axis).

    As in JAX, out-of-bounds indices are clamped and negative ones count from the end.

    Example:
        >>> unravel_index(fnp.array([5, 1]), (2, 3))
        (Array([1, 0], dtype=int32), Array([2, 1], dtype=int32))
    """
    idx = _int_operand("unravel_index", indices)
    shape = _util.static_shape("unravel_index", shape)
    total = _prod(shape)
    if total == 0 and shape:
        raise errors.op_error("unravel_index", f"cannot unravel into the empty shape {shape}",
                              cls=errors.FuncgradValueError)
    info, dt = dtypes.iinfo(idx.dtype), idx.dtype
    c = lax.clamp(_const(max(-total, info.min), dt), idx, _const(min(total - 1, info.max), dt))
    if info.min < 0:
        c = lax.select_n(lax.lt(c, _const(0, dt)), c, lax.add(c, _const(total, dt)))
    out, stride = [], total
    for d in shape:
        q = c if stride == total else lax.rem(c, _const(stride, dt))
        stride //= d
        out.append(q if stride == 1 else lax.div(q, _const(stride, dt)))
    return tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Flat indices of the coordinates `multi_index` in an array of shape `dims`, of integer
    `dtype` (default: the default int), which must hold `prod(dims) - 1`.

    mode: "raise" (needs concrete input; a FuncgradValueError when out of range), "wrap",
    "clip" or "ignore" (no check). order: "C" (row-major) or "F".

    Example:
        >>> ravel_multi_index((fnp.array([1, 0]), fnp.array([2, 1])), (2, 3))
        Array([5, 1], dtype=int32)
    """
    dims = _util.static_shape("ravel_multi_index", dims)
    if len(multi_index) != len(dims):
        raise errors.op_error("ravel_multi_index", f"got {len(multi_index)} index arrays for "
                              f"{len(dims)} dimensions", cls=errors.FuncgradValueError)
    if order not in ("C", "F"):
        raise errors.op_error("ravel_multi_index", f"order must be 'C' or 'F', got "
                                                   f"{errors.short_repr(order)}",
                              cls=errors.FuncgradValueError)
    arrs = [_int_operand("ravel_multi_index", i) for i in multi_index]
    dt = _index_dtype("ravel_multi_index", dtype)
    if int(np.prod(dims, dtype=np.int64)) - 1 > dtypes.iinfo(dt).max:
        raise errors.op_error("ravel_multi_index", f"dtype {dt} cannot hold the flat indices "
                              f"of shape {dims}", cls=errors.FuncgradValueError,
                              hint="pass a wider integer dtype")
    arrs = [i if i.dtype == dt else lax.convert_element_type(i, dt) for i in arrs]
    for k, (i, d) in enumerate(zip(arrs, dims)):
        if mode == "raise":
            _check_coordinates(i, d, k)
        elif mode == "wrap":
            arrs[k] = _floor_mod(i, d)
        elif mode == "clip":
            arrs[k] = lax.clamp(_const(0, dt), i, _const(d - 1, dt))
        elif mode == "ignore":
            pass
        else:
            raise errors.op_error("ravel_multi_index", f"invalid mode {errors.short_repr(mode)}",
                                  cls=errors.FuncgradValueError)
    strides = [_prod(dims[k + 1:]) if order == "C" else _prod(dims[:k]) for k in range(len(dims))]
    shape = _util.broadcast_shapes("ravel_multi_index", *[i.shape for i in arrs])
    out = lax.full(shape, 0, dt)
    for i, s in zip(arrs, strides):
        out = lax.add(out, _util.broadcast_to_shape(lax.mul(i, _const(s, dt)), shape))
    return out


def _check_coordinates(i, d, k):
    v = concrete_value(i)
    if v is None:
        raise errors.op_error("ravel_multi_index", f"mode='raise' needs concrete indices, got a "
                              f"traced {i.aval}", cls=errors.ConcretizationTypeError,
                              hint="use mode='wrap' or mode='clip' inside transformations")
    if v.size and (v.min() < 0 or v.max() >= d):
        raise errors.op_error("ravel_multi_index", f"invalid entry in coordinates array {k}: "
                              f"values must be in [0, {d})", cls=errors.FuncgradValueError)


def ix_(*args):
    """An open mesh from 1-D sequences: `x[ix_(rows, cols)]` selects a sub-grid.

    Example:
        >>> [a.shape for a in ix_(fnp.array([0, 1]), fnp.array([2, 0, 1]))]
        [(2, 1), (1, 3)]
    """
    out = []
    for k, a in enumerate(args):
        a = (Array(np.zeros(0, _I32)) if isinstance(a, (list, tuple)) and not a
             else _util.asarray_operand("ix_", a))
        if a.ndim != 1:
            raise errors.op_error("ix_", f"cross index must be 1-dimensional, argument {k} has "
                                  f"shape {a.shape}", cls=errors.FuncgradValueError)
        if a.dtype == np.bool_:
            a = nonzero(a)[0]
        shape = [1] * len(args)
        shape[k] = a.shape[0]
        out.append(lax.reshape(a, shape))
    return tuple(out)


def _static_indices(arrays):
    return tuple(to_array(np.asarray(a)) for a in arrays)


def diag_indices(n, ndim=2):
    """`ndim` copies of `arange(n)`: the indices of the main diagonal of an (n,)*ndim array."""
    if n < 0:
        raise errors.op_error("diag_indices", f"n must be non-negative, got {n}",
                              cls=errors.FuncgradValueError)
    return _static_indices(np.diag_indices(n, ndim))


def diag_indices_from(arr):
    """`diag_indices` for a square array `arr` (all dimensions equal, ndim >= 2)."""
    shape = _util.asarray_operand("diag_indices_from", arr).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise errors.op_error("diag_indices_from", f"input must be at least 2-d with all "
                              f"dimensions equal, got shape {shape}",
                              cls=errors.FuncgradValueError)
    return diag_indices(shape[0], len(shape))


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle (diagonal offset `k`) of an (n, m) array.

    Example:
        >>> tril_indices(2)
        (Array([0, 1, 1], dtype=int32), Array([0, 0, 1], dtype=int32))
    """
    return _static_indices(np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle (diagonal offset `k`) of an (n, m) array."""
    return _static_indices(np.triu_indices(n, k, m))


def _shape_2d(name, arr):
    shape = _util.asarray_operand(name, arr).shape
    if len(shape) != 2:
        raise errors.op_error(name, f"input must be 2-d, got shape {shape}",
                              cls=errors.FuncgradValueError)
    return shape


def tril_indices_from(arr, k=0):
    """`tril_indices` for the shape of the 2-D `arr`."""
    n, m = _shape_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """`triu_indices` for the shape of the 2-D `arr`."""
    n, m = _shape_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)
