"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, pad,
concatenate, slice, dynamic_slice, dynamic_update_slice, iota, and `full`.
"""

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Primitive, ShapedArray, get_aval
from funcgrad.interpreters import ad, batching


# --- broadcast_in_dim -------------------------------------------------------------------------
def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast `x` to `shape`; operand axis i becomes output axis broadcast_dimensions[i].

    Example:
        >>> broadcast_in_dim(fnp.ones(3), (2, 3), (1,)).shape
        (2, 3)
    """
    return broadcast_in_dim_p.bind(x, shape=tuple(shape),
                                   broadcast_dimensions=tuple(broadcast_dimensions))


def _broadcast_in_dim_abstract(x, *, shape, broadcast_dimensions):
    ok = len(broadcast_dimensions) == x.ndim and all(
        0 <= d < len(shape) and x.shape[i] in (1, shape[d])
        for i, d in enumerate(broadcast_dimensions)) and list(broadcast_dimensions) == sorted(
        set(broadcast_dimensions))
    if not ok:
        raise errors.op_error("broadcast_in_dim", f"cannot broadcast operand {x} to shape "
                              f"{shape} with broadcast_dimensions={broadcast_dimensions}")
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    from funcgrad.lax.reductions import reduce_sum
    summed = tuple(i for i in range(len(shape)) if i not in broadcast_dimensions)
    kept_ones = tuple(i for i, d in enumerate(broadcast_dimensions)
                      if x.aval.shape[i] == 1 and shape[d] != 1)
    out = reduce_sum(ct, summed + tuple(broadcast_dimensions[i] for i in kept_ones))
    if kept_ones:
        out = reshape(out, x.aval.shape)
    return [out]


def _broadcast_in_dim_batch(args, dims, *, shape, broadcast_dimensions):
    x, d = args[0], dims[0]
    x = batching.moveaxis(x, d, 0)
    size = get_aval(x).shape[0]
    return broadcast_in_dim(x, (size,) + tuple(shape),
                            (0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.def_impl(_broadcast_in_dim_impl)
broadcast_in_dim_p.def_abstract_eval(_broadcast_in_dim_abstract)
ad.deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (a broadcast of a scalar)."""
    from funcgrad.core import Array
    from funcgrad.lax.elementwise import convert_element_type
    is_scalar = isinstance(fill_value, (bool, int, float, complex))
    if dtype is None:
        dt, weak = (dtypes.scalar_dtype(fill_value) if is_scalar
                    else (get_aval(fill_value).dtype, False))
    else:
        dt, weak = dtypes.canonicalize(dtype), False
    if is_scalar:
        val = Array(np.asarray(fill_value, dt), weak)
    else:
        val = convert_element_type(fill_value, dt, weak_type=weak)
    shape = tuple(int(s) for s in shape)
    return val if shape == () else broadcast_in_dim(val, shape, ())


# --- reshape --------------------------------------------------------------------------------
def reshape(x, new_sizes, dimensions=None):
    """Reshape `x` to `new_sizes` (row-major); `dimensions` is not supported (use transpose)."""
    return reshape_p.bind(x, new_sizes=tuple(int(s) for s in new_sizes))


def _reshape_abstract(x, *, new_sizes):
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size or any(s < 0 for s in new_sizes):
        raise errors.op_error("reshape", f"cannot reshape {x} to {new_sizes} "
                              f"({x.size} elements)")
    return ShapedArray(tuple(new_sizes), x.dtype, x.weak_type)


def _reshape_batch(args, dims, *, new_sizes):
    x = batching.moveaxis(args[0], dims[0], 0)
    return reshape(x, (get_aval(x).shape[0],) + tuple(new_sizes)), 0


reshape_p = Primitive("reshape")
reshape_p.def_impl(lambda x, *, new_sizes: np.reshape(x, new_sizes))
reshape_p.def_abstract_eval(_reshape_abstract)
ad.deflinear(reshape_p, lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])
batching.batch_rules[reshape_p] = _reshape_batch


# --- transpose ------------------------------------------------------------------------------
def transpose(x, permutation):
    """Permute the axes of `x`: output axis i is input axis permutation[i]."""
    return transpose_p.bind(x, permutation=tuple(int(p) for p in permutation))


def _transpose_abstract(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise errors.op_error("transpose", f"permutation {permutation} is not a permutation "
                              f"of the axes of {x}", cls=errors.FuncgradValueError)
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_transpose(ct, x, *, permutation):
    return [transpose(ct, tuple(np.argsort(permutation)))]


def _transpose_batch(args, dims, *, permutation):
    x = batching.moveaxis(args[0], dims[0], 0)
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


transpose_p = Primitive("transpose")
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))
transpose_p.def_abstract_eval(_transpose_abstract)
ad.deflinear(transpose_p, _transpose_transpose)
batching.batch_rules[transpose_p] = _transpose_batch
