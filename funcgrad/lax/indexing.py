"""Gather and scatter with XLA's dimension numbers: the primitives under NumPy indexing.

`gather` reads windows of an operand at start indices; `scatter`, `scatter_add`,
`scatter_mul`, `scatter_min`, `scatter_max` write windows of updates. The last axis of the
indices is always the index vector (JAX's convention). Out-of-bounds indices are clamped
for gathers by default and dropped for scatters by default (`GatherScatterMode`).
This module imports only the core, the interpreters and other `funcgrad.lax` wrappers.
"""

import enum
import functools
from typing import NamedTuple

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.lax.utils import quiet, static_ints

__all__ = [
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
    "gather_p", "scatter", "scatter_add", "scatter_add_p", "scatter_max", "scatter_max_p",
    "scatter_min", "scatter_min_p", "scatter_mul", "scatter_mul_p", "scatter_p",
]


class GatherDimensionNumbers(NamedTuple):
    """Which gather output axes are window axes, which operand axes are collapsed, and
    which operand axis each component of an index vector addresses; operand axis
    `operand_batching_dims[k]` is indexed by the position along indices axis
    `start_indices_batching_dims[k]` (a batched gather, as XLA's)."""

    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """Which update axes are window axes, which operand axes are inserted (size-1 windows),
    and which operand axis each component of an index vector addresses; the batching dims
    pair operand axes with indices axes, as in `GatherDimensionNumbers`."""

    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


def _unbatched(name, dn, operand, indices):
    """`(dn, indices)` without batching dims: each operand batching axis becomes one more
    component of the index vectors, an iota along its indices axis (so the primitives,
    their rules and the backends see three-field dimension numbers)."""
    dn = type(dn)(*(_ints(d) for d in dn))
    window, inserted, index_map, op_batch, idx_batch = dn
    if not op_batch and not idx_batch:
        return dn, indices
    oa, ia = get_aval(operand), get_aval(indices)
    if len(op_batch) != len(idx_batch) or any(
            not 0 <= o < oa.ndim or not 0 <= i < ia.ndim - 1 or oa.shape[o] != ia.shape[i]
            for o, i in zip(op_batch, idx_batch)):
        raise errors.op_error(name, f"operand batching dims {op_batch} of operand {oa} and "
                              f"indices batching dims {idx_batch} of indices {ia} must pair "
                              "axes of equal sizes (the last indices axis holds index vectors)",
                              cls=errors.FuncgradValueError)
    iotas = [lax.broadcasted_iota(ia.dtype, ia.shape[:-1] + (1,), i) for i in idx_batch]
    indices = lax.concatenate([indices] + iotas, ia.ndim - 1)
    return type(dn)(window, tuple(sorted(inserted + op_batch)), index_map + op_batch), indices


class GatherScatterMode(enum.Enum):
    """Out-of-bounds handling: CLIP clamps start indices so the window fits; FILL_OR_DROP
    fills out-of-bounds gather windows with `fill_value` and drops out-of-bounds scatter
    windows; PROMISE_IN_BOUNDS behaves like XLA (gathers clamp, scatters drop)."""

    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    def __str__(self):
        return self.value

    @staticmethod
    def from_any(mode, default):
        if isinstance(mode, GatherScatterMode):
            return mode
        if mode is None:
            return default
        table = {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
                 "drop": GatherScatterMode.FILL_OR_DROP,
                 "fill_or_drop": GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}
        if mode not in table:
            raise errors.op_error("gather/scatter", f"unknown mode {errors.short_repr(mode)}; "
                                                    f"use 'clip', "
                                  "'fill', 'drop' or 'promise_in_bounds'",
                                  cls=errors.FuncgradValueError)
        return table[mode]


def _ints(xs):
    return static_ints("gather/scatter", xs, "dimension numbers and slice sizes")


def _gather_clips(mode):
    return mode is not GatherScatterMode.FILL_OR_DROP


def _scatter_clips(mode):
    return mode is GatherScatterMode.CLIP


# --- index plans shared by the gather and scatter implementations ----------------------------
# A plan indexes the operand so that `operand[idx]` has shape batch + window, with the
# window axes being the non-collapsed operand axes in operand order.

@functools.lru_cache(maxsize=1024)
def _plan_structure(shape, collapsed, index_map, sizes):
    """The index-independent part of a plan: (window axes, upper start bounds, and for the
    simple case of scalar indices with full slices elsewhere, the axes indexed by arrays)."""
    window = tuple(d for d in range(len(shape)) if d not in collapsed)
    upper = np.array([shape[d] - sizes[d] for d in index_map], dtype=np.int64)
    upper.flags.writeable = False  # shared by every call with this structure
    simple = bool(index_map) and all(sizes[d] == 1 for d in index_map) and all(
        d in collapsed or sizes[d] == shape[d] for d in window if d not in index_map)
    head = tuple(d for d in range(len(shape)) if d in index_map or d in collapsed)
    return window, upper, head if simple else None


def _index_plan(shape, indices, collapsed, index_map, sizes, clip):
    """(view_perm, idx, in_bounds, indexed_shape, array_shape) for indexing
    `operand.transpose(view_perm)[idx]`; the index arrays in `idx` broadcast to
    `array_shape`, the indexed result to `indexed_shape`."""
    window, upper, head = _plan_structure(shape, collapsed, index_map, sizes)
    batch = indices.shape[:-1]
    starts = indices.astype(np.intp)
    in_bounds = None
    if not clip and index_map:
        in_bounds = np.all((starts >= 0) & (starts <= upper), axis=-1)
    starts = np.minimum(np.maximum(starts, 0), upper).astype(np.intp, copy=False)
    start = {d: starts[..., k] for k, d in enumerate(index_map)}
    if head is not None:
        rest = [d for d in range(len(shape)) if d not in head]
        idx = tuple(start.get(d, 0) for d in head) + (slice(None),) * len(rest)
        return list(head) + rest, idx, in_bounds, batch + tuple(shape[d] for d in rest), batch
    nb, nw = len(batch), len(window)
    idx = []
    for d in range(len(shape)):
        i = start[d] if d in start else np.zeros(batch, np.intp)
        i = i.reshape(batch + (1,) * nw)
        if d in window:
            off_shape = [1] * (nb + nw)
            off_shape[nb + window.index(d)] = sizes[d]
            i = i + np.arange(sizes[d]).reshape(off_shape)
        idx.append(i)
    full = batch + tuple(sizes[d] for d in window)
    return list(range(len(shape))), tuple(idx), in_bounds, full, full


def _masked(idx, in_bounds, array_shape):
    """Keep only the in-bounds windows (batch axes flattened to one)."""
    return tuple(i if isinstance(i, slice) else np.broadcast_to(i, array_shape)[in_bounds]
                 for i in idx)


def _batch_window_perm(out_ndim, window_dims):
    """Axis order taking an output/updates array to batch + window layout."""
    return [p for p in range(out_ndim) if p not in window_dims] + list(window_dims)


def _default_fill(dtype):
    if dtypes.kind(dtype) in "fc":
        return np.nan
    if dtypes.kind(dtype) == "b":
        return True
    if dtypes.kind(dtype) == "u":
        return dtypes.iinfo(dtype).max
    return dtypes.iinfo(dtype).min


# --- gather ---------------------------------------------------------------------------------
def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """Gather windows of `operand` (XLA Gather); the last axis of `start_indices` holds
    index vectors.

    Args:
        operand: the array to read from.
        start_indices: integer array of shape batch + (len(start_index_map),).
        dimension_numbers: a `GatherDimensionNumbers`.
        slice_sizes: the window size along every operand axis (1 for collapsed axes).
        mode: "clip" (default: clamp so the window fits), "fill" (out-of-bounds windows
            give `fill_value`: NaN for floats, the minimum for signed ints) or
            "promise_in_bounds".

    Example:
        >>> dn = GatherDimensionNumbers((1,), (0,), (0,))
        >>> gather(fnp.arange(6.).reshape(3, 2), fnp.array([[2], [0]]), dn, (1, 2))
        Array([[4., 5.],
               [0., 1.]], dtype=float32)
    """
    dn, start_indices = _unbatched("gather", GatherDimensionNumbers(*dimension_numbers),
                                   operand, start_indices)
    mode = GatherScatterMode.from_any(mode, GatherScatterMode.CLIP)
    if mode is not GatherScatterMode.FILL_OR_DROP:
        fill_value = None
    elif fill_value is not None:
        fill_value = _scalar_fill(fill_value)
    return gather_p.bind(operand, start_indices, dimension_numbers=dn,
                         slice_sizes=_ints(slice_sizes), unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=mode,
                         fill_value=fill_value)


def _scalar_fill(fill_value):
    """A gather `fill_value` as a Python number (a static parameter)."""
    v = np.asarray(fill_value) if isinstance(fill_value, (int, float, complex, bool,
                                                           np.generic, np.ndarray)) else None
    if v is None or v.ndim != 0 or dtypes.kind(v.dtype) not in "biufc":
        raise errors.op_error("gather", f"fill_value must be a number (a static scalar), got "
                              f"{type(fill_value).__name__} {errors.short_repr(fill_value)}")
    return v.item()


def _check_indices(name, indices, operand, index_map):
    if dtypes.kind(indices.dtype) not in "iu":
        raise errors.op_error(name, f"indices must be integers, got {indices}")
    if indices.ndim < 1:
        raise errors.op_error(name, f"indices must have rank >= 1 (the last axis holds index "
                              f"vectors), got {indices}")
    if len(index_map) != indices.shape[-1]:
        raise errors.op_error(name, f"the index vector length {indices.shape[-1]} (last axis "
                              f"of {indices}) must equal the number of mapped operand axes "
                              f"{index_map}")
    if any(not 0 <= d < operand.ndim for d in index_map) or len(set(index_map)) != len(
            index_map):
        raise errors.op_error(name, f"index map {index_map} must name distinct axes of the "
                              f"operand {operand}", cls=errors.FuncgradValueError)


def _check_sorted_dims(name, what, dims, bound):
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < bound for d in dims):
        raise errors.op_error(name, f"{what} {dims} must be sorted, distinct and in "
                              f"[0, {bound})", cls=errors.FuncgradValueError)


def _gather_abstract(operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value,
                     unique_indices, indices_are_sorted):
    return _gather_aval(operand, indices, dimension_numbers, slice_sizes)


@functools.lru_cache(maxsize=1024)
def _gather_aval(operand, indices, dimension_numbers, slice_sizes):
    offset_dims, collapsed, index_map = dimension_numbers[:3]
    _check_indices("gather", indices, operand, index_map)
    if len(slice_sizes) != operand.ndim or any(
            not 0 <= s <= n for s, n in zip(slice_sizes, operand.shape)):
        raise errors.op_error("gather", f"slice_sizes {slice_sizes} must give a size in "
                              f"[0, dim] for every axis of the operand {operand}")
    _check_sorted_dims("gather", "collapsed_slice_dims", collapsed, operand.ndim)
    if any(slice_sizes[d] > 1 for d in collapsed):
        raise errors.op_error("gather", f"collapsed axes {collapsed} must have slice size 1, "
                              f"got slice_sizes {slice_sizes}")
    out_ndim = indices.ndim - 1 + len(offset_dims)
    _check_sorted_dims("gather", "offset_dims", offset_dims, out_ndim)
    window = [slice_sizes[d] for d in range(operand.ndim) if d not in collapsed]
    if len(window) != len(offset_dims):
        raise errors.op_error("gather", f"offset_dims {offset_dims} must have one entry per "
                              f"non-collapsed operand axis ({len(window)} for operand "
                              f"{operand} and collapsed_slice_dims {collapsed})")
    batch = iter(indices.shape[:-1])
    shape = tuple(window[offset_dims.index(p)] if p in offset_dims else next(batch)
                  for p in range(out_ndim))
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _gather_impl(operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value,
                 unique_indices, indices_are_sorted):
    offset_dims, collapsed, index_map = dimension_numbers[:3]
    if operand.ndim == 0:  # index a size-1 axis instead of a scalar
        operand, collapsed, slice_sizes = operand.reshape(1), (0,), (1,)
    view_perm, idx, in_bounds, shape, _ = _index_plan(
        operand.shape, indices, collapsed, index_map, slice_sizes, _gather_clips(mode))
    res = _transposed(operand, view_perm)[idx]
    nb = indices.ndim - 1
    window = tuple(slice_sizes[d] for d in range(operand.ndim) if d not in collapsed)
    if res.shape != shape:
        res = np.broadcast_to(res, shape)
    res = res.reshape(indices.shape[:-1] + window)
    if in_bounds is not None:
        fill = _default_fill(operand.dtype) if fill_value is None else fill_value
        mask = in_bounds.reshape(in_bounds.shape + (1,) * len(window))
        res = np.where(mask, res, np.asarray(fill).astype(operand.dtype))
    return _transposed(res, np.argsort(_batch_window_perm(nb + len(offset_dims), offset_dims)))


def _transposed(x, perm):
    return x if all(i == p for i, p in enumerate(perm)) else x.transpose(perm)


def _scatter_dnums_of(dn):
    return ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map)


def _gather_dnums_of(dn):
    return GatherDimensionNumbers(dn.update_window_dims, dn.inserted_window_dims,
                                  dn.scatter_dims_to_operand_dims)


def _gather_jvp(t, operand, indices, *, out, fill_value, **params):
    return gather_p.bind(t, indices, fill_value=0 if fill_value is not None else None, **params)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, mode,
                      fill_value, unique_indices, indices_are_sorted):
    aval = operand.aval
    zeros = lax.full(aval.shape, 0, aval.dtype)
    smode = GatherScatterMode.CLIP if _gather_clips(mode) else GatherScatterMode.FILL_OR_DROP
    out = scatter_add(zeros, indices, ct, _scatter_dnums_of(dimension_numbers),
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=smode)
    return [out, None]


def _with_batch_index(indices):
    """`indices` (batch axis first) with a leading index component counting that axis."""
    aval = get_aval(indices)
    if aval.dtype.itemsize < 4:
        indices = lax.convert_element_type(indices, np.int32)
    dt = get_aval(indices).dtype
    counts = lax.broadcasted_iota(dt, aval.shape[:-1] + (1,), 0)
    return lax.concatenate([counts, indices], aval.ndim - 1)


def _gather_batch(args, dims, *, dimension_numbers, slice_sizes, **params):
    operand, indices = args
    od, idim = dims
    offset_dims, collapsed, index_map = dimension_numbers[:3]
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if idim is batching.not_mapped:
        operand = batching.moveaxis(operand, od, 0)
        dn = GatherDimensionNumbers((0,) + up(offset_dims), up(collapsed), up(index_map))
        sizes = (get_aval(operand).shape[0],) + slice_sizes
        return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=sizes,
                             **params), 0
    if od is batching.not_mapped:
        indices = batching.moveaxis(indices, idim, 0)
        dn = GatherDimensionNumbers(up(offset_dims), collapsed, index_map)
        params.update(unique_indices=False, indices_are_sorted=False)
        return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                             **params), 0
    operand = batching.moveaxis(operand, od, 0)
    indices = batching.moveaxis(indices, idim, 0)
    if get_aval(operand).shape[0] == 0:  # no size-1 slice fits an empty batch axis
        oa, ia = get_aval(operand), get_aval(indices)
        example = _gather_aval(oa.update(shape=oa.shape[1:]), ia.update(shape=ia.shape[1:]),
                               dimension_numbers, slice_sizes)
        return lax.full((0,) + example.shape, 0, example.dtype), 0
    return gather_p.bind(operand, _with_batch_index(indices),
                         dimension_numbers=_dn_up(dimension_numbers),
                         slice_sizes=(1,) + slice_sizes, **params), 0


def _dn_up(dn):
    """Gather dimension numbers for an operand and indices with a new leading batch axis
    that the indices address through an extra leading index component."""
    up = tuple(d + 1 for d in dn.offset_dims)
    return GatherDimensionNumbers(up, (0,) + tuple(d + 1 for d in dn.collapsed_slice_dims),
                                  (0,) + tuple(d + 1 for d in dn.start_index_map))


gather_p = Primitive("gather")
gather_p.def_impl(_gather_impl)
gather_p.def_abstract_eval(_gather_abstract)
ad.defjvp(gather_p, _gather_jvp, None)
ad.transpose_rules[gather_p] = _gather_transpose
batching.batch_rules[gather_p] = _gather_batch


# --- scatter family: shared rules ---------------------------------------------------------------
def _scatter_abstract(name):
    def rule(operand, indices, updates, *, dimension_numbers, mode, unique_indices,
             indices_are_sorted):
        window_dims, inserted, index_map = dimension_numbers[:3]
        _check_indices(name, indices, operand, index_map)
        if updates.dtype != operand.dtype:
            raise errors.op_error(name, f"updates {updates} must have the operand's dtype "
                                  f"({operand})", hint="convert with .astype()")
        _check_sorted_dims(name, "update_window_dims", window_dims, updates.ndim)
        _check_sorted_dims(name, "inserted_window_dims", inserted, operand.ndim)
        if len(window_dims) + len(inserted) != operand.ndim:
            raise errors.op_error(name, f"update_window_dims {window_dims} and "
                                  f"inserted_window_dims {inserted} must together cover the "
                                  f"{operand.ndim} axes of the operand {operand}")
        scatter_shape = tuple(s for p, s in enumerate(updates.shape) if p not in window_dims)
        sizes = _window_sizes(operand.ndim, inserted, window_dims, updates.shape)
        if scatter_shape != indices.shape[:-1] or any(
                s > n for s, n in zip(sizes, operand.shape)):
            raise errors.op_error(name, f"updates {updates} do not fit: their scatter axes "
                                  f"must match the indices' batch shape {indices.shape[:-1]} "
                                  f"and their windows {tuple(sizes)} the operand {operand}")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
    return rule


def _window_sizes(ndim, inserted, window_dims, updates_shape):
    it = iter(window_dims)
    return tuple(1 if d in inserted else updates_shape[next(it)] for d in range(ndim))


def _scatter_impl(ufunc):
    def impl(operand, indices, updates, *, dimension_numbers, mode, unique_indices,
             indices_are_sorted):
        operand_shape = operand.shape
        window_dims, inserted, index_map = dimension_numbers[:3]
        if operand.ndim == 0:  # index a size-1 axis instead of a scalar
            operand, inserted = operand.reshape(1), (0,)
        sizes = _window_sizes(operand.ndim, inserted, window_dims, updates.shape)
        view_perm, idx, in_bounds, shape, array_shape = _index_plan(
            operand.shape, indices, inserted, index_map, sizes, _scatter_clips(mode))
        out = operand.copy()
        upd = _transposed(updates, _batch_window_perm(updates.ndim, window_dims)).reshape(shape)
        if in_bounds is not None:
            idx = _masked(idx, in_bounds, array_shape)
            upd = upd.reshape((in_bounds.size,) + upd.shape[in_bounds.ndim:])[in_bounds.ravel()]
        view = _transposed(out, view_perm)
        if ufunc is None:
            view[idx] = upd
        else:
            ufunc.at(view, idx, upd)
        return out.reshape(operand_shape)
    return impl


def _inverse_gather(dimension_numbers, mode, operand_shape, updates_shape, fill=0):
    """A function gathering, per update element, the operand element it scatters to."""
    window_dims, inserted, _ = dimension_numbers[:3]
    sizes = _window_sizes(len(operand_shape), inserted, window_dims, updates_shape)
    gmode = GatherScatterMode.CLIP if _scatter_clips(mode) else GatherScatterMode.FILL_OR_DROP
    dn = _gather_dnums_of(dimension_numbers)
    return lambda x, indices: gather(x, indices, dn, sizes, mode=gmode, fill_value=fill)


def _scatter_batch(prim):
    def rule(args, dims, *, dimension_numbers, **params):
        operand, indices, updates = args
        od, idim, ud = dims
        size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
        operand = batching.bdim_at_front(operand, od, size)
        if size == 0:
            return operand, 0
        updates = batching.bdim_at_front(updates, ud, size)
        window_dims, inserted, index_map = dimension_numbers[:3]
        up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
        if idim is batching.not_mapped:
            dn = ScatterDimensionNumbers((0,) + up(window_dims), up(inserted), up(index_map))
            return prim.bind(operand, indices, updates, dimension_numbers=dn, **params), 0
        indices = _with_batch_index(batching.bdim_at_front(indices, idim, size))
        dn = ScatterDimensionNumbers(up(window_dims), (0,) + up(inserted), (0,) + up(index_map))
        return prim.bind(operand, indices, updates, dimension_numbers=dn, **params), 0
    return rule


def _scatter_prim(name, ufunc):
    p = Primitive(name)
    p.def_impl(quiet(_scatter_impl(ufunc)))
    p.def_abstract_eval(_scatter_abstract(name))
    batching.batch_rules[p] = _scatter_batch(p)
    return p


def _scatter_bind(prim, operand, indices, updates, dimension_numbers, indices_are_sorted,
                  unique_indices, mode):
    dn, indices = _unbatched(prim.name, ScatterDimensionNumbers(*dimension_numbers), operand,
                             indices)
    mode = GatherScatterMode.from_any(mode, GatherScatterMode.FILL_OR_DROP)
    return prim.bind(operand, indices, updates, dimension_numbers=dn, mode=mode,
                     unique_indices=bool(unique_indices),
                     indices_are_sorted=bool(indices_are_sorted))


def _zeros_like(x):
    a = get_aval(x)
    return lax.full(a.shape, 0, a.dtype)


# --- scatter_add ------------------------------------------------------------------------------
def scatter_add(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with `updates` added at the windows addressed by `scatter_indices`;
    repeated indices accumulate. Out-of-bounds windows are dropped unless mode="clip".

    Example:
        >>> dn = ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter_add(fnp.zeros(3), fnp.array([[1], [1]]), fnp.ones(2), dn)
        Array([0., 2., 0.], dtype=float32)
    """
    return _scatter_bind(scatter_add_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_add_jvp(primals, out, tangents, **params):
    t_op, _, t_up = tangents
    if type(t_op) is ad.Zero and type(t_up) is ad.Zero:
        return ad.Zero(get_aval(out))
    return scatter_add_p.bind(ad.instantiate(t_op), primals[1], ad.instantiate(t_up), **params)


def _scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers, mode,
                           unique_indices, indices_are_sorted):
    ct_up = None
    if ad.is_undefined(updates):
        g = _inverse_gather(dimension_numbers, mode, operand.aval.shape if ad.is_undefined(
            operand) else get_aval(operand).shape, updates.aval.shape)
        ct_up = g(ct, indices)
    return [ct if ad.is_undefined(operand) else None, None, ct_up]


scatter_add_p = _scatter_prim("scatter-add", np.add)
ad.jvp_rules[scatter_add_p] = _scatter_add_jvp
ad.transpose_rules[scatter_add_p] = _scatter_add_transpose


# --- scatter (set) ------------------------------------------------------------------------------
def scatter(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
            unique_indices=False, mode=None):
    """`operand` with the windows addressed by `scatter_indices` replaced by `updates`.

    With repeated indices one of the updates wins (the last one, deterministically).

    Example:
        >>> dn = ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter(fnp.zeros(3), fnp.array([[2]]), fnp.ones(1), dn)
        Array([0., 0., 1.], dtype=float32)
    """
    return _scatter_bind(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_jvp(primals, out, tangents, **params):
    t_op, _, t_up = tangents
    if type(t_op) is ad.Zero and type(t_up) is ad.Zero:
        return ad.Zero(get_aval(out))
    return scatter_p.bind(ad.instantiate(t_op), primals[1], ad.instantiate(t_up), **params)


def _scatter_transpose(ct, operand, indices, updates, *, dimension_numbers, mode,
                       unique_indices, indices_are_sorted):
    params = dict(dimension_numbers=dimension_numbers, mode=mode, unique_indices=unique_indices,
                  indices_are_sorted=indices_are_sorted)
    up_aval = updates.aval if ad.is_undefined(updates) else get_aval(updates)
    ct_op = ct_up = None
    if ad.is_undefined(operand):
        ct_op = scatter_p.bind(ct, indices, lax.full(up_aval.shape, 0, up_aval.dtype), **params)
    if ad.is_undefined(updates):
        shape = operand.aval.shape if ad.is_undefined(operand) else get_aval(operand).shape
        g = _inverse_gather(dimension_numbers, mode, shape, up_aval.shape)
        ct_up = g(ct, indices)
        if not unique_indices:
            # only the update that won its position receives the cotangent
            ids = lax.reshape(lax.iota(np.dtype(np.int32), int(np.prod(up_aval.shape))),
                              up_aval.shape)
            winners = scatter_p.bind(lax.full(shape, -1, np.int32), indices, ids, **params)
            won = lax.eq(_inverse_gather(dimension_numbers, mode, shape, up_aval.shape, -1)(
                winners, indices), ids)
            ct_up = lax.select_n(won, lax.full_like(ct_up, 0), ct_up)
    return [ct_op, None, ct_up]


scatter_p = _scatter_prim("scatter", None)
ad.jvp_rules[scatter_p] = _scatter_jvp
ad.transpose_rules[scatter_p] = _scatter_transpose


# --- scatter_mul --------------------------------------------------------------------------------
def scatter_mul(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` multiplied by `updates` at the addressed windows (repeats multiply).

    Derivatives are exact to first order everywhere (JAX supports only unique indices).
    With repeated indices, derivatives of order >= 2 at updates that are exactly zero treat
    the zero pattern as fixed.

    Example:
        >>> dn = ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter_mul(fnp.ones(2), fnp.array([[0], [0]]), fnp.array([2., 3.]), dn)
        Array([6., 1.], dtype=float32)
    """
    return _scatter_bind(scatter_mul_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_mul_jvp(primals, out, tangents, *, dimension_numbers, mode, **params):
    x, i, y = primals
    t_x, _, t_y = tangents
    kw = dict(dimension_numbers=dimension_numbers, mode=mode, **params)
    acc = ad.Zero(get_aval(out))
    if type(t_x) is not ad.Zero:
        acc = scatter_mul_p.bind(t_x, i, y, **kw)
    if type(t_y) is not ad.Zero:
        # d out[p] / d y_j = x[p] * (product of the other updates at p), zero-safe
        zero = lax.full_like(y, 0)
        one = lax.full_like(y, 1)
        is_zero = lax.eq(y, zero)
        nonzero = lax.select_n(is_zero, y, one)
        prod_nz = scatter_mul_p.bind(lax.full_like(x, 1), i, nonzero, **kw)
        n_zero = scatter_add_p.bind(_zeros_like(x), i, lax.select_n(is_zero, zero, one), **kw)
        g = _inverse_gather(dimension_numbers, mode, get_aval(x).shape, get_aval(y).shape)
        p_at, n_at = g(prod_nz, i), g(n_zero, i)
        w = lax.select_n(is_zero,
                         lax.select_n(lax.eq(n_at, zero), zero, lax.div(p_at, nonzero)),
                         lax.select_n(lax.eq(n_at, one), zero, p_at))
        acc = ad.add_tangents(acc, lax.mul(x, scatter_add_p.bind(
            _zeros_like(x), i, lax.mul(t_y, w), **kw)))
    return acc


def _scatter_mul_transpose(ct, operand, indices, updates, **params):
    if ad.is_undefined(updates):
        raise errors.FuncgradInternalError("scatter_mul is not linear in its updates")
    return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]


scatter_mul_p = _scatter_prim("scatter-mul", np.multiply)
ad.jvp_rules[scatter_mul_p] = _scatter_mul_jvp
ad.transpose_rules[scatter_mul_p] = _scatter_mul_transpose


# --- scatter_min / scatter_max --------------------------------------------------------------------
def scatter_min(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with the elementwise minimum of `updates` taken at the addressed windows.

    Example:
        >>> dn = ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter_min(fnp.zeros(2), fnp.array([[1]]), fnp.array([-1.]), dn)
        Array([ 0., -1.], dtype=float32)
    """
    return _scatter_bind(scatter_min_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_max(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with the elementwise maximum of `updates` taken at the addressed windows.

    Example:
        >>> dn = ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter_max(fnp.zeros(2), fnp.array([[1]]), fnp.array([5.]), dn)
        Array([0., 5.], dtype=float32)
    """
    return _scatter_bind(scatter_max_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_extremal_jvp(primals, out, tangents, *, dimension_numbers, mode, **params):
    # The tangent at a position is the average of the tangents of all contenders (the
    # operand element and the updates) that attain the result there.
    x, i, y = primals
    t_x, _, t_y = (ad.instantiate(t) for t in tangents)
    kw = dict(dimension_numbers=dimension_numbers, mode=mode, **params)
    zero_y, one_y = lax.full_like(y, 0), lax.full_like(y, 1)
    zero_x, one_x = lax.full_like(x, 0), lax.full_like(x, 1)
    g = _inverse_gather(dimension_numbers, mode, get_aval(x).shape, get_aval(y).shape)
    in_bounds = g(one_x, i)
    won_y = lax.mul(lax.select_n(lax.eq(y, g(out, i)), zero_y, one_y), in_bounds)
    kept_x = lax.select_n(lax.eq(x, out), zero_x, one_x)
    count = lax.add(kept_x, scatter_add_p.bind(zero_x, i, won_y, **kw))
    total = lax.add(lax.mul(t_x, kept_x), scatter_add_p.bind(zero_x, i, lax.mul(t_y, won_y), **kw))
    return lax.div(total, lax.max(count, one_x))


scatter_min_p = _scatter_prim("scatter-min", np.minimum)
ad.jvp_rules[scatter_min_p] = _scatter_extremal_jvp

scatter_max_p = _scatter_prim("scatter-max", np.maximum)
ad.jvp_rules[scatter_max_p] = _scatter_extremal_jvp
