"""Set functions of funcgrad.numpy: the Array API's `unique_all`, `unique_counts`,
`unique_inverse`, `unique_values`, NumPy's `unique` (flattened), `isin` and the two-set
operations `union1d`, `intersect1d`, `setdiff1d`, `setxor1d`.

One path, built from lax: a stable sort of the flattened input, a mask of the first element
of each run of equal values, and `nonzero(mask, size=...)` for the run starts. Without
`size=` the input must be concrete (eager): the number of unique values is counted first;
with JAX's `size=`/`fill_value=` the result has a static length and works under every
transform. Imports lax and the sibling numpy modules only.
"""

from typing import NamedTuple

import numpy as np

from funcgrad import dtypes, errors, lax
from funcgrad.core import concrete_value
from funcgrad.numpy import _util
from funcgrad.numpy.indexing import take
from funcgrad.numpy.reductions import cumsum
from funcgrad.numpy.searching import nonzero, searchsorted

__all__ = ["intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique", "unique_all",
           "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _run_starts(name, x, size, equal_nan):
    """(sorted values, sort permutation, new-run mask, run starts padded with x.size, size):
    `size + 1` starts, so the last kept run's count is exact even when truncated."""
    flat = lax.reshape(x, (x.size,))
    idt, n = dtypes.default_int(), x.size
    srt, perm = lax.sort((flat, lax.iota(idt, n)), dimension=0, is_stable=True, num_keys=1)
    new = lax.ne(lax.slice(srt, (1,), (n,)), lax.slice(srt, (0,), (n - 1,)))
    if equal_nan and dtypes.kind(x.dtype) in "fc":
        both_nan = lax.bitwise_and(lax.ne(lax.slice(srt, (1,), (n,)), lax.slice(srt, (1,), (n,))),
                                   lax.ne(lax.slice(srt, (0,), (n - 1,)),
                                          lax.slice(srt, (0,), (n - 1,))))
        new = lax.bitwise_and(new, lax.bitwise_not(both_nan))
    mask = lax.concatenate([lax.full((1,), True, np.dtype(bool)), new], 0)
    if size is None:
        known = concrete_value(mask)
        if known is None:
            raise errors.op_error(
                name, f"the input {x.aval} is traced, so the number of unique values (the "
                "output shape) is unknown", cls=errors.ConcretizationTypeError,
                hint="pass a static size=N (and optionally fill_value=...), as in JAX")
        size = int(np.count_nonzero(known))
    starts = nonzero(mask, size=size + 1, fill_value=n)[0]
    return srt, perm, mask, starts, size


def _unique(name, x, size, fill_value, equal_nan=False):
    """(values, indices, inverse_indices, counts) of `x`, each of length `size` (padded)."""
    x = _util.asarray_operand(name, x)
    if size is not None:
        size = _util.static_int(name, size, "size")
    idt = dtypes.default_int()
    if x.size == 0:
        size = size or 0
        fill = 0 if fill_value is None else fill_value
        return (lax.full((size,), fill, x.dtype), lax.full((size,), 0, idt),
                lax.full(x.shape, 0, idt), lax.full((size,), 0, idt))
    srt, perm, mask, starts, size = _run_starts(name, x, size, equal_nan)
    n = x.size
    first = lax.slice(starts, (0,), (size,))
    counts = lax.sub(lax.slice(starts, (1,), (size + 1,)), first)
    valid = lax.lt(first, lax.full((), n, idt))
    at = lax.min(first, lax.full((), n - 1, idt))
    values = _util.select(valid, _fill(name, fill_value, srt, size), take(srt, at))
    indices = _util.select(valid, lax.full((size,), 0, idt), take(perm, at))
    group = lax.sub(cumsum(lax.convert_element_type(mask, idt)), lax.full((), 1, idt))
    inverse = lax.full((n,), 0, idt).at[perm].set(group, unique_indices=True)
    return values, indices, lax.reshape(inverse, x.shape), counts


def _fill(name, fill_value, srt, size):
    """The padding of `values`: `fill_value`, or (as JAX) the smallest value."""
    if fill_value is None:
        fill = lax.reshape(lax.slice(srt, (0,), (1,)), ())
    else:
        fill = _util.convert(_util.asarray_operand(name, fill_value), srt.dtype, False)
        if fill.ndim:
            raise errors.op_error(name, f"fill_value must be a scalar, got shape {fill.shape}",
                                  cls=errors.FuncgradValueError)
    return lax.broadcast_in_dim(fill, (size,), ())


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique elements of `x` (flattened); NaNs are distinct, as the Array API
    says. With `size=`, exactly `size` values (padded with `fill_value`, default the smallest
    value), which works under jit.

    Example:
        >>> fnp.unique_values(fnp.array([3, 1, 3, 2]))
        Array([1, 2, 3], dtype=int32)
    """
    return _unique("unique_values", x, size, fill_value)[0]


def unique_counts(x, /, *, size=None, fill_value=None):
    """`(values, counts)` of the unique elements of `x`; padded counts are 0.

    Example:
        >>> fnp.unique_counts(fnp.array([3, 1, 3])).counts
        Array([1, 2], dtype=int32)
    """
    values, _, _, counts = _unique("unique_counts", x, size, fill_value)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """`(values, inverse_indices)`: `values[inverse_indices]` rebuilds `x` (same shape).

    Example:
        >>> fnp.unique_inverse(fnp.array([3, 1, 3])).inverse_indices
        Array([1, 0, 1], dtype=int32)
    """
    values, _, inverse, _ = _unique("unique_inverse", x, size, fill_value)
    return UniqueInverseResult(values, inverse)


def unique_all(x, /, *, size=None, fill_value=None):
    """`(values, indices, inverse_indices, counts)`: `indices` of the first occurrences in
    the flattened `x`; padded indices and counts are 0.

    Example:
        >>> fnp.unique_all(fnp.array([3, 1, 3])).indices
        Array([1, 0], dtype=int32)
    """
    return UniqueAllResult(*_unique("unique_all", x, size, fill_value))


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """NumPy's `unique` of the flattened `ar` (NaNs collapse unless `equal_nan=False`), with
    JAX's `size=`/`fill_value=` for use under jit; `inverse` has the shape of `ar`. The
    values are always sorted (`sorted` is accepted: JAX does not use it either).

    Example:
        >>> fnp.unique(fnp.array([2, 1, 2]), return_counts=True)
        (Array([1, 2], dtype=int32), Array([1, 2], dtype=int32))
    """
    if axis is not None:
        raise errors.op_error("unique", "axis= is not supported", hint="flatten or use "
                              "unique over a reshaped array")
    values, index, inverse, counts = _unique("unique", ar, size, fill_value, equal_nan)
    extra = [v for v, on in ((index, return_index), (inverse, return_inverse),
                             (counts, return_counts)) if on]
    return (values, *extra) if extra else values


# --- membership and two-set operations ------------------------------------------------------
def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """Elementwise whether `element` occurs in `test_elements` (any shape), as bools of
    `element`'s shape (`invert`: whether it does not). NaN is never found.

    `method`: "compare_all" (every pair: JAX's "auto"), "binary_search" or "sort" (a sorted
    copy of `test_elements` searched); "auto" compares all pairs up to 2**20 of them, as
    JAX does, and searches beyond. All give the same result.

    Example:
        >>> fnp.isin(fnp.array([1, 2, 3]), fnp.array([3, 1]))
        Array([ True, False,  True], dtype=bool)
    """
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise errors.op_error("isin", f"method={errors.short_repr(method)} is not "
                              "implemented; options are 'compare_all', 'binary_search', 'sort' "
                              "and 'auto'",
                              cls=errors.FuncgradValueError)
    a, b = _util.promote("isin", [element, test_elements], broadcast=False)
    shape = _util.shape_of(a)
    a, b = lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))
    if a.size == 0 or b.size == 0:
        return lax.full(shape, bool(invert), np.dtype(bool))
    if method == "compare_all" or (method == "auto" and a.size * b.size <= 2 ** 20):
        eq = lax.eq(lax.broadcast_in_dim(a, (a.size, b.size), (0,)),
                    lax.broadcast_in_dim(b, (a.size, b.size), (1,)))
        found = lax.reduce_or(eq, (1,))
    else:
        srt = lax.sort(b, dimension=0)
        found = lax.eq(a, take(srt, searchsorted(srt, a), mode="clip"))
    found = lax.reshape(found, shape)
    return lax.bitwise_not(found) if invert else found


def _flat_unique(name, x, assume_unique):
    """(values, first indices, count of valid entries) of the flattened `x`, padded to its
    size (static), so the set operations below trace under jit."""
    x = _util.asarray_operand(name, x)
    x = lax.reshape(x, (x.size,))
    idt = dtypes.default_int()
    if assume_unique or x.size == 0:  # sorted, with the positions
        srt, perm = lax.sort((x, lax.iota(idt, x.size)), dimension=0, num_keys=1)
        return srt, perm, lax.full((), x.size, idt)
    values, index, _, counts = _unique(name, x, x.size, None)
    return values, index, lax.reduce_sum(lax.convert_element_type(
        lax.gt(counts, lax.full((), 0, counts.dtype)), dtypes.default_int()), (0,))


def _kept(name, values, keep, size, fill_value, default_fill):
    """`values` where `keep`, in order, padded to `size` (static; counted from a concrete
    `keep` when None) with `fill_value` (None: `default_fill(kept, valid)`). Returns
    (result, positions in `values`, valid mask)."""
    idt = dtypes.default_int()
    if size is None:
        known = concrete_value(keep)
        if known is None:
            raise errors.op_error(name, "the inputs are traced, so the result's length is "
                                  "unknown", cls=errors.ConcretizationTypeError,
                                  hint="pass a static size=N (and optionally fill_value=...),"
                                       " as in JAX")
        size = int(np.count_nonzero(known))
    size = _util.static_int(name, size, "size")
    n = lax.reduce_sum(lax.convert_element_type(keep, idt), (0,))
    valid = lax.lt(lax.iota(idt, size), lax.broadcast_in_dim(n, (size,), ()))
    if values.size == 0:
        pos = lax.full((size,), 0, idt)
        out = lax.full((size,), 0, values.dtype)
    else:
        pos = nonzero(keep, size=size, fill_value=0)[0]
        out = take(values, pos)
    if fill_value is None:
        fill = default_fill(out, valid)
    else:
        fill = _util.convert(_util.asarray_operand(name, fill_value), values.dtype, False)
    return _util.select(valid, lax.broadcast_in_dim(fill, (size,), ()) if not fill.shape
                        else fill, out), pos, valid


def _zero_fill(out, valid):
    return lax.full((), 0, out.dtype)


def _min_fill(out, valid):
    """JAX's default padding of the set operations: the smallest kept value (0 if none)."""
    if not out.size:
        return lax.full((), 0, out.dtype)
    big = lax.reduce_max(_util.select(valid, lax.full_like(out, 0), out), (0,))
    return lax.reduce_min(_util.select(valid, lax.broadcast_in_dim(big, out.shape, ()), out),
                          (0,))


def _valid_mask(count, size):
    idt = dtypes.default_int()
    return lax.lt(lax.iota(idt, size), lax.broadcast_in_dim(count, (size,), ()))


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of both (flattened) arrays; with `size=`, padded with
    `fill_value` (default: the smallest value), which works under jit.

    Example:
        >>> fnp.union1d(fnp.array([3, 1]), fnp.array([2, 3]))
        Array([1, 2, 3], dtype=int32)
    """
    a, b = _util.promote("union1d", [ar1, ar2], broadcast=False)
    both = lax.concatenate([lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))], 0)
    return _unique("union1d", both, size, fill_value)[0]


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted values in both arrays (flattened); with `return_indices`, also the index
    of each value's first occurrence in each (padding: the arrays' sizes). With `size=`,
    padded with `fill_value` (default: the smallest common value), which works under jit.

    Example:
        >>> fnp.intersect1d(fnp.array([5, 1, 3, 3]), fnp.array([3, 4, 5]))
        Array([3, 5], dtype=int32)
    """
    a, b = _util.promote("intersect1d", [ar1, ar2], broadcast=False)
    u1, i1, n1 = _flat_unique("intersect1d", a, assume_unique)
    u2, i2, n2 = _flat_unique("intersect1d", b, assume_unique)
    keep = lax.bitwise_and(_valid_mask(n1, u1.size), _in_prefix(u1, u2, n2))
    vals, pos, valid = _kept("intersect1d", u1, keep, size, fill_value, _min_fill)
    if not return_indices:
        return vals
    idt = dtypes.default_int()
    first1 = _util.select(valid, lax.full(pos.shape, a.size, idt), take(i1, pos))
    at2 = _position_in(u2, n2, vals)
    first2 = _util.select(valid, lax.full(pos.shape, b.size, idt), take(i2, at2, mode="clip"))
    return vals, first1, first2


def _in_prefix(x, values, n):
    """Whether each entry of `x` is among the first `n` (traced) entries of `values`."""
    if not values.size:
        return lax.full(x.shape, False, np.dtype(bool))
    at = _position_in(values, n, x)
    hit = lax.eq(take(values, at, mode="clip"), x)
    return lax.bitwise_and(hit, lax.lt(at, lax.broadcast_in_dim(n, x.shape, ())))


def _position_in(values, n, x):
    """Where the sorted valid prefix (length `n`) of `values` holds `x` (or would)."""
    idt = dtypes.default_int()
    big = lax.full_like(values, 0)
    if values.dtype.kind in "fc":
        big = lax.full_like(values, np.inf)
    elif values.dtype.kind in "iu":
        big = lax.full_like(values, dtypes.iinfo(values.dtype).max)
    padded = _util.select(_valid_mask(n, values.size), big, values)
    return lax.convert_element_type(searchsorted(padded, x), idt)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted unique values of `ar1` not in `ar2`; with `size=`, padded with
    `fill_value` (default 0, as JAX), which works under jit.

    Example:
        >>> fnp.setdiff1d(fnp.array([5, 1, 3, 3, 7]), fnp.array([3, 4, 5]))
        Array([1, 7], dtype=int32)
    """
    a, b = _util.promote("setdiff1d", [ar1, ar2], broadcast=False)
    u1, _, n1 = _flat_unique("setdiff1d", a, assume_unique)
    out = isin(u1, b, invert=True)
    keep = lax.bitwise_and(_valid_mask(n1, u1.size), out)
    return _kept("setdiff1d", u1, keep, size, fill_value, _zero_fill)[0]


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values in exactly one of the arrays; with `size=`, padded with
    `fill_value` (default: the smallest such value), which works under jit.

    Example:
        >>> fnp.setxor1d(fnp.array([1, 2, 3]), fnp.array([2, 3, 4]))
        Array([1, 4], dtype=int32)
    """
    a, b = _util.promote("setxor1d", [ar1, ar2], broadcast=False)
    both = lax.concatenate([lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,))], 0)
    u, _, n = _flat_unique("setxor1d", both, False)
    once = lax.ne(isin(u, a), isin(u, b))
    keep = lax.bitwise_and(_valid_mask(n, u.size), once)
    return _kept("setxor1d", u, keep, size, fill_value, _min_fill)[0]
