"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, iota, and the
wrappers `expand_dims`, `full`, `full_like`, `zeros_like_array`.

Slicing, padding and concatenation live in `lax/slicing.py`. Every block follows
docs/internals.md: wrapper, rules, `foo_p`, one registration line per rule table.
"""

import math

import numpy as np

from funcgrad import dtypes, errors
from funcgrad.core import Array, ArrayBase, Primitive, ShapedArray, get_aval, register_op
from funcgrad.core.placement import place
from funcgrad.interpreters import ad, batching
from funcgrad.lax.utils import static_int, static_ints, unit_axes_view


def canonicalize_axis(name, axis, ndim):
    """`axis` in [-ndim, ndim) as a non-negative int, else an error naming `name`."""
    axis = static_int(name, axis, "axis")
    if not -ndim <= axis < ndim:
        raise errors.op_error(name, f"axis {axis} is out of range for rank {ndim}",
                              cls=errors.FuncgradValueError)
    return axis % ndim if ndim else axis


def _check_dims(name, x, dims):
    """Distinct axes of `x` in [0, ndim): the `dimensions` parameter of rev/squeeze."""
    if any(not 0 <= d < x.ndim for d in dims) or len(set(dims)) != len(dims):
        raise errors.op_error(name, f"dimensions {dims} must be distinct axes in "
                              f"[0, {x.ndim}) of operand {x}", cls=errors.FuncgradValueError)


# --- broadcast_in_dim -------------------------------------------------------------------------
def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    """Broadcast `operand` to `shape`; its axis i becomes output axis broadcast_dimensions[i].
    `out_sharding`: None or one device (`core.placement`).

    Example:
        >>> broadcast_in_dim(fnp.ones(3), (2, 3), (1,)).shape
        (2, 3)
    """
    out = broadcast_in_dim_p.bind(
        operand, shape=static_ints("broadcast_in_dim", shape, "shape"),
        broadcast_dimensions=static_ints("broadcast_in_dim", broadcast_dimensions,
                                         "broadcast_dimensions"))
    return place("broadcast_in_dim", out, out_sharding)


def _broadcast_in_dim_abstract(x, *, shape, broadcast_dimensions):
    ok = len(broadcast_dimensions) == x.ndim and all(
        0 <= d < len(shape) and x.shape[i] in (1, shape[d])
        for i, d in enumerate(broadcast_dimensions)) and list(broadcast_dimensions) == sorted(
        set(broadcast_dimensions)) and all(s >= 0 for s in shape)
    if not ok:
        raise errors.op_error("broadcast_in_dim", f"cannot broadcast operand {x} to shape "
                              f"{shape} with broadcast_dimensions={broadcast_dimensions}")
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    if math.prod(shape) <= 4096:  # small: a copy is cheaper than np.broadcast_to's view
        out = np.empty(shape, x.dtype)
        out[...] = x.reshape(expanded)
        return out
    return np.broadcast_to(x.reshape(expanded), shape)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    from funcgrad.lax.reductions import reduce_sum
    summed = tuple(i for i in range(len(shape)) if i not in broadcast_dimensions)
    kept_ones = tuple(i for i, d in enumerate(broadcast_dimensions)
                      if x.aval.shape[i] == 1 and shape[d] != 1)
    out = reduce_sum(ct, tuple(sorted(summed + tuple(broadcast_dimensions[i]
                                                     for i in kept_ones))))
    if kept_ones:
        out = reshape(out, x.aval.shape)
    return [out]


def _broadcast_in_dim_batch(args, dims, *, shape, broadcast_dimensions):
    x = batching.moveaxis(args[0], dims[0], 0)
    size = get_aval(x).shape[0]
    return broadcast_in_dim(x, (size,) + tuple(shape),
                            (0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.def_impl(_broadcast_in_dim_impl)
broadcast_in_dim_p.def_abstract_eval(_broadcast_in_dim_abstract)
ad.deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching.batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch
broadcast_in_dim_p.declare("view", fusible=True, view_axes=lambda x, out, *, shape,
                           broadcast_dimensions: tuple(broadcast_dimensions))
register_op("broadcast_in_dim", broadcast_in_dim)


def expand_dims(array, dimensions):
    """Insert size-1 axes at `dimensions` (positions in the output; negative allowed).

    Example:
        >>> expand_dims(fnp.ones(3), (0, -1)).shape
        (1, 3, 1)
    """
    x = array
    dimensions = static_ints("expand_dims", dimensions, "dimensions")
    shape = list(get_aval(x).shape)
    ndim_out = len(shape) + len(dimensions)
    dims = [canonicalize_axis("expand_dims", d, ndim_out) for d in dimensions]
    if len(set(dims)) != len(dims):
        raise errors.op_error("expand_dims", f"repeated axis in dimensions={tuple(dimensions)}",
                              cls=errors.FuncgradValueError)
    for d in sorted(dims):
        shape.insert(d, 1)
    return broadcast_in_dim(x, shape, tuple(i for i in range(ndim_out) if i not in dims))


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of `shape` filled with `fill_value` (a broadcast of a scalar); `sharding`:
    None or one device (`core.placement`).

    Example:
        >>> full((2,), 3.0)
        Array([3., 3.], dtype=float32)
    """
    is_scalar = isinstance(fill_value, (bool, int, float, complex))
    if dtype is None:
        dt, weak = (dtypes.scalar_dtype(fill_value) if is_scalar
                    else (get_aval(fill_value).dtype, False))
    else:
        dt, weak = dtypes.canonicalize(dtype), False
    return place("full", _fill(shape, fill_value, dt, weak), sharding, "sharding")


def _fill(shape, fill_value, dt, weak):
    from funcgrad.lax.elementwise import convert_element_type
    if isinstance(fill_value, (bool, int, float, complex, np.generic)):
        val = Array(np.asarray(fill_value, dt), weak)
    else:
        if get_aval(fill_value).shape != ():
            raise errors.op_error("full", f"fill_value must be a scalar, got "
                                  f"{get_aval(fill_value)}")
        val = convert_element_type(fill_value, dt, weak_type=weak)
    shape = static_ints("full", shape, "shape")
    return val if shape == () else broadcast_in_dim(val, shape, ())


register_op("full", full)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """An array like `x` (its shape and dtype unless given) filled with `fill_value`;
    `sharding`: None or one device (`core.placement`).

    Example:
        >>> full_like(fnp.zeros(2, fnp.int32), 7)
        Array([7, 7], dtype=int32)
    """
    aval = get_aval(x)
    dt = aval.dtype if dtype is None else dtypes.canonicalize(dtype)
    weak = dtype is None and aval.weak_type
    out = _fill(aval.shape if shape is None else shape, fill_value, dt, weak)
    return place("full_like", out, sharding, "sharding")


def zeros_like_array(x):
    """Zeros with the shape, dtype and weak type of `x`."""
    return full_like(x, 0)


# --- reshape --------------------------------------------------------------------------------
def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    """Reshape `operand` to `new_sizes` (row-major), after transposing by `dimensions` if
    given. `out_sharding`: None or one device (`core.placement`).

    Example:
        >>> reshape(fnp.arange(6), (2, 3)).shape
        (2, 3)
    """
    x = operand
    new_sizes = static_ints("reshape", new_sizes, "new_sizes")
    if dimensions is not None and static_ints("reshape", dimensions, "dimensions") != tuple(
            range(get_aval(x).ndim)):
        x = transpose(x, dimensions)
    if not (isinstance(x, ArrayBase) and get_aval(x).shape == new_sizes):
        x = reshape_p.bind(x, new_sizes=new_sizes)
    return place("reshape", x, out_sharding)


def _reshape_abstract(x, *, new_sizes):
    if any(s < 0 for s in new_sizes) or int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise errors.op_error("reshape", f"cannot reshape {x} ({x.size} elements) to "
                              f"{new_sizes}", hint="the number of elements must not change")
    return ShapedArray(tuple(new_sizes), x.dtype, x.weak_type)


def _reshape_batch(args, dims, *, new_sizes):
    x = batching.moveaxis(args[0], dims[0], 0)
    return reshape(x, (get_aval(x).shape[0],) + tuple(new_sizes)), 0


reshape_p = Primitive("reshape")
reshape_p.def_impl(lambda x, *, new_sizes: np.reshape(x, new_sizes))
reshape_p.def_abstract_eval(_reshape_abstract)
ad.deflinear(reshape_p, lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])
batching.batch_rules[reshape_p] = _reshape_batch
reshape_p.declare("view", fusible=True, view_axes=unit_axes_view)


# --- transpose ------------------------------------------------------------------------------
def transpose(operand, permutation):
    """Permute the axes of `operand`: output axis i is input axis permutation[i].

    Example:
        >>> transpose(fnp.zeros((2, 3)), (1, 0)).shape
        (3, 2)
    """
    return transpose_p.bind(operand,
                            permutation=static_ints("transpose", permutation, "permutation"))


def _transpose_abstract(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise errors.op_error("transpose", f"permutation {permutation} is not a permutation "
                              f"of the axes of {x}", cls=errors.FuncgradValueError)
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_transpose(ct, x, *, permutation):
    return [transpose(ct, tuple(int(i) for i in np.argsort(permutation)))]


def _transpose_batch(args, dims, *, permutation):
    x = batching.moveaxis(args[0], dims[0], 0)
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


transpose_p = Primitive("transpose")
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))
transpose_p.def_abstract_eval(_transpose_abstract)
ad.deflinear(transpose_p, _transpose_transpose)
batching.batch_rules[transpose_p] = _transpose_batch
transpose_p.declare("view", fusible=True, view_axes=lambda x, out, *, permutation: tuple(
    permutation.index(i) for i in range(len(permutation))))
register_op("transpose", transpose)


# --- squeeze ----------------------------------------------------------------------------------
def squeeze(array, dimensions):
    """Remove the size-1 axes `dimensions` (negative allowed) of `array`.

    Example:
        >>> squeeze(fnp.zeros((1, 3, 1)), (0, -1)).shape
        (3,)
    """
    nd = get_aval(array).ndim
    dims = tuple(sorted(canonicalize_axis("squeeze", d, nd)
                        for d in static_ints("squeeze", dimensions, "dimensions")))
    return squeeze_p.bind(array, dimensions=dims)


def _squeeze_abstract(x, *, dimensions):
    _check_dims("squeeze", x, dimensions)
    if any(x.shape[d] != 1 for d in dimensions):
        raise errors.op_error("squeeze", f"dimensions {dimensions} of operand {x} must all "
                              "have size 1")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


def _squeeze_batch(args, dims, *, dimensions):
    x = batching.moveaxis(args[0], dims[0], 0)
    return squeeze_p.bind(x, dimensions=tuple(d + 1 for d in dimensions)), 0


squeeze_p = Primitive("squeeze")
squeeze_p.def_impl(lambda x, *, dimensions: np.squeeze(x, axis=dimensions))
squeeze_p.def_abstract_eval(_squeeze_abstract)
ad.deflinear(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])
batching.batch_rules[squeeze_p] = _squeeze_batch
squeeze_p.declare("view", fusible=True, view_axes=unit_axes_view)


# --- rev --------------------------------------------------------------------------------------
def rev(operand, dimensions):
    """Reverse `operand` along the axes `dimensions` (distinct, non-negative).

    Example:
        >>> rev(fnp.arange(3), (0,))
        Array([2, 1, 0], dtype=int32)
    """
    return rev_p.bind(operand, dimensions=static_ints("rev", dimensions, "dimensions"))


def _rev_abstract(x, *, dimensions):
    _check_dims("rev", x, dimensions)
    return x


def _rev_batch(args, dims, *, dimensions):
    x, d = args[0], dims[0]
    return rev(x, tuple(a + (d <= a) for a in dimensions)), d


rev_p = Primitive("rev")
rev_p.def_impl(lambda x, *, dimensions: np.flip(x, dimensions) if dimensions else x)
rev_p.def_abstract_eval(_rev_abstract)
ad.deflinear(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])
batching.batch_rules[rev_p] = _rev_batch
rev_p.declare("view")  # a kernel reads no reversed operand (no negative strides)


# --- iota -------------------------------------------------------------------------------------
def iota(dtype, size):
    """`[0, 1, ..., size - 1]` with dtype `dtype`.

    Example:
        >>> iota(fnp.int32, 3)
        Array([0, 1, 2], dtype=int32)
    """
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension, *, out_sharding=None):
    """An array of `shape` whose entries are their index along axis `dimension`;
    `out_sharding`: None or one device (`core.placement`).

    Example:
        >>> broadcasted_iota(fnp.int32, (2, 2), 1)
        Array([[0, 1],
               [0, 1]], dtype=int32)
    """
    out = iota_p.bind(dtype=dtypes.canonicalize(dtype),
                      shape=static_ints("broadcasted_iota", shape, "shape"),
                      dimension=static_int("broadcasted_iota", dimension, "dimension"))
    return place("broadcasted_iota", out, out_sharding)


def _iota_abstract(*, dtype, shape, dimension):
    if dtypes.kind(dtype) not in "iuf":
        raise errors.op_error("iota", f"dtype must be an integer or float dtype, got {dtype}")
    if not 0 <= dimension < len(shape) or any(s < 0 for s in shape):
        raise errors.op_error("iota", f"dimension {dimension} must be an axis of the "
                              f"non-negative shape {shape}", cls=errors.FuncgradValueError)
    return ShapedArray(shape, dtype, False)


def _iota_impl(*, dtype, shape, dimension):
    idx = [1] * len(shape)
    idx[dimension] = shape[dimension]
    return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(idx), shape)


iota_p = Primitive("iota")
iota_p.def_impl(_iota_impl)
iota_p.def_abstract_eval(_iota_abstract)
ad.defjvp_zero(iota_p)


__all__ = [
    "broadcast_in_dim", "broadcast_in_dim_p", "broadcasted_iota", "expand_dims", "full",
    "full_like", "iota", "iota_p", "reshape", "reshape_p", "rev", "rev_p", "squeeze",
    "squeeze_p", "transpose", "transpose_p", "zeros_like_array",
]
