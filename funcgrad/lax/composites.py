"""JAX's lax conveniences built from other lax operations: `select`, `broadcast`,
`broadcast_shapes`, `broadcast_to_rank`, `broadcast_like`, `collapse`, `index_in_dim`,
`dynamic_index_in_dim`, `dynamic_update_index_in_dim`, `index_take`, `split`, `tile`, `stack`,
`unstack`, `empty`, `dtype`, `shape_as_value`, `scatter_sub`, `scatter_apply`.

They define no primitive: their derivatives and batching rules are those of the operations
they are made of. Imports only lax siblings, core and the base modules.
"""

import math

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import ArrayBase, concrete_value, get_aval, to_array
from funcgrad.lax.control_flow import fori_loop
from funcgrad.lax.elementwise import add, neg, rem
from funcgrad.lax.indexing import (
    GatherDimensionNumbers,
    gather,
    scatter_add,
)
from funcgrad.lax.logic import lt, select_n
from funcgrad.lax.shape import (
    broadcast_in_dim,
    canonicalize_axis,
    full,
    reshape,
)
from funcgrad.lax.slicing import (
    concatenate,
    dynamic_slice_in_dim,
    dynamic_update_slice_in_dim,
    slice_in_dim,
)
from funcgrad.lax.utils import static_int, static_ints

__all__ = [
    "broadcast", "broadcast_like", "broadcast_shapes", "broadcast_to_rank", "collapse", "dtype",
    "dynamic_index_in_dim", "dynamic_update_index_in_dim", "empty", "index_in_dim",
    "index_take", "scatter_apply", "scatter_sub", "select",
    "shape_as_value", "split", "stack", "tile", "unstack",
]


def _operand(x):
    return x if isinstance(x, ArrayBase) else to_array(x)


def select(pred, on_true, on_false):
    """Elementwise `on_true` where `pred` else `on_false` (all one shape, or a scalar `pred`).

    Example:
        >>> select(fnp.array([True, False]), fnp.ones(2), fnp.zeros(2))
        Array([1., 0.], dtype=float32)
    """
    return select_n(pred, on_false, on_true)


def broadcast(operand, sizes, *, out_sharding=None):
    """`operand` with new leading axes of `sizes`.

    Example:
        >>> broadcast(fnp.ones(3), (2,)).shape
        (2, 3)
    """
    operand = _operand(operand)
    sizes = static_ints("broadcast", sizes, "sizes")
    nd = get_aval(operand).ndim
    dims = tuple(range(len(sizes), len(sizes) + nd))
    return broadcast_in_dim(operand, sizes + get_aval(operand).shape, dims,
                            out_sharding=out_sharding)


def broadcast_shapes(*shapes):
    """The shape `shapes` broadcast to (NumPy's rules: trailing axes aligned).

    Example:
        >>> broadcast_shapes((2, 1), (3,))
        (2, 3)
    """
    shapes = [static_ints("broadcast_shapes", s, "each shape") for s in shapes]
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-nd, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(sizes) > 1:
            raise errors.op_error("broadcast_shapes", "incompatible shapes for broadcasting: "
                                  + ", ".join(str(s) for s in shapes),
                                  cls=errors.FuncgradValueError)
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to_rank(x, rank):
    """`x` with leading axes of size 1 added to give it rank `rank`.

    Example:
        >>> broadcast_to_rank(fnp.ones(3), 2).shape
        (1, 3)
    """
    x = _operand(x)
    nd = get_aval(x).ndim
    rank = static_int("broadcast_to_rank", rank, "rank")
    return x if nd == rank else broadcast(x, (1,) * (rank - nd))


def broadcast_like(arr, like_arr):
    """`arr` broadcast (trailing axes aligned) to the shape of `like_arr`.

    Example:
        >>> broadcast_like(fnp.ones(3), fnp.zeros((2, 3))).shape
        (2, 3)
    """
    arr, shape = _operand(arr), get_aval(_operand(like_arr)).shape
    nd = get_aval(arr).ndim
    return broadcast_in_dim(arr, shape, tuple(range(len(shape) - nd, len(shape))))


def collapse(operand, start_dimension, stop_dimension=None):
    """`operand` with axes `[start_dimension, stop_dimension)` merged into one (row-major).

    Example:
        >>> collapse(fnp.ones((2, 3, 4)), 0, 2).shape
        (6, 4)
    """
    shape = get_aval(_operand(operand)).shape
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise errors.op_error("collapse", f"invalid dimension range [{start_dimension}:"
                              f"{stop_dimension}] for shape {shape}",
                              cls=errors.FuncgradValueError)
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def index_in_dim(operand, index, axis=0, keepdims=True):
    """`operand[..., index]` along `axis` for a static `index` (negative counts from the end).

    Example:
        >>> index_in_dim(fnp.arange(4), 2, keepdims=False)
        Array(2, dtype=int32)
    """
    operand = _operand(operand)
    shape = get_aval(operand).shape
    axis = canonicalize_axis("index_in_dim", axis, len(shape))
    index = static_int("index_in_dim", index, "index")
    i = index + shape[axis] if index < 0 else index
    if not 0 <= i < shape[axis]:
        raise errors.op_error("index_in_dim", f"index {index} is out of bounds for axis {axis} "
                              f"of size {shape[axis]}", cls=errors.FuncgradIndexError)
    out = slice_in_dim(operand, i, i + 1, 1, axis)
    return out if keepdims else reshape(out, shape[:axis] + shape[axis + 1:])


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *, allow_negative_indices=True):
    """`operand[..., index]` along `axis` for a (possibly traced) scalar `index`, clamped
    into range as `dynamic_slice` does.

    Example:
        >>> dynamic_index_in_dim(fnp.arange(4.0), fnp.array(-1), keepdims=False)
        Array(3., dtype=float32)
    """
    operand = _operand(operand)
    shape = get_aval(operand).shape
    axis = canonicalize_axis("dynamic_index_in_dim", axis, len(shape))
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    return out if keepdims else reshape(out, shape[:axis] + shape[axis + 1:])


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    """`operand` with the slice at `index` along `axis` replaced by `update` (which may lack
    that axis).

    Example:
        >>> dynamic_update_index_in_dim(fnp.zeros(3), fnp.array(5.0), 1, 0)
        Array([0., 5., 0.], dtype=float32)
    """
    operand, update = _operand(operand), _operand(update)
    nd = get_aval(operand).ndim
    axis = canonicalize_axis("dynamic_update_index_in_dim", axis, nd)
    ushape = get_aval(update).shape
    if len(ushape) == nd - 1:
        update = reshape(update, ushape[:axis] + (1,) + ushape[axis:])
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


def index_take(src, idxs, axes):
    """`src` gathered at the index arrays `idxs` (one per axis of `axes`, wrapped modulo the
    axis size); the other axes are kept whole.

    Example:
        >>> x = fnp.arange(12).reshape(3, 4)
        >>> index_take(x, (fnp.array([0, 2]), fnp.array([1, 5])), (0, 1))
        Array([1, 9], dtype=int32)
    """
    src = _operand(src)
    shape = get_aval(src).shape
    axes = static_ints("index_take", axes, "axes")
    idxs = [_operand(i) for i in idxs]
    n = get_aval(idxs[0]).ndim
    cols = [reshape(i, get_aval(i).shape + (1,)) for i in idxs]
    indices = concatenate(cols, n) if len(cols) > 1 else cols[0]
    ia = get_aval(indices)
    sizes = broadcast_in_dim(to_array(np.asarray([shape[a] for a in axes], ia.dtype)),
                             ia.shape, (n,))
    r = rem(indices, sizes)  # wrapped modulo the sizes (non-negative), as JAX
    indices = select_n(lt(r, full(ia.shape, 0, ia.dtype)), r, add(r, sizes))
    slice_sizes = tuple(1 if i in axes else s for i, s in enumerate(shape))
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(n, n + len(shape) - len(axes))),
                                   collapsed_slice_dims=tuple(axes), start_index_map=tuple(axes))
    return gather(src, indices, dnums, slice_sizes)


def split(operand, sizes, axis=0):
    """`operand` cut along `axis` into consecutive pieces of `sizes` (which sum to its size).

    Example:
        >>> [p.shape for p in split(fnp.ones(5), (2, 3))]
        [(2,), (3,)]
    """
    operand = _operand(operand)
    shape = get_aval(operand).shape
    axis = canonicalize_axis("split", axis, len(shape))
    sizes = static_ints("split", sizes, "sizes")
    if sum(sizes) != shape[axis] or any(s < 0 for s in sizes):
        raise errors.op_error("split", f"sizes {sizes} must be non-negative and sum to the size "
                              f"{shape[axis]} of axis {axis} of {get_aval(operand)}",
                              cls=errors.FuncgradValueError)
    starts = np.cumsum((0,) + sizes)
    return [slice_in_dim(operand, int(a), int(b), 1, axis) for a, b in zip(starts, starts[1:])]


def tile(operand, reps):
    """`operand` repeated `reps[i]` times along each axis i (one entry per axis).

    Example:
        >>> tile(fnp.array([1, 2]), (2,))
        Array([1, 2, 1, 2], dtype=int32)
    """
    operand = _operand(operand)
    shape = get_aval(operand).shape
    reps = static_ints("tile", reps, "reps")
    if len(reps) != len(shape) or any(r < 0 for r in reps):
        raise errors.op_error("tile", f"reps {reps} must have one non-negative entry per axis "
                              f"of {get_aval(operand)}", cls=errors.FuncgradValueError)
    # (r0, s0, r1, s1, ...) broadcast, then merged pairwise
    big = broadcast_in_dim(operand, tuple(v for r, s in zip(reps, shape) for v in (r, s)),
                           tuple(range(1, 2 * len(shape), 2)))
    return reshape(big, tuple(r * s for r, s in zip(reps, shape)))


def stack(operands, axis=0):
    """The arrays `operands` (one shape) joined along a new `axis`.

    Example:
        >>> stack([fnp.ones(2), fnp.zeros(2)], axis=1).shape
        (2, 2)
    """
    ops = [_operand(x) for x in operands]
    if not ops:
        raise errors.op_error("stack", "needs at least one array", cls=errors.FuncgradValueError)
    shape = get_aval(ops[0]).shape
    axis = canonicalize_axis("stack", axis, len(shape) + 1)
    new = shape[:axis] + (1,) + shape[axis:]
    return concatenate([reshape(x, new) for x in ops], axis)


def unstack(x, axis=0):
    """The slices of `x` along `axis`, as a tuple.

    Example:
        >>> [p.shape for p in unstack(fnp.ones((2, 3)), axis=1)]
        [(2,), (2,), (2,)]
    """
    x = _operand(x)
    shape = get_aval(x).shape
    axis = canonicalize_axis("unstack", axis, len(shape))
    rest = shape[:axis] + shape[axis + 1:]
    return tuple(reshape(slice_in_dim(x, i, i + 1, 1, axis), rest) for i in range(shape[axis]))


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` whose values are unspecified (funcgrad: zeros).

    Example:
        >>> empty((2,), fnp.float32).shape
        (2,)
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return full(static_ints("empty", shape, "shape"), 0, dtype, sharding=out_sharding)


def dtype(x):
    """The canonical dtype of `x` (64-bit narrowed unless x64), Python scalars included.

    Example:
        >>> dtype(1.0)
        dtype('float32')
    """
    if isinstance(x, ArrayBase):
        return get_aval(x).dtype
    if type(x) in (bool, int, float, complex):
        return dtypes.scalar_dtype(x)[0]
    try:
        return dtypes.canonicalize(np.result_type(x))
    except Exception as e:  # noqa: BLE001  (NumPy's refusal, reported as funcgrad's)
        raise errors.op_error("dtype", f"cannot take the dtype of {errors.short_repr(x)}",
                              cls=errors.FuncgradTypeError) from e


def shape_as_value(shape):
    """`shape` as a NumPy int32 vector (JAX's symbolic shapes do not exist here).

    Example:
        >>> shape_as_value((2, 3))
        array([2, 3], dtype=int32)
    """
    return np.asarray(static_ints("shape_as_value", shape, "shape"), np.int32)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with `updates` subtracted at the windows addressed by `scatter_indices`
    (repeats accumulate), as `scatter_add` of the negated updates.

    Example:
        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter_sub(fnp.zeros(2), fnp.array([[1], [1]]), fnp.array([1., 2.]), dn)
        Array([ 0., -3.], dtype=float32)
    """
    return scatter_add(operand, scatter_indices, neg(_operand(updates)), dimension_numbers,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with the elementwise function `func` applied at the windows addressed by
    `scatter_indices` (`update_shape`: the shape the updates of such a scatter would have),
    once per index vector: an element addressed k times gets `func` applied k times, as in
    JAX.

    The passes of `func` over the operand are as many as the largest repeat count when the
    indices are concrete (one with `unique_indices=True`), else the number of index vectors.

    Example:
        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> scatter_apply(fnp.ones(3), fnp.array([[2], [2]]), lambda v: v * 5, dn,
        ...               update_shape=(2,))
        Array([ 1.,  1., 25.], dtype=float32)
    """
    operand = _operand(operand)
    aval = get_aval(operand)
    counts = scatter_add(full(aval.shape, 0, np.dtype(np.int32)), scatter_indices,
                         full(tuple(update_shape), 1, np.dtype(np.int32)), dimension_numbers,
                         indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                         mode=mode)
    known = concrete_value(counts)
    if unique_indices:
        passes = 1
    elif known is not None:
        passes = int(np.max(np.asarray(known), initial=0))
    else:
        idx_shape = get_aval(_operand(scatter_indices)).shape
        passes = math.prod(idx_shape[:-1]) if idx_shape else 1

    def body(j, x):
        return select_n(lt(full(aval.shape, j, np.dtype(np.int32)), counts), x, func(x))
    if passes == 1:
        return body(0, operand)
    return fori_loop(0, passes, body, operand)
