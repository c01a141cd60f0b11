"""Segment reductions, JAX's `jax.ops`: `segment_sum`, `segment_max`, `segment_min`,
`segment_prod` (re-exported as `funcgrad.ops`, a different thing from the core's
`funcgrad.core.ops` registry).

Each is a scatter of `data` into `num_segments` rows that start at the reduction's identity,
written with `funcgrad.numpy`'s `.at[...]` updates, so derivatives and batching come from the
scatter primitives. Ids outside `[0, num_segments)` are dropped by default (negative ones
too: they are not wrapped); `mode="clip"` clips them. `bucket_size` reduces groups of
`bucket_size` consecutive entries separately and combines the groups' results, as JAX does.
"""

import math

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes, errors
from funcgrad.core import concrete_value, get_aval
from funcgrad.lax.indexing import GatherScatterMode

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op, dtype):
    if op == "add":
        return 0
    if op == "mul":
        return 1
    if dtype == np.bool_:
        return op == "min"
    if dtypes.kind(dtype) in "iu":
        return dtypes.iinfo(dtype).max if op == "min" else dtypes.iinfo(dtype).min
    return np.inf if op == "min" else -np.inf


_REDUCERS = {"add": fnp.sum, "mul": fnp.prod, "min": fnp.min, "max": fnp.max}


def _num_segments(name, segment_ids, num_segments):
    if num_segments is None:
        ids = concrete_value(segment_ids)
        if ids is None:
            raise errors.ConcretizationTypeError(
                f"{name}: num_segments=None needs the values of segment_ids, which are traced "
                f"here ({get_aval(segment_ids)})\n{errors.where(errors.user_frame(3))}\n"
                "  hint: pass num_segments= (a Python int) to use it under jit or vmap.")
        num_segments = int(np.max(ids)) + 1 if ids.size else 0
    try:
        num_segments = int(num_segments)
    except TypeError:
        raise errors.FuncgradTypeError(
            f"{name}: num_segments must be an int, got {errors.short_repr(num_segments)}"
            f"\n{errors.where(errors.user_frame(3))}") from None
    if num_segments < 0:
        raise errors.FuncgradValueError(f"{name}: num_segments must be non-negative, got "
                                        f"{num_segments}\n{errors.where(errors.user_frame(3))}")
    return num_segments


def _segment_update(name, op, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode):
    data, ids = fnp.asarray(data), fnp.asarray(segment_ids)
    if dtypes.kind(ids.dtype) not in "iu":
        raise errors.op_error(name, f"segment_ids must be integers, got {get_aval(ids)}")
    num_segments = _num_segments(name, ids, num_segments)
    mode = GatherScatterMode.from_any(mode, GatherScatterMode.FILL_OR_DROP)
    if mode is GatherScatterMode.FILL_OR_DROP:  # negative ids are dropped, not wrapped
        ids, at_mode = fnp.where(ids < 0, num_segments, ids), "drop"
    elif mode is GatherScatterMode.CLIP:
        ids, at_mode = fnp.clip(ids, 0, max(num_segments - 1, 0)), "clip"
    else:
        at_mode = "promise_in_bounds"
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
              mode=at_mode)
    init = _identity(op, data.dtype)
    if bucket_size is None:
        out = fnp.full((num_segments,) + data.shape[1:], init, data.dtype)
        return _apply(out.at[ids], op, data, kw)
    if ids.ndim != 1:
        raise errors.op_error(name, f"bucket_size needs 1-D segment_ids, got {get_aval(ids)}")
    buckets = math.ceil(ids.shape[0] / bucket_size)
    out = fnp.full((buckets, num_segments) + data.shape[1:], init, data.dtype)
    where = (fnp.arange(ids.shape[0]) // bucket_size, ids)
    return _REDUCERS[op](_apply(out.at[where], op, data, kw), axis=0).astype(data.dtype)


def _apply(at, op, data, kw):
    return {"add": at.add, "mul": at.multiply, "min": at.min, "max": at.max}[op](data, **kw)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The sum of the rows of `data` in each segment: `out[i]` adds every `data[j]` with
    `segment_ids[j] == i` (an empty segment holds 0).

    Args:
        data: the values; its leading axes are those of `segment_ids`.
        segment_ids: integer ids of the segments; repeated and in any order.
        num_segments: the number of output rows (a Python int); None means
            `max(segment_ids) + 1`, which needs concrete ids (not under `jit`).
        indices_are_sorted, unique_indices: promises about `segment_ids`, as JAX's.
        bucket_size: reduce groups of this many consecutive entries separately first, then
            combine the groups (fewer rounding errors in long sums).
        mode: "fill"/"drop" (the default: ids outside `[0, num_segments)` are dropped),
            "clip" or "promise_in_bounds", as `lax.GatherScatterMode`.
        out_sharding: JAX's placement of the result; accepted (one device).

    Returns:
        An array of shape `(num_segments,) + data.shape[segment_ids.ndim:]`.

    Example:
        >>> segment_sum(fnp.arange(4.0), fnp.array([0, 0, 1, 1]), num_segments=3)
        Array([1., 5., 0.], dtype=float32)
    """
    return _segment_update("segment_sum", "add", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The product of the rows of `data` in each segment (an empty one holds 1); the
    arguments are `segment_sum`'s.

    Example:
        >>> segment_prod(fnp.arange(4.0), fnp.array([0, 0, 1, 1]), num_segments=3)
        Array([0., 6., 1.], dtype=float32)
    """
    return _segment_update("segment_prod", "mul", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The maximum of the rows of `data` in each segment (an empty one holds -inf, or the
    integer dtype's minimum); the arguments are `segment_sum`'s.

    Example:
        >>> segment_max(fnp.arange(4.0), fnp.array([0, 0, 1, 1]), num_segments=3)
        Array([  1.,   3., -inf], dtype=float32)
    """
    return _segment_update("segment_max", "max", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The minimum of the rows of `data` in each segment (an empty one holds inf, or the
    integer dtype's maximum); the arguments are `segment_sum`'s.

    Example:
        >>> segment_min(fnp.arange(4.0), fnp.array([0, 0, 1, 1]), num_segments=3)
        Array([ 0.,  2., inf], dtype=float32)
    """
    return _segment_update("segment_min", "min", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)
