"""Sorting: the multi-operand `sort` primitive (sort several arrays by the first `num_keys`),
`sort_key_val`, `top_k` and `approx_max_k`/`approx_min_k` (exact, as XLA's CPU fallback).
NaNs sort last, as in NumPy.

Derivatives gather the tangents with the sorting permutation, which the rules obtain by
sorting an iota along with the operands. This module imports only the core, the
interpreters and other `funcgrad.lax` wrappers.
"""

import numpy as np

from funcgrad import errors, lax
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching
from funcgrad.lax.indexing import GatherDimensionNumbers, gather
from funcgrad.lax.shape import canonicalize_axis, transpose

__all__ = ["approx_max_k", "approx_min_k", "sort", "sort_key_val", "sort_p", "top_k",
           "top_k_p"]


def _take_along_axis(x, idx, axis):
    """numpy's take_along_axis as a gather: `idx` has x's shape except along `axis`."""
    shape = get_aval(idx).shape
    nd = len(shape)
    col = shape + (1,)
    parts = [lax.reshape(idx, col) if d == axis else lax.broadcasted_iota(
        get_aval(idx).dtype, col, d) for d in range(nd)]
    indices = parts[0] if nd == 1 else lax.concatenate(parts, nd)
    dn = GatherDimensionNumbers((), tuple(range(nd)), tuple(range(nd)))
    return gather(x, indices, dn, (1,) * nd, indices_are_sorted=False, unique_indices=False)


# --- sort -------------------------------------------------------------------------------------
def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort along `dimension`; a tuple of operands is sorted by its first `num_keys` arrays.

    Args:
        operand: an array or a sequence of same-shape arrays.
        dimension: the axis to sort along.
        is_stable: accepted for JAX compatibility (the sort is always stable).
        num_keys: how many leading operands form the (lexicographic) sort key.

    Returns:
        The sorted array, or a tuple of sorted arrays for a sequence operand.

    Example:
        >>> sort((fnp.array([3, 1, 2]), fnp.array([0., 1., 2.])))
        (Array([1, 2, 3], dtype=int32), Array([1., 2., 0.], dtype=float32))
    """
    ops = tuple(operand) if isinstance(operand, (tuple, list)) else (operand,)
    if not ops:
        raise errors.op_error("sort", "needs at least one operand",
                              cls=errors.FuncgradValueError)
    ndim = get_aval(ops[0]).ndim
    if not -ndim <= dimension < ndim:
        raise errors.op_error("sort", f"dimension {dimension} is out of range for operand "
                              f"{get_aval(ops[0])}", cls=errors.FuncgradValueError)
    out = sort_p.bind(*ops, dimension=int(dimension) % ndim, is_stable=bool(is_stable),
                      num_keys=int(num_keys))
    return tuple(out) if isinstance(operand, (tuple, list)) else out[0]


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """Sort `keys` along `dimension` and permute `values` the same way: `(keys, values)`."""
    return sort((keys, values), dimension, is_stable, num_keys=1)


def _sort_abstract(*operands, dimension, is_stable, num_keys):
    shape = operands[0].shape
    if any(o.shape != shape for o in operands):
        raise errors.op_error("sort", "operands must have the same shape, got "
                              f"{', '.join(map(str, operands))}")
    if not 0 <= dimension < len(shape):
        raise errors.op_error("sort", f"dimension {dimension} is out of range for "
                              f"{operands[0]}", cls=errors.FuncgradValueError)
    if not 1 <= num_keys <= len(operands):
        raise errors.op_error("sort", f"num_keys={num_keys} must be between 1 and the number "
                              f"of operands ({len(operands)})", cls=errors.FuncgradValueError)
    return [ShapedArray(o.shape, o.dtype, o.weak_type) for o in operands]


def _sort_impl(*operands, dimension, is_stable, num_keys):
    if num_keys == 1:
        perm = np.argsort(operands[0], axis=dimension, kind="stable")
    else:
        perm = np.lexsort(operands[num_keys - 1::-1], axis=dimension)
    return [np.take_along_axis(o, perm, axis=dimension) for o in operands]


def _sort_jvp(primals, outs, tangents, *, dimension, is_stable, num_keys):
    shape = get_aval(primals[0]).shape
    iota = lax.broadcasted_iota(np.dtype(np.int32), shape, dimension)
    perm = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)[-1]
    return [t if type(t) is ad.Zero else _take_along_axis(t, perm, dimension) for t in tangents]


def _sort_batch(args, dims, *, dimension, **params):
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    args = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
    out = sort_p.bind(*args, dimension=dimension + 1, **params)
    return out, [0] * len(out)


sort_p = Primitive("sort", multiple_results=True)
sort_p.def_impl(_sort_impl)
sort_p.def_abstract_eval(_sort_abstract)
ad.jvp_rules[sort_p] = _sort_jvp
batching.batch_rules[sort_p] = _sort_batch


# --- top_k ------------------------------------------------------------------------------------
def top_k(operand, k, *, axis=-1):
    """The `k` largest entries along `axis` (the last by default), in descending order, and
    their indices.

    Ties keep the lower index first; NaNs count as larger than every number.

    Example:
        >>> top_k(fnp.array([1., 3., 2.]), 2)
        (Array([3., 2.], dtype=float32), Array([1, 2], dtype=int32))
    """
    ndim = get_aval(operand).ndim
    axis = canonicalize_axis("top_k", axis, ndim) if ndim else -1
    if axis in (-1, ndim - 1):
        return tuple(top_k_p.bind(operand, k=int(k)))
    perm = tuple(i for i in range(ndim) if i != axis) + (axis,)
    back = tuple(int(i) for i in np.argsort(perm))
    return tuple(transpose(o, back) for o in top_k_p.bind(transpose(operand, perm), k=int(k)))


def _top_k_abstract(x, *, k):
    if x.ndim < 1 or not 0 <= k <= x.shape[-1]:
        raise errors.op_error("top_k", f"k={k} must be in [0, {x.shape[-1] if x.ndim else 0}] "
                              f"for operand {x} (rank >= 1)", cls=errors.FuncgradValueError)
    shape = x.shape[:-1] + (k,)
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.dtype(np.int32))]


def _top_k_impl(x, *, k):
    n = x.shape[-1]
    # descending and stable: sort the reversed array ascending, then reverse the result
    perm = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    idx = (n - 1 - perm).astype(np.int32)
    return [np.take_along_axis(x, idx, axis=-1), idx]


def _top_k_jvp(primals, outs, tangents, *, k):
    t, idx = tangents[0], outs[1]
    return [_take_along_axis(t, idx, get_aval(t).ndim - 1), ad.Zero(get_aval(idx))]


def _top_k_batch(args, dims, *, k):
    x, d = args[0], dims[0]
    if d == get_aval(x).ndim - 1:
        x, d = batching.moveaxis(x, d, 0), 0
    out = top_k_p.bind(x, k=k)
    return out, [d, d]


top_k_p = Primitive("top_k", multiple_results=True)
top_k_p.def_impl(_top_k_impl)
top_k_p.def_abstract_eval(_top_k_abstract)
ad.jvp_rules[top_k_p] = _top_k_jvp
batching.batch_rules[top_k_p] = _top_k_batch


# --- approx_max_k / approx_min_k: XLA's approximate top-k, exact on the CPU (as XLA's CPU and
# GPU fallback: a sort); only the output size follows the TPU algorithm's ---------------------
_TILING = {1: 1024}  # rank -> XLA's TPU tiling (128 for rank 2 and more)


def _approx_output_size(n, rank, k, recall_target, aggregate_to_topk, override):
    """XLA's ApproxTopKReductionOutputSize: how many candidates the TPU algorithm keeps."""
    if aggregate_to_topk:
        return k
    tiling = _TILING.get(rank, 128)
    if n <= tiling:
        return n
    if 0 <= override < n:
        raise errors.op_error("approx_max_k", f"reduction_input_size_override {override} must "
                              f"be at least the reduced size {n}", cls=errors.FuncgradValueError)
    logical = override if override >= 0 else n
    if k == 1:
        return tiling
    recall = float(np.float32(recall_target))  # XLA takes a C float
    if recall == 1.0:
        return n
    if not 0.0 < recall <= 1.0:
        raise errors.op_error("approx_max_k", f"recall_target must be in (0, 1], got "
                              f"{recall_target}", cls=errors.FuncgradValueError)
    m = min(max(int((1.0 - k) / np.log(recall)), tiling), n)
    log2_reduction = (logical // m).bit_length() - 1 if logical // m else 0
    if log2_reduction <= 0:
        return n
    log2_reduction = min(log2_reduction, ((n // tiling) - 1).bit_length() if n // tiling else 0)
    return _ceil_div(_ceil_div(n, tiling), 1 << log2_reduction) * tiling


def _ceil_div(a, b):
    return -(-a // b)


def _approx_k(name, operand, k, reduction_dimension, recall_target, override, aggregate):
    aval = get_aval(operand)
    if aval.ndim == 0:
        raise errors.op_error(name, f"operand must have at least one axis, got {aval}",
                              cls=errors.FuncgradTypeError)
    if aval.dtype.kind != "f":
        raise errors.op_error(name, f"operand must have a floating dtype, got {aval}",
                              cls=errors.FuncgradValueError)
    axis = canonicalize_axis(name, reduction_dimension, aval.ndim)
    k = int(k)
    if not 0 < k <= aval.shape[axis]:
        raise errors.op_error(name, f"k={k} must be in [1, {aval.shape[axis]}] (the size of "
                              f"reduction_dimension {axis})", cls=errors.FuncgradValueError)
    size = _approx_output_size(aval.shape[axis], aval.ndim, k, recall_target, aggregate,
                               int(override))
    return axis, size


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """`[values, indices]` of the `k` largest entries along `reduction_dimension`, in
    descending order. XLA approximates on TPUs only; here (as on XLA's CPU and GPU) the
    result is exact. With `aggregate_to_topk=False` it keeps as many entries as the TPU
    algorithm would (XLA's output size), again the exact largest ones.

    Example:
        >>> approx_max_k(fnp.array([3.0, 1.0, 4.0, 1.0, 5.0]), 2)[0]
        Array([5., 4.], dtype=float32)
    """
    axis, size = _approx_k("approx_max_k", operand, k, reduction_dimension, recall_target,
                           reduction_input_size_override, aggregate_to_topk)
    return list(top_k(operand, size, axis=axis))


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """`[values, indices]` of the `k` smallest entries along `reduction_dimension`, in
    ascending order (exact; see `approx_max_k`).

    Example:
        >>> approx_min_k(fnp.array([3.0, 1.0, 4.0, 1.0, 5.0]), 2)[1]
        Array([1, 3], dtype=int32)
    """
    axis, size = _approx_k("approx_min_k", operand, k, reduction_dimension, recall_target,
                           reduction_input_size_override, aggregate_to_topk)
    values, indices = top_k(lax.neg(operand), size, axis=axis)
    return [lax.neg(values), indices]
