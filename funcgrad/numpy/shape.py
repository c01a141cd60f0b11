"""Shape manipulation of funcgrad.numpy: reshape, transpose, axis moves, broadcasting,
joining and splitting, tiling and repeating, flips and rolls, diagonals (`pad` is in padding.py).

Shapes and axes are static Python values; every function lowers to lax shape
primitives (reshape, transpose, broadcast_in_dim, concatenate, slice, rev, pad).
"""

from math import prod

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import Array, ArrayBase, is_concrete, placement
from funcgrad.numpy._util import (
    asarray_operand,
    axis_tuple,
    broadcast_shapes,
    broadcast_to_shape,
    canonical_axes,
    canonical_axis,
    check_no_out,
    dtype_of,
    promote,
    select,
    shape_of,
    static_array,
    static_int,
)

__all__ = [
    "append", "array_split", "astype", "atleast_1d", "atleast_2d", "atleast_3d",
    "broadcast_arrays", "broadcast_to", "column_stack", "concat",
    "concatenate", "copy", "diag", "diagflat", "diagonal", "dsplit", "dstack", "expand_dims",
    "flip", "fliplr", "flipud", "hsplit", "hstack", "matrix_transpose", "moveaxis", "ndim",
    "permute_dims", "ravel", "repeat", "reshape", "roll", "rot90", "row_stack",
    "shape", "size", "split", "squeeze", "stack", "swapaxes", "tile", "trace", "transpose",
    "unstack", "vsplit", "vstack",
]

_reshape_bind = lax.reshape_p.bind
_transpose_bind = lax.transpose_p.bind
_concatenate_bind = lax.concatenate_p.bind
_REVERSED = [tuple(range(n - 1, -1, -1)) for n in range(33)]


# --- metadata ---------------------------------------------------------------------------------

def shape(a):
    """The shape of `a` as a tuple."""
    return shape_of(asarray_operand("shape", a))


def ndim(a):
    """The number of dimensions of `a`."""
    return len(shape(a))


def size(a, axis=None):
    """The number of elements of `a` (along `axis` when given)."""
    s = shape(a)
    return prod(s) if axis is None else s[canonical_axis("size", axis, len(s))]


def astype(x, dtype, /, *, copy=False):
    """`x` converted to `dtype` (canonicalized: float64 -> float32 unless x64)."""
    x = asarray_operand("astype", x)
    dt = dtypes.canonicalize(dtype)
    if dtype_of(x) == dt and not x.weak_type:
        return x
    return lax.convert_element_type(x, dt)


def copy(a, order=None):
    """A copy of `a` in a new buffer (as JAX's; a traced `a` is returned as is).

    Example:
        >>> fnp.copy(np.arange(3)).dtype
        dtype('int32')
    """
    from funcgrad.numpy.creation import array
    return array(a, copy=True)


# --- reshape ------------------------------------------------------------------------------------

def _resolve_shape(a_shape, new):
    """`new` with one -1 inferred; a FuncgradValueError when the sizes cannot match."""
    new = tuple(static_int("reshape", s, "a shape entry") for s in new)
    n = prod(a_shape)
    if new.count(-1) > 1 or any(s < -1 for s in new):
        raise errors.op_error("reshape", f"invalid shape {new}: at most one -1 and no other "
                              "negative sizes", cls=errors.FuncgradValueError)
    if -1 in new:
        known = prod(s for s in new if s != -1)
        if known == 0 or n % known:
            raise errors.op_error("reshape", f"cannot reshape array of shape {a_shape} "
                                  f"(size {n}) into shape {new}", cls=errors.FuncgradValueError)
        new = tuple(n // known if s == -1 else s for s in new)
    if prod(new) != n:
        raise errors.op_error("reshape", f"cannot reshape array of shape {a_shape} (size {n}) "
                              f"into shape {new} (size {prod(new)})",
                              cls=errors.FuncgradValueError)
    return new


def reshape(a, shape=None, order="C", *, newshape=None, copy=None, out_sharding=None):
    """`a` with a new shape of the same size.

    Args:
        a: array-like.
        shape: an int or a tuple of ints (static); one entry may be -1 (inferred).
            `newshape` is the older NumPy name.
        order: 'C' (row-major) or 'F' (column-major).
        out_sharding: None or one device (`core.placement`).

    Raises:
        FuncgradValueError: naming both shapes when the sizes differ.

    Example:
        >>> fnp.reshape(fnp.arange(6), (2, -1)).shape
        (2, 3)
    """
    if out_sharding is not None:
        out = reshape(a, shape, order, newshape=newshape, copy=copy)
        return placement.place("reshape", out, out_sharding)
    if type(a) is Array and type(shape) is tuple and order == "C":
        if shape == a._value.shape:
            return a
        if -1 not in shape and prod(shape) == a._value.size:
            return _reshape_bind(a, new_sizes=shape)
    if shape is None:
        shape = newshape
    a = asarray_operand("reshape", a)
    if isinstance(shape, (int, np.integer)) or (isinstance(shape, ArrayBase)
                                                and not shape_of(shape)):
        shape = (shape,)
    new = _resolve_shape(shape_of(a), tuple(shape))
    if order == "F":
        a = transpose(a)
        return transpose(lax.reshape(a, new[::-1]))
    if order not in ("C", "A"):
        raise errors.op_error("reshape", f"order must be 'C', 'F' or 'A', got "
                                         f"{errors.short_repr(order)}",
                              cls=errors.FuncgradValueError)
    return a if new == shape_of(a) else lax.reshape(a, new)


def ravel(a, order="C", *, out_sharding=None):
    """`a` flattened to 1-D (row-major unless order='F'); `out_sharding` as in `reshape`."""
    if out_sharding is not None:
        return placement.place("ravel", ravel(a, order), out_sharding)
    if type(a) is Array and order == "C":
        v = a._value
        return a if v.ndim == 1 else _reshape_bind(a, new_sizes=(v.size,))
    a = asarray_operand("ravel", a)
    return reshape(a, (prod(shape_of(a)),), order)


# --- axis permutations --------------------------------------------------------------------------

def transpose(a, axes=None):
    """Permute the axes of `a` (reverse them when `axes` is None).

    Example:
        >>> fnp.transpose(fnp.ones((2, 3, 4)), (1, 0, 2)).shape
        (3, 2, 4)
    """
    if type(a) is Array and axes is None:
        nd = a._value.ndim
        return a if nd < 2 else _transpose_bind(a, permutation=_REVERSED[nd])
    a = asarray_operand("transpose", a)
    nd = len(shape_of(a))
    if axes is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        if len(axes) != nd:
            raise errors.op_error("transpose", f"axes {tuple(axes)} don't match an array of "
                                  f"shape {shape_of(a)}", cls=errors.FuncgradValueError)
        perm = tuple(canonical_axis("transpose", ax, nd) for ax in axes)
        if len(set(perm)) != nd:
            raise errors.op_error("transpose", f"repeated axis in {tuple(axes)}",
                                  cls=errors.FuncgradValueError)
    return a if perm == tuple(range(nd)) else lax.transpose(a, perm)


permute_dims = transpose


def matrix_transpose(x, /):
    """Swap the last two axes of `x` (at least 2-D)."""
    x = asarray_operand("matrix_transpose", x)
    nd = len(shape_of(x))
    if nd < 2:
        raise errors.op_error("matrix_transpose", f"needs at least 2 dimensions, got shape "
                              f"{shape_of(x)}", cls=errors.FuncgradValueError)
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def swapaxes(a, axis1, axis2):
    """`a` with `axis1` and `axis2` interchanged."""
    a = asarray_operand("swapaxes", a)
    nd = len(shape_of(a))
    i, j = canonical_axis("swapaxes", axis1, nd), canonical_axis("swapaxes", axis2, nd)
    perm = list(range(nd))
    perm[i], perm[j] = j, i
    return a if i == j else lax.transpose(a, tuple(perm))


def moveaxis(a, source, destination):
    """Move axes `source` to positions `destination` (ints or sequences of ints)."""
    a = asarray_operand("moveaxis", a)
    nd = len(shape_of(a))
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise errors.op_error("moveaxis", f"source {src} and destination {dst} must have the "
                              "same number of elements", cls=errors.FuncgradValueError)
    src = [canonical_axis("moveaxis", s, nd) for s in src]
    dst = [canonical_axis("moveaxis", d, nd) for d in dst]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return a if perm == list(range(nd)) else lax.transpose(a, tuple(perm))


def expand_dims(a, axis):
    """`a` with new size-1 axes inserted at positions `axis` (of the result)."""
    a = asarray_operand("expand_dims", a)
    s = shape_of(a)
    axes = axis_tuple("expand_dims", axis)
    axes = canonical_axes("expand_dims", axes, len(s) + len(axes))
    out = list(s)
    for ax in axes:
        out.insert(ax, 1)
    return lax.reshape(a, tuple(out))


def squeeze(a, axis=None):
    """`a` without size-1 axes (only those in `axis` when given; they must have size 1)."""
    a = asarray_operand("squeeze", a)
    s = shape_of(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(s) if d == 1)
    else:
        axes = canonical_axes("squeeze", axis, len(s))
        bad = [i for i in axes if s[i] != 1]
        if bad:
            raise errors.op_error("squeeze", f"cannot select an axis to squeeze out which has "
                                  f"size not equal to one (axis {bad[0]} of shape {s})",
                                  cls=errors.FuncgradValueError)
    if not axes:
        return a
    return lax.reshape(a, tuple(d for i, d in enumerate(s) if i not in axes))


# --- broadcasting -------------------------------------------------------------------------------

def broadcast_to(array, shape, *, out_sharding=None):
    """`array` broadcast to `shape` by NumPy's rules (read-only view semantics);
    `out_sharding` as in `reshape`.

    Example:
        >>> fnp.broadcast_to(fnp.arange(3), (2, 3)).shape
        (2, 3)
    """
    if out_sharding is not None:
        return placement.place("broadcast_to", broadcast_to(array, shape), out_sharding)
    from funcgrad.numpy._util import static_shape
    a = asarray_operand("broadcast_to", array)
    shape = static_shape("broadcast_to", shape)
    s = shape_of(a)
    ok = len(s) <= len(shape) and all(d in (1, t) for d, t in zip(s[::-1], shape[::-1]))
    if not ok:
        raise errors.op_error("broadcast_to", f"cannot broadcast an array of shape {s} to "
                              f"shape {shape}", cls=errors.FuncgradValueError)
    return broadcast_to_shape(a, shape)


def broadcast_arrays(*args):
    """The arguments broadcast against each other (a list, as `jnp.broadcast_arrays`)."""
    args = [asarray_operand("broadcast_arrays", a) for a in args]
    shape = broadcast_shapes("broadcast_arrays", *[shape_of(a) for a in args])
    return [broadcast_to_shape(a, shape) for a in args]


# --- joining ------------------------------------------------------------------------------------

def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing `axis` (flattened first when axis is None).

    Example:
        >>> fnp.concatenate([fnp.zeros((1, 2)), fnp.ones((2, 2))]).shape
        (3, 2)
    """
    if type(axis) is int and dtype is None and type(arrays) in (list, tuple) and arrays:
        out = _fast_concatenate(arrays, axis)
        if out is not None:
            return out
    if isinstance(arrays, ArrayBase):
        arrays = unstack(arrays)
    arrays = [asarray_operand("concatenate", a) for a in arrays]
    if not arrays:
        raise errors.op_error("concatenate", "needs at least one array",
                              cls=errors.FuncgradValueError)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    arrays = promote("concatenate", arrays, broadcast=False)
    if dtype is not None:
        arrays = [astype(a, dtype) for a in arrays]
    shapes = [shape_of(a) for a in arrays]
    nd = len(shapes[0])
    if nd == 0:
        raise errors.op_error("concatenate", "zero-dimensional arrays cannot be concatenated",
                              cls=errors.FuncgradValueError)
    ax = canonical_axis("concatenate", axis, nd)
    for s in shapes:
        if len(s) != nd or s[:ax] + s[ax + 1:] != shapes[0][:ax] + shapes[0][ax + 1:]:
            raise errors.op_error("concatenate", "all input array dimensions except for the "
                                  f"concatenation axis {ax} must match, got shapes "
                                  + ", ".join(map(str, shapes)), cls=errors.FuncgradValueError)
    if len(arrays) == 1:
        return arrays[0]
    return lax.concatenate(arrays, ax)


def _fast_concatenate(arrays, axis):
    """concatenate_p.bind for Arrays of one dtype whose shapes agree off `axis`, else None."""
    v0 = arrays[0]._value if type(arrays[0]) is Array else None
    if v0 is None or len(arrays) < 2:
        return None
    nd = v0.ndim
    ax = axis + nd if axis < 0 else axis
    if not 0 <= ax < nd:
        return None
    rest = v0.shape[:ax] + v0.shape[ax + 1:]
    for a in arrays[1:]:
        if type(a) is not Array:
            return None
        v = a._value
        if v.dtype != v0.dtype or v.ndim != nd or v.shape[:ax] + v.shape[ax + 1:] != rest:
            return None
    return _concatenate_bind(*arrays, dimension=ax)


def concat(arrays, /, *, axis=0, dtype=None):
    """`concatenate` with the Array API's signature (keyword `axis`)."""
    return concatenate(arrays, axis, dtype)


def stack(arrays, axis=0, out=None, dtype=None):
    """Join same-shaped arrays along a new `axis` (`out` must be None, as in JAX).

    Example:
        >>> fnp.stack([fnp.zeros(3), fnp.ones(3)], axis=1).shape
        (3, 2)
    """
    check_no_out("stack", out)
    if isinstance(arrays, ArrayBase):
        arrays = unstack(arrays)
    arrays = [asarray_operand("stack", a) for a in arrays]
    if not arrays:
        raise errors.op_error("stack", "needs at least one array", cls=errors.FuncgradValueError)
    shapes = {shape_of(a) for a in arrays}
    if len(shapes) != 1:
        raise errors.op_error("stack", "all input arrays must have the same shape, got "
                              + ", ".join(str(shape_of(a)) for a in arrays),
                              cls=errors.FuncgradValueError)
    s = shapes.pop()
    ax = canonical_axis("stack", axis, len(s) + 1)
    new = s[:ax] + (1,) + s[ax:]
    return concatenate([lax.reshape(a, new) for a in arrays], ax, dtype)


def _atleast(name, nd, arys):
    out = []
    for a in arys:
        a = asarray_operand(name, a)
        s = shape_of(a)
        if len(s) < nd:
            if nd == 3 and len(s) == 2:
                s = s + (1,)
            else:
                s = {0: (1,) * nd, 1: ((1,) + s + (1,))[:nd] if nd == 3 else (1,) + s}[len(s)]
            a = lax.reshape(a, s)
        out.append(a)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """Inputs as arrays with at least one dimension (a list when several)."""
    return _atleast("atleast_1d", 1, arys)


def atleast_2d(*arys):
    """Inputs as arrays with at least two dimensions (1-D: shape (1, N))."""
    return _atleast("atleast_2d", 2, arys)


def atleast_3d(*arys):
    """Inputs as arrays with at least three dimensions ((N,) -> (1, N, 1), (M, N) -> (M, N, 1))."""
    return _atleast("atleast_3d", 3, arys)


def _listed(arrays):
    out = _atleast("stack", 1, list(arrays))
    return out if isinstance(out, list) else [out]


def hstack(tup, dtype=None):
    """Stack horizontally: along axis 1, or axis 0 for 1-D inputs."""
    arrs = [asarray_operand("hstack", a) for a in tup]
    arrs = [atleast_1d(a) for a in arrs]
    return concatenate(arrs, 0 if len(shape_of(arrs[0])) == 1 else 1, dtype)


def vstack(tup, dtype=None):
    """Stack vertically: along axis 0 of the inputs made at least 2-D."""
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


row_stack = vstack


def dstack(tup, dtype=None):
    """Stack along the third axis of the inputs made at least 3-D."""
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    """Stack 1-D arrays as columns of a 2-D array (2-D inputs as they are)."""
    cols = []
    for a in tup:
        a = asarray_operand("column_stack", a)
        s = shape_of(a)
        cols.append(lax.reshape(a, (s[0] if s else 1, 1)) if len(s) < 2 else a)
    return concatenate(cols, 1)


def append(arr, values, axis=None):
    """`arr` with `values` appended along `axis` (both flattened when axis is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis)


# --- splitting ----------------------------------------------------------------------------------

def _slice_axis(a, start, stop, ax, step=1):
    s = shape_of(a)
    starts = [0] * len(s)
    limits = list(s)
    starts[ax], limits[ax] = start, stop
    strides = None if step == 1 else tuple(step if i == ax else 1 for i in range(len(s)))
    return lax.slice(a, tuple(starts), tuple(limits), strides)


def _split(name, ary, indices_or_sections, axis, even):
    a = asarray_operand(name, ary)
    s = shape_of(a)
    ax = canonical_axis(name, axis, len(s))
    n = s[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise errors.op_error(name, f"number of sections must be positive, got {k}",
                                  cls=errors.FuncgradValueError)
        if even and n % k:
            raise errors.op_error(name, f"array split does not result in an equal division: "
                                  f"axis {ax} of size {n} into {k} sections",
                                  cls=errors.FuncgradValueError, hint="use array_split")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        bounds = np.cumsum([0] + sizes).tolist()
    else:
        idx = [min(max(int(i) + (n if int(i) < 0 else 0), 0), n) for i in indices_or_sections]
        bounds = [0] + idx + [n]
    return [_slice_axis(a, lo, max(lo, hi), ax) for lo, hi in zip(bounds, bounds[1:])]


def split(ary, indices_or_sections, axis=0):
    """Split into equal sections (an int) or at the given indices (a sequence).

    Example:
        >>> [x.shape for x in fnp.split(fnp.arange(6), [2, 3])]
        [(2,), (1,), (3,)]
    """
    return _split("split", ary, indices_or_sections, axis, True)


def array_split(ary, indices_or_sections, axis=0):
    """Like `split`, but an int number of sections need not divide the axis."""
    return _split("array_split", ary, indices_or_sections, axis, False)


def hsplit(ary, indices_or_sections):
    """Split along axis 1 (axis 0 for 1-D input)."""
    a = asarray_operand("hsplit", ary)
    return split(a, indices_or_sections, 0 if len(shape_of(a)) == 1 else 1)


def vsplit(ary, indices_or_sections):
    """Split along axis 0."""
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    """Split along axis 2."""
    return split(ary, indices_or_sections, 2)


def index_axis(x, i, axis=0):
    """`x[i]` along `axis` for a static int `i` (the axis removed)."""
    s = shape_of(x)
    return lax.reshape(_slice_axis(x, i, i + 1, axis), s[:axis] + s[axis + 1:])


def unstack(x, /, *, axis=0):
    """The slices of `x` along `axis`, as a tuple of arrays with that axis removed."""
    x = asarray_operand("unstack", x)
    s = shape_of(x)
    if not s:
        raise errors.op_error("unstack", "needs at least one dimension",
                              cls=errors.FuncgradValueError)
    ax = canonical_axis("unstack", axis, len(s))
    return tuple(index_axis(x, i, ax) for i in range(s[ax]))


# --- tiling and repeating ----------------------------------------------------------------------

def tile(A, reps):
    """`A` repeated `reps` times along each axis.

    Example:
        >>> fnp.tile(fnp.array([1, 2]), (2, 2))
        Array([[1, 2, 1, 2],
               [1, 2, 1, 2]], dtype=int32)
    """
    a = asarray_operand("tile", A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    reps = tuple(static_int("tile", r, "reps") for r in reps)
    s = shape_of(a)
    nd = max(len(s), len(reps))
    s = (1,) * (nd - len(s)) + s
    reps = (1,) * (nd - len(reps)) + reps
    a = lax.reshape(a, s) if s != shape_of(a) else a
    inter = tuple(x for r, d in zip(reps, s) for x in (r, d))
    b = lax.broadcast_in_dim(a, inter, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(b, tuple(r * d for r, d in zip(reps, s)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None, out_sharding=None):
    """Repeat each element `repeats` times along `axis` (flattened when None);
    `out_sharding` as in `reshape`.

    `repeats` must be static: an int, or a sequence (or concrete array) of ints.

    Example:
        >>> fnp.repeat(fnp.array([1, 2]), 2)
        Array([1, 1, 2, 2], dtype=int32)
    """
    if out_sharding is not None:
        out = repeat(a, repeats, axis, total_repeat_length=total_repeat_length)
        return placement.place("repeat", out, out_sharding)
    a = asarray_operand("repeat", a)
    if axis is None:
        a, axis = ravel(a), 0
    s = shape_of(a)
    ax = canonical_axis("repeat", axis, len(s))
    if isinstance(repeats, ArrayBase):
        if not is_concrete(repeats):
            raise errors.ConcretizationTypeError(
                f"repeat: `repeats` must be static, got a traced value {repeats.aval}\n"
                f"{errors.where(errors.user_frame(2))}\n"
                "  hint: pass a Python int or a list of ints")
        repeats = static_array("repeat", repeats, "repeats").tolist()
    if np.ndim(repeats) == 1 and len(repeats) == 1:  # one count broadcasts, as in NumPy
        repeats = repeats[0]
    if isinstance(repeats, (int, np.integer)) or np.ndim(repeats) == 0:
        r = int(repeats if not isinstance(repeats, list) else repeats)
        if r < 0:
            raise errors.op_error("repeat", f"negative repeats {r}",
                                  cls=errors.FuncgradValueError)
        b = lax.broadcast_in_dim(a, s[:ax + 1] + (r,) + s[ax + 1:],
                                 tuple(i if i <= ax else i + 1 for i in range(len(s))))
        return lax.reshape(b, s[:ax] + (s[ax] * r,) + s[ax + 1:])
    reps = [int(r) for r in repeats]
    if len(reps) != s[ax] or any(r < 0 for r in reps):
        raise errors.op_error("repeat", f"repeats must be {s[ax]} non-negative ints for axis "
                              f"{ax} of shape {s}, got {reps}", cls=errors.FuncgradValueError)
    from funcgrad.numpy.indexing import take
    idx = np.repeat(np.arange(s[ax], dtype=np.int32), reps)
    return take(a, Array(idx), axis=ax)


# --- flips, rolls, rotations --------------------------------------------------------------------

def flip(m, axis=None):
    """Reverse the order of elements along `axis` (all axes when None)."""
    m = asarray_operand("flip", m)
    axes = canonical_axes("flip", axis, len(shape_of(m)))
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    """Reverse along axis 1."""
    return flip(m, 1)


def flipud(m):
    """Reverse along axis 0."""
    return flip(m, 0)


def roll(a, shift, axis=None):
    """Roll elements along `axis` by `shift` (flattened when axis is None); elements that
    roll off one end come back at the other. `shift` may be traced.

    Example:
        >>> fnp.roll(fnp.arange(5), 2)
        Array([3, 4, 0, 1, 2], dtype=int32)
    """
    a = asarray_operand("roll", a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), shape_of(a))
    axes = axis_tuple("roll", axis)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,) * len(axes)
    if len(shifts) != len(axes):
        raise errors.op_error("roll", f"shift {shift} and axis {axis} differ in length",
                              cls=errors.FuncgradValueError)
    for sh, ax in zip(shifts, axes):
        a = _roll_axis(a, sh, canonical_axis("roll", ax, len(shape_of(a))))
    return a


def _roll_axis(a, shift, ax):
    n = shape_of(a)[ax]
    if n == 0:
        return a
    if not isinstance(shift, ArrayBase) or is_concrete(shift):
        k = int(shift) % n
        if k == 0:
            return a
        return lax.concatenate([_slice_axis(a, n - k, n, ax), _slice_axis(a, 0, n - k, ax)], ax)
    # result[i] = a[(i - shift) mod n] = doubled[start + i] with start = (-shift) mod n
    idx_dt = dtype_of(shift)
    n_ = Array(np.asarray(n, idx_dt))
    start = lax.rem(lax.sub(n_, lax.rem(shift, n_)), n_)
    doubled = lax.concatenate([a, a], ax)
    s = shape_of(a)
    zero = Array(np.asarray(0, idx_dt))
    starts = [start if i == ax else zero for i in range(len(s))]
    return lax.dynamic_slice(doubled, starts, s)


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees `k` times in the plane of `axes` (from the first toward the second)."""
    m = asarray_operand("rot90", m)
    nd = len(shape_of(m))
    if len(axes) != 2 or nd < 2:
        raise errors.op_error("rot90", f"needs 2 axes of an array with at least 2 dimensions, "
                              f"got axes {axes} for shape {shape_of(m)}",
                              cls=errors.FuncgradValueError)
    a0, a1 = (canonical_axis("rot90", x, nd) for x in axes)
    if a0 == a1:
        raise errors.op_error("rot90", f"axes must be different, got {axes}",
                              cls=errors.FuncgradValueError)
    k = static_int("rot90", k, "k") % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, a1), perm)
    return flip(transpose(m, perm), a1)


# --- diagonals ----------------------------------------------------------------------------------

def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal of the 2-D slices in the plane (axis1, axis2), as the last axis.

    Example:
        >>> fnp.diagonal(fnp.arange(9).reshape(3, 3), offset=1)
        Array([1, 5], dtype=int32)
    """
    a = asarray_operand("diagonal", a)
    s = shape_of(a)
    nd = len(s)
    if nd < 2:
        raise errors.op_error("diagonal", f"needs at least 2 dimensions, got shape {s}",
                              cls=errors.FuncgradValueError)
    i, j = canonical_axis("diagonal", axis1, nd), canonical_axis("diagonal", axis2, nd)
    if i == j:
        raise errors.op_error("diagonal", f"axis1 and axis2 must differ, got {axis1}, {axis2}",
                              cls=errors.FuncgradValueError)
    rest = [d for d in range(nd) if d not in (i, j)]
    perm = tuple(rest) + (i, j)
    a = lax.transpose(a, perm) if perm != tuple(range(nd)) else a
    n, m = s[i], s[j]
    offset = static_int("diagonal", offset, "offset")
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    batch = tuple(s[d] for d in rest)
    flat = lax.reshape(a, batch + (n * m,))
    start = offset if offset >= 0 else -offset * m
    if length == 0:
        return lax.full(batch + (0,), 0, dtype_of(a))
    stop = start + (length - 1) * (m + 1) + 1
    return _slice_axis(flat, start, stop, len(batch), m + 1)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along the diagonal (see `diagonal`)."""
    from funcgrad.numpy.reductions import sum as sum_
    return sum_(diagonal(a, offset, axis1, axis2), -1, dtype, out)


def diag(v, k=0):
    """The k-th diagonal of a 2-D `v`, or a 2-D array with 1-D `v` on its k-th diagonal.

    Example:
        >>> fnp.diag(fnp.array([1, 2]))
        Array([[1, 0],
               [0, 2]], dtype=int32)
    """
    v = asarray_operand("diag", v)
    s = shape_of(v)
    k = static_int("diag", k, "k")
    if len(s) == 2:
        return diagonal(v, k)
    if len(s) != 1:
        raise errors.op_error("diag", f"input must be 1-D or 2-D, got shape {s}",
                              cls=errors.FuncgradValueError)
    n = s[0] + abs(k)
    dt = dtype_of(v)
    padded = lax.pad(v, Array(np.zeros((), dt)), ((0, abs(k), 0),)) if k else v
    vals = lax.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
    idt = dtypes.default_int()
    rows = lax.broadcast_in_dim(lax.iota(idt, n), (n, n), (0,))
    cols = lax.broadcast_in_dim(lax.iota(idt, n), (n, n), (1,))
    mask = lax.eq(lax.sub(cols, rows), Array(np.asarray(k, idt)))
    return select(mask, lax.full((n, n), 0, dt), vals)


def diagflat(v, k=0):
    """A 2-D array with the flattened `v` on its k-th diagonal."""
    return diag(ravel(v), k)

