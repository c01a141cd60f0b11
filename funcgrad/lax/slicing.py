"""Slicing primitives: pad, concatenate, slice, dynamic_slice, dynamic_update_slice, and the
wrappers `slice_in_dim`, `dynamic_slice_in_dim`, `dynamic_update_slice_in_dim`.

Dynamic start indices are scalar integer operands, clamped as in XLA so that the window
stays in bounds; the wrappers first wrap negative indices (JAX's default). With batched
start indices the batching rules use `lax.indexing.gather` / `scatter`.
"""

import builtins

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ArrayBase, Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.lax.shape import broadcast_in_dim, canonicalize_axis, full, iota, reshape
from funcgrad.lax.utils import match_scalars, static_int, static_ints


def _aval(x):
    return x.aval if ad.is_undefined(x) else get_aval(x)


# --- pad --------------------------------------------------------------------------------------
def pad(operand, padding_value, padding_config):
    """Pad `operand` with the scalar `padding_value`.

    Args:
        operand: the array to pad.
        padding_value: a scalar of the operand's dtype (Python scalars are converted).
        padding_config: one `(low, high, interior)` per axis; `low`/`high` may be negative
            (they then remove elements), `interior` (between elements) must be >= 0.

    Example:
        >>> pad(fnp.array([1., 2.]), 0., [(1, -1, 1)])
        Array([0., 1., 0.], dtype=float32)
    """
    operand, padding_value = match_scalars(operand, padding_value)
    config = tuple(static_ints("pad", c, "each padding_config entry (low, high, interior)")
                   for c in (padding_config if isinstance(padding_config, (tuple, list, np.ndarray))
                             else static_ints("pad", padding_config, "padding_config")))
    if any(len(c) != 3 for c in config):
        raise errors.op_error("pad", f"padding_config needs one (low, high, interior) triple "
                              f"per axis, got {config}", cls=errors.FuncgradValueError)
    return pad_p.bind(operand, padding_value, padding_config=config)


def _dilated(n, interior):
    return 0 if n == 0 else n + (n - 1) * interior


def _pad_abstract(x, pv, *, padding_config):
    if pv.shape != () or pv.dtype != x.dtype:
        raise errors.op_error("pad", f"padding_value must be a scalar with the dtype of the "
                              f"operand {x}, got {pv}")
    if len(padding_config) != x.ndim or any(i < 0 for _, _, i in padding_config):
        raise errors.op_error("pad", f"padding_config {padding_config} must have one "
                              f"(low, high, interior >= 0) per axis of operand {x}")
    shape = tuple(lo + hi + _dilated(n, i) for (lo, hi, i), n in zip(padding_config, x.shape))
    if any(s < 0 for s in shape):
        raise errors.op_error("pad", f"padding_config {padding_config} gives a negative size "
                              f"{shape} for operand {x}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _pad_impl(x, pv, *, padding_config):
    grown = [(max(lo, 0), max(hi, 0), i) for lo, hi, i in padding_config]
    out = np.full([lo + hi + _dilated(n, i) for (lo, hi, i), n in zip(grown, x.shape)], pv,
                  x.dtype)
    out[tuple(builtins.slice(lo, lo + _dilated(n, i), i + 1)
              for (lo, _, i), n in zip(grown, x.shape))] = x
    return out[tuple(builtins.slice(-min(lo, 0), s + min(hi, 0))
                     for (lo, hi, _), s in zip(padding_config, out.shape))]


def _pad_transpose(ct, x, pv, *, padding_config):
    from funcgrad import lax

    def ct_operand():  # undo the low/high padding, then drop the interior padding
        unpadded = pad(ct, 0, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
        return slice(unpadded, (0,) * len(padding_config), get_aval(unpadded).shape,
                     tuple(i + 1 for _, _, i in padding_config))
    ct_x = ct_operand() if ad.is_undefined(x) else None
    if not ad.is_undefined(pv):
        return [ct_x, None]
    ct_rest = ct_operand() if ct_x is None else ct_x
    total = lambda v: lax.reduce_sum(v, tuple(range(get_aval(v).ndim)))
    return [ct_x, lax.sub(total(ct), total(ct_rest))]


def _pad_batch(args, dims, *, padding_config):
    from funcgrad import lax
    (x, pv), (dx, dpv) = args, dims
    size = batching.batch_size(args, dims)
    config = ((0, 0, 0),) + padding_config
    x = batching.bdim_at_front(x, dx, size)
    if dpv is batching.not_mapped:
        return pad(x, pv, config), 0
    padded = pad(x, 0, config)  # a batched padding value: select it where padding was added
    mask = pad(full(get_aval(x).shape, True), False, config)
    pvs = broadcast_in_dim(pv, get_aval(padded).shape, (0,))
    return lax.select_n(mask, pvs, padded), 0


pad_p = Primitive("pad")
pad_p.def_impl(_pad_impl)
pad_p.def_abstract_eval(_pad_abstract)
ad.deflinear(pad_p, _pad_transpose)
batching.batch_rules[pad_p] = _pad_batch


# --- concatenate ------------------------------------------------------------------------------
def concatenate(operands, dimension):
    """Join arrays of equal dtype and equal shapes (except along `dimension`).

    Example:
        >>> concatenate([fnp.ones(2), fnp.zeros(1)], 0)
        Array([1., 1., 0.], dtype=float32)
    """
    operands = list(operands)
    if len(operands) == 1 and isinstance(operands[0], ArrayBase):
        return operands[0]
    return concatenate_p.bind(*operands, dimension=static_int("concatenate", dimension,
                                                              "dimension"))


def _concatenate_abstract(*xs, dimension):
    desc = ", ".join(map(str, xs))
    if not xs:
        raise errors.op_error("concatenate", "needs at least one operand")
    if any(x.dtype != xs[0].dtype for x in xs):
        raise errors.op_error("concatenate", f"operands must have the same dtype, got {desc}")
    if not 0 <= dimension < xs[0].ndim:
        raise errors.op_error("concatenate", f"dimension {dimension} is out of range for "
                              f"operands {desc}", cls=errors.FuncgradValueError)
    rest = lambda x: x.shape[:dimension] + x.shape[dimension + 1:]
    if any(x.ndim != xs[0].ndim or rest(x) != rest(xs[0]) for x in xs):
        raise errors.op_error("concatenate", f"operands must have equal shapes except along "
                              f"dimension {dimension}, got {desc}")
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), xs[0].dtype, all(x.weak_type for x in xs))


def _concatenate_transpose(ct, *xs, dimension):
    cts, start = [], 0
    for x in xs:
        n = _aval(x).shape[dimension]
        cts.append(slice_in_dim(ct, start, start + n, axis=dimension)
                   if ad.is_undefined(x) else None)
        start += n
    return cts


def _concatenate_batch(args, dims, *, dimension):
    size = batching.batch_size(args, dims)
    xs = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
    return concatenate(xs, dimension + 1), 0


concatenate_p = Primitive("concatenate")
concatenate_p.def_impl(lambda *xs, dimension: np.concatenate(xs, axis=dimension))
concatenate_p.def_abstract_eval(_concatenate_abstract)
ad.deflinear(concatenate_p, _concatenate_transpose)
batching.batch_rules[concatenate_p] = _concatenate_batch


# --- slice ------------------------------------------------------------------------------------
def slice(operand, start_indices, limit_indices, strides=None):
    """`operand[start:limit:stride]` along every axis (static, in-bounds, non-negative).

    Example:
        >>> slice(fnp.arange(6), (1,), (6,), (2,))
        Array([1, 3, 5], dtype=int32)
    """
    return slice_p.bind(operand, start_indices=static_ints("slice", start_indices,
                                                           "start_indices"),
                        limit_indices=static_ints("slice", limit_indices, "limit_indices"),
                        strides=None if strides is None else static_ints("slice", strides,
                                                                         "strides"))


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """`slice` along one `axis`; None and negative indices count as in Python slicing."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis("slice_in_dim", axis, len(shape))
    n = shape[axis]
    start = 0 if start_index is None else static_int("slice_in_dim", start_index, "start_index")
    limit = n if limit_index is None else static_int("slice_in_dim", limit_index, "limit_index")
    start, limit = start + (n if start < 0 else 0), limit + (n if limit < 0 else 0)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis] = start, limit
    strides[axis] = static_int("slice_in_dim", stride, "stride")
    return slice(operand, starts, limits, strides)


def _slice_abstract(x, *, start_indices, limit_indices, strides):
    st = strides or (1,) * x.ndim
    ok = len(start_indices) == len(limit_indices) == len(st) == x.ndim and all(
        0 <= s <= lim <= n and k >= 1
        for s, lim, k, n in zip(start_indices, limit_indices, st, x.shape))
    if not ok:
        raise errors.op_error("slice", f"start_indices={start_indices}, limit_indices="
                              f"{limit_indices}, strides={strides} are invalid for operand "
                              f"{x}", hint="need 0 <= start <= limit <= size and stride >= 1 "
                                           "on every axis")
    shape = tuple(-(-(lim - s) // k) for s, lim, k in zip(start_indices, limit_indices, st))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    st = strides or (1,) * x.ndim
    return x[tuple(builtins.slice(*t) for t in zip(start_indices, limit_indices, st))]


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    shape, out = x.aval.shape, get_aval(ct).shape
    st = strides or (1,) * len(shape)
    # the last element taken on each axis is start + (out - 1) * stride
    real_limits = [s + (0 if m == 0 else (m - 1) * k + 1)
                   for s, m, k in zip(start_indices, out, st)]
    config = [(s, n - lim, k - 1) for s, n, lim, k in zip(start_indices, shape, real_limits, st)]
    return [pad(ct, 0, config)]


def _slice_batch(args, dims, *, start_indices, limit_indices, strides):
    x, d = args[0], dims[0]
    n = get_aval(x).shape[d]
    ins = lambda t, v: t[:d] + (v,) + t[d:]
    return slice(x, ins(start_indices, 0), ins(limit_indices, n),
                 None if strides is None else ins(strides, 1)), d


slice_p = Primitive("slice")
slice_p.def_impl(_slice_impl)
slice_p.def_abstract_eval(_slice_abstract)
ad.deflinear(slice_p, _slice_transpose)
batching.batch_rules[slice_p] = _slice_batch


# --- dynamic start indices (shared by dynamic_slice and dynamic_update_slice) -----------------
def _wrap_negative(name, x, start_indices, allow_negative_indices):
    from funcgrad import lax
    shape = get_aval(x).shape
    if len(start_indices) != len(shape):
        raise errors.op_error(name, f"got {len(start_indices)} start indices for operand "
                              f"{get_aval(x)}; it needs one per axis")
    allow = (allow_negative_indices if isinstance(allow_negative_indices, (tuple, list))
             else [allow_negative_indices] * len(shape))
    out = []
    for i, n, a in zip(start_indices, shape, allow):
        if isinstance(i, (int, np.integer)):
            out.append(int(i) + n if a and i < 0 else int(i))
        elif a:
            negative = lax.convert_element_type(lax.gt(0, i), get_aval(i).dtype)
            out.append(lax.add(i, lax.mul(negative, n)))
        else:
            out.append(i)
    return out


def _check_indices(name, x, idx):
    if len(idx) != x.ndim or any(i.shape != () or dtypes.kind(i.dtype) not in "iu" for i in idx):
        raise errors.op_error(name, f"start indices must be {x.ndim} scalar integers (one "
                              f"per axis of operand {x}), got {', '.join(map(str, idx))}")


def _clamped_starts(idx, shape, sizes):
    return [int(np.clip(int(i), 0, n - k)) for i, n, k in zip(idx, shape, sizes)]


def _window(starts, sizes):
    return tuple(builtins.slice(s, s + k) for s, k in zip(starts, sizes))


def _batched_starts(idx, dims, size, shape, sizes, batch_column=True):
    """int32[size, ndim] gather/scatter indices: each start index clamped as XLA does (so
    every gather/scatter mode agrees), after a column of batch positions if asked."""
    from funcgrad import lax
    cols = [iota(dtypes.int32, size)] if batch_column else []
    for i, d, n, k in zip(idx, dims, shape, sizes):
        i = batching.bdim_at_front(i, d, size)
        if get_aval(i).dtype != dtypes.int32:
            i = lax.convert_element_type(i, dtypes.int32)
        cols.append(lax.clamp(np.int32(0), i, np.int32(n - k)))
    return concatenate([reshape(c, (size, 1)) for c in cols], 1)


# --- dynamic_slice ----------------------------------------------------------------------------
def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """A `slice_sizes` window of `operand` at traced `start_indices` (clamped in bounds).

    Negative start indices count from the end unless `allow_negative_indices=False`.

    Example:
        >>> dynamic_slice(fnp.arange(5), (4,), (3,))
        Array([2, 3, 4], dtype=int32)
    """
    idx = _wrap_negative("dynamic_slice", operand, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=static_ints(
        "dynamic_slice", slice_sizes, "slice_sizes"))


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    """`dynamic_slice` along one `axis` (start 0 and full size on the others)."""
    shape = get_aval(operand).shape
    axis = canonicalize_axis("dynamic_slice_in_dim", axis, len(shape))
    starts, sizes = [0] * len(shape), list(shape)
    starts[axis] = start_index
    sizes[axis] = static_int("dynamic_slice_in_dim", slice_size, "slice_size")
    return dynamic_slice(operand, starts, sizes,
                         allow_negative_indices=allow_negative_indices)


def _dynamic_slice_abstract(x, *idx, slice_sizes):
    _check_indices("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim or any(not 0 <= k <= n for k, n in zip(slice_sizes, x.shape)):
        raise errors.op_error("dynamic_slice", f"slice_sizes {slice_sizes} must have one size "
                              f"in [0, dim] per axis of operand {x}")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


def _dynamic_slice_impl(x, *idx, slice_sizes):
    return x[_window(_clamped_starts(idx, x.shape, slice_sizes), slice_sizes)]


def _dynamic_slice_jvp(primals, out, tangents, *, slice_sizes):
    if type(tangents[0]) is ad.Zero:
        return ad.Zero(get_aval(out))
    return dynamic_slice_p.bind(tangents[0], *primals[1:], slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    zeros = full(x.aval.shape, 0, x.aval.dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *idx)] + [None] * len(idx)


def _dynamic_slice_batch(args, dims, *, slice_sizes):
    size = batching.batch_size(args, dims)
    (x, *idx), (dx, *idims) = args, dims
    if all(d is batching.not_mapped for d in idims):
        x = batching.moveaxis(x, dx, 0)
        return dynamic_slice_p.bind(x, 0, *idx, slice_sizes=(size,) + slice_sizes), 0
    from funcgrad.lax.indexing import GatherDimensionNumbers, gather
    nd, mapped = len(slice_sizes), dx is not batching.not_mapped
    if mapped:  # the batch axis of the operand is addressed by an iota index column
        x = batching.moveaxis(x, dx, 0)
    starts = _batched_starts(idx, idims, size, get_aval(x).shape[mapped:], slice_sizes, mapped)
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, nd + 1)),
                                   collapsed_slice_dims=(0,) if mapped else (),
                                   start_index_map=tuple(range(nd + mapped)))
    return gather(x, starts, dnums, (1,) * mapped + slice_sizes, indices_are_sorted=mapped,
                  unique_indices=mapped, mode="clip"), 0


dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.def_impl(_dynamic_slice_impl)
dynamic_slice_p.def_abstract_eval(_dynamic_slice_abstract)
ad.jvp_rules[dynamic_slice_p] = _dynamic_slice_jvp
ad.transpose_rules[dynamic_slice_p] = _dynamic_slice_transpose
batching.batch_rules[dynamic_slice_p] = _dynamic_slice_batch


# --- dynamic_update_slice ---------------------------------------------------------------------
def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """`operand` with the window at traced `start_indices` (clamped) replaced by `update`.

    Example:
        >>> dynamic_update_slice(fnp.zeros(4), fnp.ones(2), (3,))
        Array([0., 0., 1., 1.], dtype=float32)
    """
    idx = _wrap_negative("dynamic_update_slice", operand, start_indices,
                         allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *idx)


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices=True):
    """`dynamic_update_slice` along one `axis` (start 0 on the others)."""
    nd = get_aval(operand).ndim
    axis = canonicalize_axis("dynamic_update_slice_in_dim", axis, nd)
    starts = [0] * nd
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts,
                                allow_negative_indices=allow_negative_indices)


def _dynamic_update_slice_abstract(x, u, *idx):
    _check_indices("dynamic_update_slice", x, idx)
    if u.dtype != x.dtype or u.ndim != x.ndim or any(k > n for k, n in zip(u.shape, x.shape)):
        raise errors.op_error("dynamic_update_slice", f"update {u} must have the dtype and "
                              f"rank of operand {x} and fit inside it")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _dynamic_update_slice_impl(x, u, *idx):
    out = x.copy()
    out[_window(_clamped_starts(idx, x.shape, u.shape), u.shape)] = u
    return out


def _dynamic_update_slice_jvp(primals, out, tangents):
    tx, tu = tangents[:2]
    if type(tx) is ad.Zero and type(tu) is ad.Zero:
        return ad.Zero(get_aval(out))
    return dynamic_update_slice_p.bind(ad.instantiate(tx), ad.instantiate(tu), *primals[2:])


def _dynamic_update_slice_transpose(ct, x, u, *idx):
    shape = _aval(u).shape
    ct_x = (dynamic_update_slice_p.bind(ct, full(shape, 0, get_aval(ct).dtype), *idx)
            if ad.is_undefined(x) else None)
    ct_u = (dynamic_slice_p.bind(ct, *idx, slice_sizes=shape) if ad.is_undefined(u) else None)
    return [ct_x, ct_u] + [None] * len(idx)


def _dynamic_update_slice_batch(args, dims):
    size = batching.batch_size(args, dims)
    x, u = (batching.bdim_at_front(a, d, size) for a, d in zip(args[:2], dims[:2]))
    idx, idims = args[2:], dims[2:]
    if all(d is batching.not_mapped for d in idims):
        return dynamic_update_slice_p.bind(x, u, 0, *idx), 0
    from funcgrad.lax.indexing import ScatterDimensionNumbers, scatter
    nd = len(idx)
    starts = _batched_starts(idx, idims, size, get_aval(x).shape[1:], get_aval(u).shape[1:])
    dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(1, nd + 1)),
                                    inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=tuple(range(nd + 1)))
    return scatter(x, starts, u, dnums, indices_are_sorted=True, unique_indices=True,
                   mode="clip"), 0


dynamic_update_slice_p = Primitive("dynamic_update_slice")
dynamic_update_slice_p.def_impl(_dynamic_update_slice_impl)
dynamic_update_slice_p.def_abstract_eval(_dynamic_update_slice_abstract)
ad.jvp_rules[dynamic_update_slice_p] = _dynamic_update_slice_jvp
ad.transpose_rules[dynamic_update_slice_p] = _dynamic_update_slice_transpose
batching.batch_rules[dynamic_update_slice_p] = _dynamic_update_slice_batch


__all__ = [
    "concatenate", "concatenate_p", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_slice_p", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "dynamic_update_slice_p", "pad", "pad_p", "slice", "slice_in_dim", "slice_p",
]
