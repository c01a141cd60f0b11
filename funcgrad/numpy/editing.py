"""Array editing and rearranging of funcgrad.numpy: `delete`, `insert`, `select`, `choose`,
`compress`, `extract`, `place`, `put`, `resize`, `rollaxis`, `block`, `partition`,
`argpartition`, `lexsort`, `sort_complex`, `trim_zeros`, `packbits`, `unpackbits`, `matvec`,
`vecmat`, `geomspace`, `nancumsum`, `nancumprod`.

Functional versions of NumPy's (nothing changes in place: `place`/`put` need
`inplace=False`, as in JAX). Positions that decide an output shape are static (or, with
JAX's `size=`, padded to a static length); the values they move keep their derivatives.
"""

import builtins

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import concrete_value
from funcgrad.numpy._util import (
    asarray_operand,
    canonical_axis,
    check_no_out,
    convert,
    dtype_of,
    promote,
    shape_of,
    static_array,
    static_int,
    static_shape,
    user_dtype,
)
from funcgrad.numpy.creation import arange, full, logspace, zeros
from funcgrad.numpy.indexing import take
from funcgrad.numpy.logic import bitwise_and, isnan, right_shift, where
from funcgrad.numpy.math import conj, log10, mod, multiply, real, sign
from funcgrad.numpy.products import einsum
from funcgrad.numpy.reductions import cumprod, cumsum, sum
from funcgrad.numpy.searching import argsort, nonzero, sort, unravel_index
from funcgrad.numpy.shape import (
    broadcast_to,
    concatenate,
    moveaxis,
    ravel,
    reshape,
)

__all__ = [
    "argpartition", "block", "choose", "compress", "delete", "extract", "geomspace", "insert",
    "lexsort", "matvec", "nancumprod", "nancumsum", "packbits", "partition", "place", "put",
    "resize", "rollaxis", "select", "sort_complex", "trim_zeros", "unpackbits", "vecmat",
]


def _flat_or_axis(name, arr, axis):
    arr = asarray_operand(name, arr)
    if axis is None:
        return ravel(arr), 0
    return arr, canonical_axis(name, axis, len(shape_of(arr)))


# --- deleting and inserting -------------------------------------------------------------------
def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """`arr` without the entries `obj` (an int, slice, index array or bool mask) along
    `axis` (the flattened array for None). `obj` is static, or a traced index array when
    `assume_unique_indices=True` (its entries distinct and in range).

    Example:
        >>> fnp.delete(fnp.arange(5), [0, 3])
        Array([1, 2, 4], dtype=int32)
    """
    arr, axis = _flat_or_axis("delete", arr, axis)
    n = shape_of(arr)[axis]
    if assume_unique_indices and concrete_value(asarray_operand("delete", obj)) is None:
        from funcgrad.numpy.setops import isin
        idx = ravel(asarray_operand("delete", obj))
        idx = where(idx < 0, idx + n, idx)
        keep = lax.bitwise_not(isin(arange(n), idx))
        pos = nonzero(keep, size=n - shape_of(idx)[0])[0]
        return take(arr, pos, axis=axis)
    if isinstance(obj, slice):
        gone = np.arange(n)[obj]
    else:
        gone = static_array("delete", obj, "obj")
        if gone.dtype == bool:
            if gone.shape != (n,):
                raise errors.op_error("delete", f"a boolean obj needs shape ({n},), got "
                                      f"{gone.shape}", cls=errors.FuncgradValueError)
            gone = np.flatnonzero(gone)
        if gone.dtype.kind not in "iu":
            raise errors.op_error("delete", f"obj must be integer indices (or booleans), got "
                                  f"dtype {gone.dtype}", cls=errors.FuncgradIndexError)
        gone = gone.astype(np.int64).ravel()
        if np.any((gone < -n) | (gone >= n)):
            raise errors.op_error("delete", f"index out of bounds for axis {axis} of size {n}: "
                                  f"{gone}", cls=errors.FuncgradIndexError)
    keep = np.setdiff1d(np.arange(n), np.mod(gone, n) if n else gone)
    return take(arr, keep.astype(np.int32), axis=axis)


def insert(arr, obj, values, axis=None):
    """`arr` with `values` inserted before the positions `obj` (an int, slice or index
    array, static) along `axis` (the flattened array for None), as NumPy's `insert`.

    Example:
        >>> fnp.insert(fnp.arange(4), [1, 3], fnp.array([10, 30]))
        Array([ 0, 10,  1,  2, 30,  3], dtype=int32)
    """
    arr, axis = _flat_or_axis("insert", arr, axis)
    values = convert(asarray_operand("insert", values), dtype_of(arr))
    shape, nd = shape_of(arr), len(shape_of(arr))
    n = shape[axis]
    idx = np.arange(n + 1)[obj] if isinstance(obj, slice) else static_array("insert", obj,
                                                                            "obj")
    if idx.dtype == bool or idx.dtype.kind not in "iu":
        raise errors.op_error("insert", f"obj must hold integer positions, got {idx.dtype}",
                              cls=errors.FuncgradTypeError)
    if np.any((idx < -n) | (idx > n)):
        raise errors.op_error("insert", f"index out of bounds for axis {axis} of size {n}: "
                              f"{idx}", cls=errors.FuncgradIndexError)
    idx = np.where(idx < 0, idx + n, idx).astype(np.int64)
    vshape = shape_of(values)
    values = reshape(values, (1,) * (nd - len(vshape)) + vshape) if len(vshape) < nd else values
    if idx.ndim == 0:  # one position: the values' first axis becomes the inserted axis
        values = moveaxis(values, 0, axis)
        count = shape_of(values)[axis]
        positions = int(idx) + np.arange(count)
        order = np.arange(count)
    else:
        count = idx.size
        order = np.argsort(idx.ravel(), kind="stable")
        positions = idx.ravel()[order] + np.arange(count)
    target = tuple(count if i == axis else s for i, s in enumerate(shape))
    values = broadcast_to(values, target)
    if idx.ndim:
        values = take(values, order.astype(np.int32), axis=axis)
    perm = np.empty(n + count, np.int64)
    perm[positions] = n + np.arange(count)
    old = np.ones(n + count, bool)
    old[positions] = False
    perm[old] = np.arange(n)
    return take(concatenate([arr, values], axis), perm.astype(np.int32), axis=axis)


# --- choosing ---------------------------------------------------------------------------------
def select(condlist, choicelist, default=0):
    """Elementwise the entry of the first choice whose condition holds, else `default`.

    Example:
        >>> x = fnp.arange(4)
        >>> fnp.select([x < 1, x > 2], [x, x * 10], default=-1)
        Array([ 0, -1, -1, 30], dtype=int32)
    """
    if len(condlist) != len(choicelist):
        raise errors.op_error("select", f"condlist and choicelist must have the same length, "
                              f"got {len(condlist)} and {len(choicelist)}",
                              cls=errors.FuncgradValueError)
    if len(condlist) == 0:  # (an array of conditions is a sequence of its rows, as in JAX)
        raise errors.op_error("select", "condlist must be non-empty",
                              cls=errors.FuncgradValueError)
    choices = promote("select", [default, *[choicelist[i] for i in range(len(choicelist))]],
                      broadcast=False)
    out = choices[0]
    conds = [condlist[i] for i in range(len(condlist))]
    for cond, choice in zip(conds[::-1], choices[1:][::-1]):
        c = asarray_operand("select", cond)
        if dtypes.kind(dtype_of(c)) != "b":  # a number's truth, as JAX's select reads it
            c = lax.ne(c, lax.full((), 0, dtype_of(c)))
        out = where(c, choice, out)
    return out


def choose(a, choices, out=None, mode="raise"):
    """Elementwise `choices[a]` (all broadcast together); `mode` handles indices out of
    range: "raise" (needs a concrete `a`), "wrap" or "clip".

    Example:
        >>> fnp.choose(fnp.array([1, 0, 1]), [fnp.zeros(3), fnp.ones(3)])
        Array([1., 0., 1.], dtype=float32)
    """
    check_no_out("choose", out)
    a = asarray_operand("choose", a)
    if dtype_of(a).kind not in "iu":
        raise errors.op_error("choose", f"a must have an integer type, got {dtype_of(a)}",
                              cls=errors.FuncgradTypeError)
    n = len(choices)
    if mode == "raise":
        known = concrete_value(a)
        if known is None:
            raise errors.op_error("choose", "mode='raise' needs a concrete index array",
                                  cls=errors.ConcretizationTypeError,
                                  hint="use mode='wrap' or mode='clip' under jit")
        if np.any((np.asarray(known) < 0) | (np.asarray(known) >= n)):
            raise errors.op_error("choose", "invalid entry in choice array",
                                  cls=errors.FuncgradValueError)
    elif mode == "wrap":
        a = mod(a, n)
    elif mode == "clip":
        a = where(a < 0, 0, where(a > n - 1, n - 1, a))
    else:
        raise errors.op_error("choose", f"mode must be 'raise', 'wrap' or 'clip', got "
                                        f"{errors.short_repr(mode)}",
                              cls=errors.FuncgradValueError)
    vals = promote("choose", list(choices))
    out = vals[-1]
    for k in range(n - 2, -1, -1):
        out = where(a == k, vals[k], out)
    return broadcast_to(out, _broadcast(a, out))


def _broadcast(*xs):
    from funcgrad.numpy._util import broadcast_shapes
    return broadcast_shapes("choose", *[shape_of(x) for x in xs])


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of `a` along `axis` (flattened for None) where the 1-D `condition` holds
    (a shorter `condition` counts as False beyond its end). With `size=`, exactly `size`
    slices (padded with `fill_value`), which works under jit.

    Example:
        >>> fnp.compress(fnp.array([True, False, True]), fnp.arange(3))
        Array([0, 2], dtype=int32)
    """
    check_no_out("compress", out)
    a, axis = _flat_or_axis("compress", a, axis)
    cond = ravel(asarray_operand("compress", condition))
    n = shape_of(a)[axis]
    if shape_of(cond)[0] > n:
        known = concrete_value(cond)
        if known is not None and np.any(np.asarray(known)[n:]):
            raise errors.op_error("compress", "condition contains entries that are out of "
                                  "bounds", cls=errors.FuncgradIndexError)
        cond = cond[:n]
    elif shape_of(cond)[0] < n:
        cond = concatenate([cond != 0, full(n - shape_of(cond)[0], False)])
    cond = cond != 0 if dtype_of(cond).kind != "b" else cond
    if size is None:
        known = concrete_value(cond)
        if known is None:
            raise errors.op_error("compress", "condition is traced, so the result's length is "
                                  "unknown", cls=errors.ConcretizationTypeError,
                                  hint="pass a static size=N, as in JAX")
        return take(a, np.flatnonzero(np.asarray(known)).astype(np.int32), axis=axis)
    size = static_int("compress", size, "size")
    pos = nonzero(cond, size=size, fill_value=0)[0]
    got = take(a, pos, axis=axis)
    valid = arange(size) < sum(cond)
    vshape = [1] * len(shape_of(got))
    vshape[axis] = size
    return where(reshape(valid, tuple(vshape)), got, convert(fill_value, dtype_of(a)))


def extract(condition, arr, *, size=None, fill_value=0):
    """The entries of the flattened `arr` where the flattened `condition` holds (`size=`:
    padded to a static length, as `compress`).

    Example:
        >>> fnp.extract(fnp.array([[True, False], [False, True]]), fnp.eye(2) * 3)
        Array([3., 3.], dtype=float32)
    """
    return compress(ravel(asarray_operand("extract", condition)),
                    ravel(asarray_operand("extract", arr)), size=size, fill_value=fill_value)


def place(arr, mask, vals, *, inplace=True):
    """`arr` with the entries where `mask` holds replaced by `vals` in order (cycled when
    shorter). funcgrad arrays are immutable: pass `inplace=False` (as in JAX).

    Example:
        >>> fnp.place(fnp.zeros(4), fnp.array([1, 0, 1, 1]), fnp.array([5.0, 6.0]),
        ...           inplace=False)
        Array([5., 0., 6., 5.], dtype=float32)
    """
    if inplace:
        raise errors.op_error("place", "funcgrad arrays are immutable: it cannot place in "
                              "place", cls=errors.FuncgradValueError,
                              hint="use a = fnp.place(a, mask, vals, inplace=False)")
    arr = asarray_operand("place", arr)
    m = ravel(broadcast_to(asarray_operand("place", mask) != 0, shape_of(arr)))
    v = convert(ravel(asarray_operand("place", vals)), dtype_of(arr))
    if not shape_of(v)[0]:
        return arr
    k = mod(cumsum(m.astype(np.int32)) - 1, shape_of(v)[0])
    return reshape(where(m, take(v, k), ravel(arr)), shape_of(arr))


def put(a, ind, v, mode=None, *, inplace=True):
    """`a` with the entries at the flat indices `ind` set to `v` (cycled to `ind`'s size);
    `mode`: None (JAX's: indices clamp into range), "clip" or "wrap". Needs
    `inplace=False` (funcgrad arrays are immutable, as JAX's).

    Example:
        >>> fnp.put(fnp.zeros(4), fnp.array([0, 2]), 7.0, inplace=False)
        Array([7., 0., 7., 0.], dtype=float32)
    """
    if inplace:
        raise errors.op_error("put", "funcgrad arrays are immutable: it cannot put in place",
                              cls=errors.FuncgradValueError,
                              hint="use a = fnp.put(a, ind, v, inplace=False)")
    arr = asarray_operand("put", a)
    idx = ravel(asarray_operand("put", ind))
    vals = convert(ravel(asarray_operand("put", v)), dtype_of(arr))
    size = builtins.max(1, int(np.prod(shape_of(arr))))
    if not np.prod(shape_of(arr)) or not shape_of(idx)[0] or not shape_of(vals)[0]:
        return arr
    reps = -(-shape_of(idx)[0] // shape_of(vals)[0])
    vals = concatenate([vals] * reps)[:shape_of(idx)[0]] if reps > 1 else vals[
        :shape_of(idx)[0]]
    if mode == "clip":
        idx = where(idx < 0, 0, where(idx > size - 1, size - 1, idx))
    elif mode == "wrap":
        idx = mod(idx, size)
    elif mode == "raise":
        raise errors.op_error("put", "mode='raise' is not supported (as in JAX)",
                              cls=errors.FuncgradValueError, hint="use 'clip' or 'wrap'")
    elif mode is not None:
        raise errors.op_error("put", f"mode should be 'wrap' or 'clip', got "
                                     f"{errors.short_repr(mode)}",
                              cls=errors.FuncgradValueError)
    return arr.at[unravel_index(idx, shape_of(arr))].set(vals, mode="drop")


# --- shapes -----------------------------------------------------------------------------------
def resize(a, new_shape):
    """`a`'s flattened entries repeated cyclically to fill `new_shape`.

    Example:
        >>> fnp.resize(fnp.arange(3), (2, 4))
        Array([[0, 1, 2, 0],
               [1, 2, 0, 1]], dtype=int32)
    """
    a = ravel(asarray_operand("resize", a))
    shape = static_shape("resize", new_shape)
    total = int(np.prod(shape))
    n = shape_of(a)[0]
    if not total or not n:
        return zeros(shape, dtype_of(a))
    reps = -(-total // n)
    return reshape(concatenate([a] * reps)[:total], shape)


def rollaxis(a, axis, start=0):
    """`a` with `axis` moved to lie before position `start` (NumPy's older `moveaxis`).

    Example:
        >>> fnp.rollaxis(fnp.ones((2, 3, 4)), 2).shape
        (4, 2, 3)
    """
    a = asarray_operand("rollaxis", a)
    nd = len(shape_of(a))
    axis = canonical_axis("rollaxis", axis, nd)
    start = static_int("rollaxis", start, "start")
    if not -nd <= start <= nd:
        raise errors.op_error("rollaxis", f"start {start} out of range for {nd} axes",
                              cls=errors.FuncgradAxisError)
    start = start + nd if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start) if axis != start else a


def block(arrays):
    """One array assembled from nested lists of blocks: the innermost lists join along the
    last axis, the next ones along the one before, ... (NumPy's `block`).

    Example:
        >>> fnp.block([[fnp.eye(2), fnp.zeros((2, 1))], [fnp.ones((1, 3))]]).shape
        (3, 3)
    """
    depth = _block_depth(arrays)
    leaves = []
    _block_leaves(arrays, leaves)
    ndim = builtins.max([depth] + [len(shape_of(x)) for x in leaves])
    return _block_join(arrays, depth, 0, ndim)


def _block_depth(x):
    if isinstance(x, tuple):
        raise errors.op_error("block", "nested sequences must be lists, not tuples",
                              cls=errors.FuncgradTypeError)
    if not isinstance(x, list):
        return 0
    if not x:
        raise errors.op_error("block", "lists cannot be empty", cls=errors.FuncgradValueError)
    depths = {_block_depth(e) for e in x}
    if len(depths) != 1:
        raise errors.op_error("block", "list depths are mismatched",
                              cls=errors.FuncgradValueError)
    return 1 + depths.pop()


def _block_leaves(x, out):
    if isinstance(x, list):
        for e in x:
            _block_leaves(e, out)
    else:
        out.append(asarray_operand("block", x))


def _block_join(x, depth, level, ndim):
    if level == depth:
        x = asarray_operand("block", x)
        s = shape_of(x)
        return reshape(x, (1,) * (ndim - len(s)) + s)
    parts = [_block_join(e, depth, level + 1, ndim) for e in x]
    return concatenate(parts, axis=level - depth)


# --- sorting ----------------------------------------------------------------------------------
def partition(a, kth, axis=-1):
    """`a` rearranged along `axis` so that the entry at `kth` is the one a sort puts there,
    smaller ones before it and larger ones after (here: fully sorted, which is such an
    arrangement; NumPy and JAX leave each side's order unspecified).

    Example:
        >>> fnp.partition(fnp.array([3.0, 1.0, 2.0]), 1)[1]
        Array(2., dtype=float32)
    """
    a = asarray_operand("partition", a)
    _check_kth("partition", a, kth, axis)
    return sort(a, axis=axis)


def argpartition(a, kth, axis=-1):
    """The indices that `partition` `a` along `axis` (here: a stable argsort).

    Example:
        >>> fnp.argpartition(fnp.array([3.0, 1.0, 2.0]), 1)
        Array([1, 2, 0], dtype=int32)
    """
    a = asarray_operand("argpartition", a)
    _check_kth("argpartition", a, kth, axis)
    return argsort(a, axis=axis, stable=True)


def _check_kth(name, a, kth, axis):
    n = shape_of(a)[canonical_axis(name, axis, len(shape_of(a)))]
    k = static_int(name, kth, "kth")
    if not -n <= k < n:
        raise errors.op_error(name, f"kth {k} out of bounds for an axis of size {n}",
                              cls=errors.FuncgradValueError)


def lexsort(keys, axis=-1):
    """The stable ordering by several keys, the last key primary (NumPy's `lexsort`).

    Example:
        >>> fnp.lexsort((fnp.array([1, 0, 1]), fnp.array([0, 0, 1])))
        Array([1, 0, 2], dtype=int32)
    """
    keys = [asarray_operand("lexsort", k) for k in keys]
    if not keys:
        raise errors.op_error("lexsort", "need at least one key", cls=errors.FuncgradTypeError)
    shape = shape_of(keys[0])
    if any(shape_of(k) != shape for k in keys):
        raise errors.op_error("lexsort", f"all keys need the same shape, got "
                              f"{[shape_of(k) for k in keys]}", cls=errors.FuncgradValueError)
    if not shape:
        raise errors.op_error("lexsort", "keys must be at least 1-D",
                              cls=errors.FuncgradValueError)
    axis = canonical_axis("lexsort", axis, len(shape))
    iota = lax.broadcasted_iota(dtypes.default_int(), shape, axis)
    out = lax.sort((*keys[::-1], iota), dimension=axis, is_stable=True, num_keys=len(keys))
    return out[-1]


def sort_complex(a):
    """`a` sorted by real part, then imaginary part, as a complex array.

    Example:
        >>> fnp.sort_complex(fnp.array([2.0, 1.0]))
        Array([1.+0.j, 2.+0.j], dtype=complex64)
    """
    a = asarray_operand("sort_complex", a)
    if dtype_of(a).kind != "c":
        dt = np.dtype(np.complex128 if dtype_of(a) == np.float64 else np.complex64)
        a = convert(a, dtypes.canonicalize(dt))
    return sort(a)


def trim_zeros(filt, trim="fb", axis=None):
    """`filt` without its leading ("f") and/or trailing ("b") zeros; the zeros are found
    from concrete values (the result's shape depends on them). With `axis`, whole slices
    of zeros along those axes are trimmed.

    Example:
        >>> fnp.trim_zeros(fnp.array([0, 0, 1, 2, 0]))
        Array([1, 2], dtype=int32)
    """
    filt = asarray_operand("trim_zeros", filt)
    known = concrete_value(filt)
    if known is None:
        raise errors.op_error("trim_zeros", f"filt {filt.aval} is traced: the result's shape "
                              "depends on its values", cls=errors.ConcretizationTypeError)
    v = np.asarray(known)
    trim = trim.lower()
    axes = range(v.ndim) if axis is None else [canonical_axis("trim_zeros", a, v.ndim) for a
                                                 in np.atleast_1d(axis)]
    out = filt
    nz = v != 0
    for ax in axes:
        other = tuple(i for i in range(v.ndim) if i != ax)
        live = np.flatnonzero(nz.any(axis=other) if other else nz)
        if not len(live):  # all zeros: nothing is left along this axis
            lo = hi = 0
        else:
            lo = live[0] if "f" in trim else 0
            hi = live[-1] + 1 if "b" in trim else v.shape[ax]
        out = lax.slice_in_dim(out, int(lo), int(hi), 1, ax)
    return out


# --- bits -------------------------------------------------------------------------------------
def packbits(a, axis=None, bitorder="big"):
    """Bits (nonzero entries) packed into uint8, eight per byte along `axis` (flattened for
    None; zero-padded at the end), most significant first ("big") or last ("little").

    Example:
        >>> fnp.packbits(fnp.array([1, 0, 1, 1]))
        Array([176], dtype=uint8)
    """
    if bitorder not in ("big", "little"):
        raise errors.op_error("packbits", f"bitorder must be 'big' or 'little', got "
                              f"{errors.short_repr(bitorder)}", cls=errors.FuncgradValueError)
    a = asarray_operand("packbits", a)
    if dtype_of(a).kind not in "biu":
        raise errors.op_error("packbits", f"needs integer or bool input, got {dtype_of(a)}",
                              cls=errors.FuncgradTypeError)
    a, axis = _flat_or_axis("packbits", a, axis)
    bits = (a != 0).astype(np.uint8)
    bits = moveaxis(bits, axis, -1)
    n = shape_of(bits)[-1]
    pad = -n % 8
    if pad:
        bits = concatenate([bits, zeros(shape_of(bits)[:-1] + (pad,), np.uint8)], -1)
    bits = reshape(bits, shape_of(bits)[:-1] + ((n + pad) // 8, 8))
    weights = 2 ** np.arange(8)[::-1] if bitorder == "big" else 2 ** np.arange(8)
    packed = sum(multiply(bits, weights.astype(np.uint8)), axis=-1, dtype=np.uint8)
    return moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 `a` along `axis` (flattened for None), eight per byte, the
    first `count` of them (negative: drop from the end).

    Example:
        >>> fnp.unpackbits(fnp.array([176], fnp.uint8))
        Array([1, 0, 1, 1, 0, 0, 0, 0], dtype=uint8)
    """
    if bitorder not in ("big", "little"):
        raise errors.op_error("unpackbits", f"bitorder must be 'big' or 'little', got "
                              f"{errors.short_repr(bitorder)}", cls=errors.FuncgradValueError)
    a = asarray_operand("unpackbits", a)
    if dtype_of(a) != np.uint8:
        raise errors.op_error("unpackbits", f"needs uint8 input, got {dtype_of(a)}",
                              cls=errors.FuncgradTypeError)
    a, axis = _flat_or_axis("unpackbits", a, axis)
    shifts = np.arange(8)[::-1] if bitorder == "big" else np.arange(8)
    x = moveaxis(a, axis, -1)
    bits = bitwise_and(right_shift(x[..., None], shifts.astype(np.uint8)), np.uint8(1))
    bits = reshape(bits, shape_of(x)[:-1] + (shape_of(x)[-1] * 8,))
    if count is not None:
        count = static_int("unpackbits", count, "count")
        total = shape_of(bits)[-1]
        keep = count if count >= 0 else builtins.max(total + count, 0)
        if keep <= total:
            bits = bits[..., :keep]
        else:
            bits = concatenate([bits, zeros(shape_of(bits)[:-1] + (keep - total,), np.uint8)],
                               -1)
    return moveaxis(bits, -1, axis)


# --- products, spacing, NaN-skipping scans ----------------------------------------------------
def matvec(x1, x2, /):
    """Matrix-vector products over the last axes: `x1[..., i, j] * x2[..., j]` summed over j
    (the other axes broadcast).

    Example:
        >>> fnp.matvec(fnp.eye(2), fnp.array([1.0, 2.0]))
        Array([1., 2.], dtype=float32)
    """
    return einsum("...ij,...j->...i", x1, x2)


def vecmat(x1, x2, /):
    """Vector-matrix products over the last axes, the vector conjugated:
    `conj(x1[..., j]) * x2[..., j, i]` summed over j.

    Example:
        >>> fnp.vecmat(fnp.array([1.0, 2.0]), fnp.eye(2))
        Array([1., 2.], dtype=float32)
    """
    x1 = asarray_operand("vecmat", x1)
    return einsum("...j,...ji->...i", conj(x1) if dtype_of(x1).kind == "c" else x1, x2)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` numbers evenly spaced on a log scale from `start` to `stop` (of one sign, or
    complex), as JAX's `geomspace` (the ends are computed, not copied).

    Example:
        >>> fnp.geomspace(1.0, 1000.0, 4)
        Array([   1.,   10.,  100., 1000.], dtype=float32)
    """
    start, stop = promote("geomspace", [start, stop], inexact=True)
    dt = dtype_of(start) if dtype is None else user_dtype(dtype)
    flip = (1 - (1 - sign(real(start))) * (1 - sign(real(stop))) // 2).astype(dtype_of(start))
    res = multiply(flip[None] if shape_of(flip) else flip,
                   logspace(log10(multiply(flip, start)), log10(multiply(flip, stop)), num,
                            endpoint=endpoint, base=10.0, dtype=dtype_of(start), axis=0))
    if axis != 0:
        res = moveaxis(res, 0, axis)
    return convert(res, dt)


def nancumsum(a, axis=None, dtype=None, out=None):
    """`cumsum` counting NaNs as 0.

    Example:
        >>> fnp.nancumsum(fnp.array([1.0, fnp.nan, 2.0]))
        Array([1., 1., 3.], dtype=float32)
    """
    check_no_out("nancumsum", out)
    a = asarray_operand("nancumsum", a)
    return cumsum(where(isnan(a), 0, a) if dtype_of(a).kind in "fc" else a, axis, dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """`cumprod` counting NaNs as 1.

    Example:
        >>> fnp.nancumprod(fnp.array([2.0, fnp.nan, 3.0]))
        Array([2., 2., 6.], dtype=float32)
    """
    check_no_out("nancumprod", out)
    a = asarray_operand("nancumprod", a)
    return cumprod(where(isnan(a), 1, a) if dtype_of(a).kind in "fc" else a, axis, dtype)

